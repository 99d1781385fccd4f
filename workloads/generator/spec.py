"""The workload: every knob of the generator as one frozen, validated object.

The `[workload]` table of a scenario and the options of `python -m workloads generate`
are read by the same `parse()` from the same nested table, so both accept exactly the
same knobs with the same checks; the CLI names an option after its path in the table
(workload.delay.mean is --delay-mean).

    [workload]            kind = events | nexmark, topic, partitions, duration, seed;
                          with kind = "nexmark": proportions, hot_auction_ratio,
                          hot_seller_ratio, hot_bidder_ratio (workloads/generator/nexmark.py)
    [workload.rate]       shape = constant | ramp | steps | square | sine | burst | custom
    [workload.keys]       distribution = zipf | uniform, count, zipf_s, hot_share, hot_keys
    [workload.delay]      distribution = none | uniform | exponential | lognormal | pareto
                          | groups, with its parameters; late_share, late_by
    [workload.time]       dilation, clock_skew, idle (partitions that pause)
    [workload.payload]    format, fields, size, users, items
    [workload.duplicates] share, after: re-send that share of events (same id, same
                          event time, same fields) `after` later, as a producer retry would

`duration` is how long the workload is sent at least. A harness run with faults goes on past
it while a fault has not landed or the query has not read past it (`read_past_batches`
committed batches beyond what was sent when the fault was seen), up to `max_duration`
(default 3 x `duration`); `python -m workloads generate` alone sends for `duration`.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from workloads.errors import SpecError
from workloads.generator import delays, keys, shapes
from workloads.generator.delays import DelaySpec
from workloads.generator.keys import KeySpec
from workloads.validate import REQUIRED, Section, bad, parse_duration_ms, wrong_type

MAX_RATE_EPS = 1_000_000  # beyond what the generator processes of one machine can offer
TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")  # Kafka's own rule for topic names
PAYLOAD_FIELDS = ("user", "item", "amount", "type")
FORMATS = ("json",)

TOP_KEYS = ("kind", "topic", "partitions", "duration", "seed", "rate", "keys", "delay", "time", "payload",
        "duplicates", "proportions", "hot_auction_ratio", "hot_seller_ratio", "hot_bidder_ratio",
        "max_duration", "read_past_batches")
MAX_DURATION_FACTOR = 3     # max_duration's default: this many times the duration
READ_PAST_BATCHES = 3       # read_past_batches's default
WORKLOAD_KINDS = ("events", "nexmark")   # `[workload] kind`
NEXMARK_KEYS = ("proportions", "hot_auction_ratio", "hot_seller_ratio", "hot_bidder_ratio")
# the keys each rate shape uses (besides `shape`)
RATE_KEYS = {
    "constant": ("eps",),
    "ramp": ("from_eps", "to_eps", "over"),
    "steps": ("steps",),
    "square": ("low_eps", "high_eps", "period", "duty"),
    "sine": ("mean_eps", "amplitude_eps", "period"),
    "burst": ("eps", "burst_eps", "at", "length"),
    "custom": ("class", "args"),
}
DELAY_KEYS = {
    "none": (),
    "uniform": ("max",),
    "exponential": ("mean",),
    "lognormal": ("median", "sigma"),
    "pareto": ("scale", "alpha"),
    "groups": ("group_size",),
}
_ALL_RATE_KEYS = ("shape",) + tuple(dict.fromkeys(k for ks in RATE_KEYS.values() for k in ks))
_ALL_DELAY_KEYS = (("distribution", "late_share", "late_by")
                   + tuple(dict.fromkeys(k for ks in DELAY_KEYS.values() for k in ks)))


@dataclass(frozen=True, kw_only=True)
class IdleSpec:
    """Partition `partition` sends nothing from `from_s` for `for_s` seconds of the run."""

    partition: int
    from_s: float
    for_s: float


@dataclass(frozen=True, kw_only=True)
class TimeSpec:
    dilation: float = 1.0                     # event-time seconds per wall-clock second
    clock_skew_ms: tuple[int, ...] = ()       # added to the event time of each partition
    idle: tuple[IdleSpec, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PayloadSpec:
    format: str = "json"
    fields: tuple[str, ...] = PAYLOAD_FIELDS
    size_bytes: int = 0                       # pad each value to at least this many bytes
    users: int = 10_000
    items: int = 1_000


@dataclass(frozen=True, kw_only=True)
class DuplicatesSpec:
    share: float = 0.0                        # of events sent a second time
    after_ms: int = 1000                      # how much later the copy is sent


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec:
    """What the generator offers. `rate` is a shape already bounded by `duration_s`."""

    topic: str = "events"
    partitions: int = 2
    duration_s: float
    seed: int = 1
    rate: Any                                 # a shapes.RateShape
    keys: KeySpec = field(default_factory=KeySpec)
    delay: DelaySpec = field(default_factory=DelaySpec)
    time: TimeSpec = field(default_factory=TimeSpec)
    payload: PayloadSpec = field(default_factory=PayloadSpec)
    duplicates: DuplicatesSpec = field(default_factory=DuplicatesSpec)
    kind: str = "events"                      # events, or nexmark: Person, Auction and Bid
    nexmark: Any = None                       # a nexmark.NexmarkSpec when kind is nexmark
    # how long a harness run may go on past duration_s while its faults have not landed and been
    # read past (None: MAX_DURATION_FACTOR x duration_s), and the committed batches past each
    # fault it waits for
    max_duration_s: float | None = None
    read_past_batches: int = READ_PAST_BATCHES

    @property
    def cap_s(self) -> float:
        """The longest the workload may last: max_duration, never under the duration (a spec
        whose duration was replaced keeps its cap's meaning)."""
        cap = MAX_DURATION_FACTOR * self.duration_s if self.max_duration_s is None else self.max_duration_s
        return max(cap, self.duration_s)

    @property
    def mean_eps(self) -> float:
        """The events per second the whole workload offers on average."""
        return shapes.expected_count(self.shape) / self.duration_s if self.duration_s else 0.0

    @property
    def shape(self) -> shapes.Bounded:
        return shapes.Bounded(self.rate, self.duration_s)

    def describe(self) -> dict:
        """Plain JSON types, for summaries and reports."""
        out = {"topic": self.topic, "partitions": self.partitions, "duration_s": self.duration_s,
               "seed": self.seed, "rate": shapes.describe(self.rate),
               **{k: asdict(getattr(self, k)) for k in ("keys", "delay", "time", "payload", "duplicates")}}
        if self.kind != "events":
            out.update(kind=self.kind, nexmark=asdict(self.nexmark))
        # only when given: at their defaults a scenario's fingerprint is what it was before them
        if self.max_duration_s is not None:
            out["max_duration_s"] = self.max_duration_s
        if self.read_past_batches != READ_PAST_BATCHES:
            out["read_past_batches"] = self.read_past_batches
        return out


def parse(raw: Any, path: str = "workload") -> WorkloadSpec:
    """Validate the workload table `raw` (as tomllib gives it); errors name `path`.<key>."""
    s = Section(raw, path, TOP_KEYS)
    partitions = s.integer("partitions", 2, ge=1, le=10_000)
    duration_ms = s.duration_ms("duration", gt=0)
    spec = WorkloadSpec(
        topic=s.string("topic", "events", pattern=TOPIC),
        partitions=partitions,
        duration_s=duration_ms / 1000,
        seed=s.integer("seed", 1, ge=0, lt=2**63),  # numpy's default_rng refuses negative seeds
        rate=_rate(s.table("rate", _ALL_RATE_KEYS), duration_ms / 1000),
        keys=_keys(s.table("keys", ("distribution", "count", "zipf_s", "hot_share", "hot_keys"))),
        delay=_delay(s.table("delay", _ALL_DELAY_KEYS)),
        time=_time(s.table("time", ("dilation", "clock_skew", "idle")), partitions, duration_ms),
        payload=_payload(s.table("payload", ("format", "fields", "size", "users", "items"))),
        duplicates=_duplicates(s.table("duplicates", ("share", "after"))),
        kind=s.choice("kind", WORKLOAD_KINDS, "events"),
        nexmark=_nexmark(s),
        max_duration_s=_max_duration_s(s, duration_ms),
        read_past_batches=s.integer("read_past_batches", READ_PAST_BATCHES, ge=1, le=1000),
    )
    _check_sends_events(spec, path)
    return spec


def _max_duration_s(s: Section, duration_ms: int) -> float | None:
    """max_duration: at least the duration (the workload runs that long in any case)."""
    if "max_duration" not in s:
        return None
    max_ms = s.duration_ms("max_duration", gt=0)
    if max_ms < duration_ms:
        raise bad(s.field("max_duration"), s.raw("max_duration"),
                  f"is shorter than {s.field('duration')} ({s.raw('duration')}): the workload is sent for "
                  "its duration at least, and max_duration caps how long it may go on after it",
                  f"make max_duration at least {s.raw('duration')}, or drop it (default "
                  f"{MAX_DURATION_FACTOR} x duration: {MAX_DURATION_FACTOR * duration_ms / 1000:g}s)")
    return max_ms / 1000


def _nexmark(s: Section):
    """Nexmark's knobs, read only with kind = "nexmark" (elsewhere they would be ignored)."""
    from workloads.generator.nexmark import NexmarkSpec

    kind = s.choice("kind", WORKLOAD_KINDS, "events")
    given = [k for k in NEXMARK_KEYS if k in s]
    if kind != "nexmark":
        if given:
            raise SpecError(f"{s.field(given[0])} is a Nexmark knob, and {s.field('kind')} is {kind!r}",
                            f'write kind = "nexmark", or remove {s.field(given[0])}')
        return None
    if "payload" in s:
        raise SpecError(f"{s.field('payload')} does not apply to kind = \"nexmark\": each Nexmark event "
                        "carries its own fields, padded to Nexmark's sizes by `extra`",
                        f"remove {s.field('payload')}")
    raw = s.raw("proportions", [1, 3, 46])
    if (not isinstance(raw, list) or len(raw) != 3 or not all(isinstance(x, int) and not isinstance(x, bool)
                                                              for x in raw) or min(raw) < 1):
        raise bad(s.field("proportions"), raw, "is not three positive integers (person, auction, bid)",
                  "write proportions = [1, 3, 46], Nexmark's")
    return NexmarkSpec(proportions=(raw[0], raw[1], raw[2]),
                       hot_auction_ratio=s.integer("hot_auction_ratio", 2, ge=1, le=1_000_000),
                       hot_seller_ratio=s.integer("hot_seller_ratio", 4, ge=1, le=1_000_000),
                       hot_bidder_ratio=s.integer("hot_bidder_ratio", 4, ge=1, le=1_000_000))


def _duplicates(s: Section) -> DuplicatesSpec:
    return DuplicatesSpec(share=s.number("share", 0.0, ge=0, le=1),
                          after_ms=s.duration_ms("after", "1s", ge=0))


def _only(s: Section, choice: str, what: str, used: dict[str, tuple[str, ...]], always: tuple[str, ...]):
    """Refuse keys that the chosen shape or distribution does not read: they would be ignored."""
    for key in s.data:
        if key not in always and key not in used[choice]:
            takes = ", ".join(used[choice]) or "no parameters"
            raise SpecError(f"{s.field(key)} is not used by {what} {choice!r} (it takes {takes})",
                                f"remove {s.field(key)}, or choose the {what} that uses it")


def _rate_number(s: Section, key: str, default: Any = REQUIRED, **bounds) -> float:
    """A rate in events/s: >= 0 (or > 0 when asked) and at most MAX_RATE_EPS."""
    return s.number(key, default, **({"gt": 0} if "gt" in bounds else {"ge": 0}), le=MAX_RATE_EPS)


def _rate(s: Section, duration_s: float):
    shape = s.choice("shape", tuple(RATE_KEYS), "constant")
    _only(s, shape, "rate shape", RATE_KEYS, ("shape",))
    if shape == "constant":
        return shapes.Constant(_rate_number(s, "eps", gt=0))
    if shape == "ramp":
        over = s.duration_ms("over", f"{duration_s}s", gt=0) / 1000
        return shapes.Ramp(_rate_number(s, "from_eps"), _rate_number(s, "to_eps"), over)
    if shape == "steps":
        return shapes.Steps(_steps(s))
    if shape == "square":
        return shapes.Square(_rate_number(s, "low_eps"), _rate_number(s, "high_eps"),
                             s.duration_ms("period", gt=0) / 1000, s.number("duty", 0.5, gt=0, lt=1))
    if shape == "sine":
        mean = _rate_number(s, "mean_eps", gt=0)
        amplitude = s.number("amplitude_eps", ge=0)
        if amplitude > mean:
            raise bad(s.field("amplitude_eps"), s.raw("amplitude_eps"),
                      f"is larger than mean_eps ({mean:g}): the rate would go negative",
                      "make amplitude_eps at most mean_eps")
        if mean + amplitude > MAX_RATE_EPS:
            raise bad(s.field("amplitude_eps"), s.raw("amplitude_eps"),
                      f"mean_eps + amplitude_eps exceeds {MAX_RATE_EPS:,} events/s", "lower either")
        return shapes.Sine(mean, amplitude, s.duration_ms("period", gt=0) / 1000)
    if shape == "burst":
        return shapes.Burst(_rate_number(s, "eps"), _rate_number(s, "burst_eps"),
                            s.duration_ms("at") / 1000, s.duration_ms("length", gt=0) / 1000)
    return _custom(s)


def _steps(s: Section) -> tuple[tuple[float, float], ...]:
    raw = s.raw("steps")
    example = 'steps = [["0s", 1000], ["10s", 5000]]'
    if not isinstance(raw, list) or not raw:
        raise (wrong_type(s.field("steps"), raw, "an array of [at, eps] pairs", f"write {example}")
               if raw is not None else SpecError(f"{s.field('steps')} is missing", f"add {example}"))
    steps: list[tuple[float, float]] = []
    for i, item in enumerate(raw):
        where = f"{s.field('steps')}[{i}]"
        if not (isinstance(item, list) and len(item) == 2):
            raise bad(where, item, "expected an [at, eps] pair", f"write {example}")
        at_s = parse_duration_ms(item[0], where + "[0]") / 1000
        eps = item[1]
        if not isinstance(eps, int | float) or isinstance(eps, bool) or not 0 <= eps <= MAX_RATE_EPS:
            raise bad(where + "[1]", eps, f"must be a number from 0 to {MAX_RATE_EPS:,} (events/s)",
                      f"write {example}")
        if steps and at_s <= steps[-1][0]:
            raise bad(where, item, "steps must be in increasing order of time", "sort them by their at")
        steps.append((at_s, float(eps)))
    if steps[0][0] != 0:
        raise bad(f"{s.field('steps')}[0]", raw[0], "the first step must start at \"0s\"",
                  'start the list with ["0s", <eps>]')
    return tuple(steps)


def _custom(s: Section):
    target = s.string("class")
    module_name, _, attr = target.partition(":")
    if not attr:
        raise bad(s.field("class"), target, "expected module:Class", 'write e.g. "mypackage.shapes:Diurnal"')
    args = s.raw("args", {})
    if not isinstance(args, dict):
        raise wrong_type(s.field("args"), args, "a table", "write args = { name = value, ... }")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise bad(s.field("class"), target, f"cannot be imported: {exc}",
                  "check the module is on PYTHONPATH and defines the class") from None
    try:
        shape = cls(**args)
    except TypeError as exc:
        raise bad(s.field("args"), args, f"{target} does not accept them: {exc}",
                  "pass the arguments its constructor takes") from None
    if not callable(getattr(shape, "tick", None)):
        raise bad(s.field("class"), target, "has no tick(elapsed_s) method",
                  "give the class a tick(elapsed_s) method returning events/s or None")
    return shape


def _keys(s: Section) -> KeySpec:
    spec = KeySpec(distribution=s.choice("distribution", keys.DISTRIBUTIONS, "zipf"),
                   count=s.integer("count", 100, ge=1, le=10_000_000),
                   zipf_s=s.number("zipf_s", 1.1, gt=0),
                   hot_share=s.number("hot_share", 0.0, ge=0, le=1),
                   hot_keys=s.integer("hot_keys", 1, ge=1))
    if spec.distribution != "zipf" and "zipf_s" in s:
        raise SpecError(f"{s.field('zipf_s')} is only used with distribution \"zipf\"",
                            'remove zipf_s, or set distribution = "zipf"')
    if spec.hot_keys > spec.count:
        raise bad(s.field("hot_keys"), spec.hot_keys, f"is more than count ({spec.count})",
                  "make hot_keys at most the number of keys")
    return spec


def _delay(s: Section) -> DelaySpec:
    dist = s.choice("distribution", delays.DISTRIBUTIONS, "none")
    _only(s, dist, "delay distribution", DELAY_KEYS, ("distribution", "late_share", "late_by"))
    params: dict[str, Any] = {}
    if dist == "uniform":
        params["max_ms"] = s.duration_ms("max", gt=0)
    elif dist == "exponential":
        params["mean_ms"] = s.duration_ms("mean", gt=0)
    elif dist == "lognormal":
        params["median_ms"] = s.duration_ms("median", gt=0)
        params["sigma"] = s.number("sigma", 1.0, gt=0, le=10)
    elif dist == "pareto":
        params["scale_ms"] = s.duration_ms("scale", gt=0)
        params["alpha"] = s.number("alpha", 1.5, gt=0)
    elif dist == "groups":
        params["group_size"] = s.integer("group_size", ge=2, le=65_536)
    return DelaySpec(distribution=dist, **params,
                     late_share=s.number("late_share", 0.0, ge=0, lt=1),
                     late_by_ms=s.duration_ms("late_by", "60s"))


def _time(s: Section, partitions: int, duration_ms: int) -> TimeSpec:
    skew_raw = s.raw("clock_skew", [])
    if isinstance(skew_raw, str):
        skew = (_signed_duration_ms(skew_raw, s.field("clock_skew")),) * partitions
    elif isinstance(skew_raw, list):
        skew = tuple(_signed_duration_ms(v, f"{s.field('clock_skew')}[{i}]") for i, v in enumerate(skew_raw))
        if skew and len(skew) != partitions:
            raise bad(s.field("clock_skew"), skew_raw,
                      f"has {len(skew)} entries for {partitions} partitions",
                      "give one duration per partition, or one string for all")
    else:
        raise wrong_type(s.field("clock_skew"), skew_raw, 'a duration or an array of durations',
                         'write e.g. clock_skew = ["0s", "2s", "-1s"]')
    return TimeSpec(dilation=s.number("dilation", 1.0, gt=0, le=100_000), clock_skew_ms=skew,
                    idle=_idle(s, partitions, duration_ms))


def _signed_duration_ms(value: Any, where: str) -> int:
    """A duration that may be negative: a clock may run behind."""
    if isinstance(value, str) and value.strip().startswith("-"):
        return -parse_duration_ms(value.strip()[1:], where)
    return parse_duration_ms(value, where)


def _idle(s: Section, partitions: int, duration_ms: int) -> tuple[IdleSpec, ...]:
    raw = s.raw("idle", [])
    if not isinstance(raw, list):
        raise wrong_type(s.field("idle"), raw, "an array of tables",
                         'write [[workload.time.idle]] tables with partition, from and for')
    out = []
    for i, item in enumerate(raw):
        t = Section(item, f"{s.field('idle')}[{i}]", ("partition", "from", "for"))
        out.append(IdleSpec(partition=t.integer("partition", ge=0, lt=partitions),
                            from_s=t.duration_ms("from", lt=duration_ms) / 1000,
                            for_s=t.duration_ms("for", gt=0) / 1000))
    return tuple(out)


def _payload(s: Section) -> PayloadSpec:
    fields_raw = s.raw("fields", list(PAYLOAD_FIELDS))
    if not isinstance(fields_raw, list) or not all(isinstance(f, str) for f in fields_raw):
        raise wrong_type(s.field("fields"), fields_raw, "an array of strings",
                         f"write fields = {list(PAYLOAD_FIELDS)}")
    for f in fields_raw:
        if f not in PAYLOAD_FIELDS:
            raise bad(s.field("fields"), fields_raw, f"unknown field {f!r}",
                      f"choose from {', '.join(PAYLOAD_FIELDS)} "
                      "(event_id, key and event_time_ms are always sent)")
    return PayloadSpec(format=s.choice("format", FORMATS, "json"),
                       fields=tuple(dict.fromkeys(fields_raw)),
                       size_bytes=s.integer("size", 0, ge=0, le=1_000_000),
                       users=s.integer("users", 10_000, ge=1), items=s.integer("items", 1_000, ge=1))


def _check_sends_events(spec: WorkloadSpec, path: str) -> None:
    # a custom shape is the user's code: it is not run before the generator starts
    if isinstance(spec.rate, tuple(shapes.BUILT_IN.values())) and shapes.expected_count(spec.shape) < 1:
        raise SpecError(f"{path}: the rate shape sends no event in duration {spec.duration_s:g}s",
                            "raise the rate or the duration")
