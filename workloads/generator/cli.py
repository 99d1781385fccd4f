"""`python -m workloads generate`: offer a workload to Kafka, or preview it into a file.

Every knob of a scenario's [workload] table is an option named after its path
(workload.delay.mean is --delay-mean), read by the same validator, so an option and a
scenario key accept the same values. `--scenario FILE` starts from a scenario's
workload; options given beside it override its keys.

Exit codes: 0 sent (or written) and acknowledged; 2 a bad option or a broken
environment (the message names the option or the problem, and the fix); 3 a bug;
130/143 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from workloads.errors import Problem, SpecError
from workloads.progress import Progress

# (path in [workload], metavar, parser, help with its unit)
_NUM, _INT, _STR = "number", "integer", "string"
KNOBS: list[tuple[str, str, str, str]] = [
    ("kind", "KIND", _STR,
     "events | nexmark: Nexmark's Person, Auction and Bid events (default: events)"),
    ("proportions", "P,A,B", "ints",
     "nexmark: people, auctions and bids in each P+A+B events (default: 1,3,46)"),
    ("hot_auction_ratio", "N", _INT, "nexmark: a bid's auction is hot with probability 1 - 1/N (default: 2)"),
    ("hot_seller_ratio", "N", _INT,
     "nexmark: an auction's seller is hot with probability 1 - 1/N (default: 4)"),
    ("hot_bidder_ratio", "N", _INT, "nexmark: a bid's bidder is hot with probability 1 - 1/N (default: 4)"),
    ("topic", "NAME", _STR, "Kafka topic (default: events)"),
    ("partitions", "N", _INT,
     "partition count of the topic; key rank mod N picks the partition (default: 2)"),
    ("duration", "DURATION", _STR, 'how long the schedule runs, with a unit: "60s", "5m" (required)'),
    ("max_duration", "DURATION", _STR,
     "a harness run's: how long the workload may go on past --duration while its faults have not "
     "landed (default: 3 x duration); generate alone sends for --duration"),
    ("read_past_batches", "N", _INT,
     "a harness run's: the committed batches past each fault it waits for (default: 3); generate "
     "alone sends for --duration"),
    ("seed", "N", _INT, "seed of every random draw (default: 1)"),
    ("rate.shape", "SHAPE", _STR,
     "constant | ramp | steps | square | sine | burst | custom (default: constant)"),
    ("rate.eps", "EPS", _NUM, "events/s: the constant rate, or the base rate of a burst"),
    ("rate.from_eps", "EPS", _NUM, "ramp: events/s at the start"),
    ("rate.to_eps", "EPS", _NUM, "ramp: events/s at the end of the ramp"),
    ("rate.over", "DURATION", _STR, "ramp: how long the ramp lasts (default: the whole duration)"),
    ("rate.steps", "AT:EPS,...", "steps", 'steps: rates from times on, e.g. "0s:1000,10s:5000,20s:2000"'),
    ("rate.low_eps", "EPS", _NUM, "square: events/s in the low part of each period"),
    ("rate.high_eps", "EPS", _NUM, "square: events/s in the high part of each period"),
    ("rate.period", "DURATION", _STR, "square, sine: the period"),
    ("rate.duty", "FRACTION", _NUM, "square: share of each period at high_eps, 0..1 (default: 0.5)"),
    ("rate.mean_eps", "EPS", _NUM, "sine: the mean rate in events/s"),
    ("rate.amplitude_eps", "EPS", _NUM, "sine: the amplitude in events/s (at most mean_eps)"),
    ("rate.burst_eps", "EPS", _NUM, "burst: events/s during the spike"),
    ("rate.at", "DURATION", _STR, "burst: when the spike starts, from the start of the run"),
    ("rate.length", "DURATION", _STR, "burst: how long the spike lasts"),
    ("rate.class", "MODULE:CLASS", _STR, "custom: a class with tick(elapsed_s) -> events/s or None to end"),
    ("rate.args", "JSON", "json", 'custom: keyword arguments of the class, as a JSON object'),
    ("keys.distribution", "DIST", _STR, "zipf | uniform (default: zipf)"),
    ("keys.count", "N", _INT, "number of distinct keys (default: 100)"),
    ("keys.zipf_s", "S", _NUM, "zipf exponent s: P(rank k) ~ 1/k^s (default: 1.1)"),
    ("keys.hot_share", "FRACTION", _NUM, "share of events sent to the hot keys, 0..1 (default: 0)"),
    ("keys.hot_keys", "N", _INT, "how many keys are hot: ranks 0..N-1 (default: 1)"),
    ("delay.distribution", "DIST",
     _STR, "none | uniform | exponential | lognormal | pareto | groups: event time = send time - delay"),
    ("delay.max", "DURATION", _STR, "uniform: the largest delay, delay ~ U(0, max)"),
    ("delay.mean", "DURATION", _STR, "exponential: the mean delay"),
    ("delay.median", "DURATION", _STR, "lognormal: the median delay, exp(mu)"),
    ("delay.sigma", "SIGMA", _NUM, "lognormal: sd of log(delay), unitless (default: 1)"),
    ("delay.scale", "DURATION", _STR, "pareto: the scale of the Lomax tail"),
    ("delay.alpha", "ALPHA", _NUM, "pareto: the tail index, smaller is heavier (default: 1.5)"),
    ("delay.group_size", "N", _INT, "groups: event times are shuffled within runs of N consecutive events"),
    ("delay.late_share", "FRACTION", _NUM, "share of events made late on purpose, 0..1 (default: 0)"),
    ("delay.late_by", "DURATION", _STR, "how much later those events are sent (default: 60s)"),
    ("time.dilation", "FACTOR", _NUM, "event-time seconds per wall-clock second (default: 1)"),
    ("time.clock_skew", "DURATION[,...]", "skew",
     'per-partition clock offset: one for all, or one per partition, '
     'e.g. "0s,-2s"'),
    ("time.idle", "P:FROM:FOR", "idle", 'partition P sends nothing for FOR from FROM, e.g. "1:10s:5s" '
     "(repeatable)"),
    ("payload.format", "FORMAT", _STR, "record value format: json (default)"),
    ("payload.fields", "F,...", "list", "payload fields among user,item,amount,type (default: all)"),
    ("payload.size", "BYTES", _INT, "pad each value to at least this many bytes (default: 0, no padding)"),
    ("payload.users", "N", _INT, "distinct users (default: 10000)"),
    ("payload.items", "N", _INT, "distinct items (default: 1000)"),
    ("duplicates.share", "FRACTION", _NUM, "share of events sent a second time, same id and event time, "
     "0..1 (default: 0)"),
    ("duplicates.after", "DURATION", _STR, "how much later the copy is sent (default: 1s)"),
]


def option(path: str) -> str:
    return "--" + path.replace(".", "-").replace("_", "-")


def dest(path: str) -> str:
    return "knob_" + path.replace(".", "__")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """A bad option: one line naming it, and where to read more (exit 2)."""
        self.exit(2, f"{self.prog}: error: {message}\n  fix: see `{self.prog} --help` for every option "
                     "and its unit\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m workloads", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    g = sub.add_parser(
        "generate", help="send a workload to Kafka open-loop, or write it to a Parquet file",
        description="Send events open-loop to Kafka at a shaped rate, out of order and skewed, and write "
                    "the ground truth (every event with its partition and offset) as Parquet. Durations "
                    'take a unit: "500ms", "5s", "2m", "1h". Rates are events per second (EPS).',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    where = g.add_argument_group("where the events go")
    where.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="Kafka to send to")
    where.add_argument("--create-topic", action="store_true",
                       help="create the topic (LogAppendTime, --partitions partitions) if it does not exist")
    where.add_argument("--output", metavar="FILE.parquet", type=Path,
                       help="write the events (with their JSON values) to this file instead of Kafka")
    where.add_argument("--truth-dir", metavar="DIR", type=Path,
                       help="where ground truth and report.json go (default: results/generate-<time>/)")
    how = g.add_argument_group("how")
    how.add_argument("--scenario", metavar="FILE.toml", type=Path,
                     help="start from this scenario's [workload]; options override its keys")
    how.add_argument("--no-pace", action="store_true",
                     help="send (or write) as fast as possible, ignoring the schedule's send times")
    how.add_argument("--start-ms", metavar="EPOCH_MS", type=int,
                     help="the schedule's origin in epoch milliseconds (default: now + 0.5 s); with the seed "
                          "it fixes every event's key, event time and partition")
    how.add_argument("--processes", metavar="N", type=int, default=1,
                     help="generator processes sharing the plan, event_id mod N each (default: 1)")
    for section in ("", "rate", "keys", "delay", "time", "payload", "duplicates"):
        title = f"workload.{section}" if section else "workload"
        grp = g.add_argument_group(f"[{title}] knobs")
        for path, metavar, kind, text in KNOBS:
            if (path.split(".")[0] if "." in path else "") != section:
                continue
            kwargs: dict[str, Any] = {"metavar": metavar, "help": text, "dest": dest(path)}
            if kind == _INT:
                kwargs["type"] = int
            elif kind == _NUM:
                kwargs["type"] = _number
            elif kind == "idle":
                kwargs["action"] = "append"
            grp.add_argument(option(path), **kwargs)
    return p


def _number(text: str) -> float | int:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _convert(kind: str, value: Any, path: str) -> Any:
    if kind == "steps":
        steps = []
        for part in value.split(","):
            at, _, eps = part.partition(":")
            try:
                steps.append([at.strip(), _number(eps)])
            except ValueError:
                raise SpecError(f"{option(path)} {value!r}: {part!r} is not AT:EPS",
                                    'write e.g. --rate-steps "0s:1000,10s:5000"') from None
        return steps
    if kind == "json":
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{option(path)} {value!r}: not JSON ({exc})",
                                "write a JSON object, e.g. '{\"peak\": 5000}'") from None
    if kind == "skew":
        parts = [p.strip() for p in value.split(",")]
        return parts[0] if len(parts) == 1 else parts
    if kind == "list":
        return [p.strip() for p in value.split(",") if p.strip()]
    if kind == "ints":
        try:
            return [int(p) for p in value.split(",")]
        except ValueError:
            raise SpecError(f"{option(path)} {value!r}: not integers",
                            f"write e.g. {option(path)} 1,3,46") from None
    if kind == "idle":
        out = []
        for item in value:
            bits = item.split(":")
            if len(bits) != 3 or not bits[0].isdigit():
                raise SpecError(f"{option(path)} {item!r}: expected P:FROM:FOR",
                                    'write e.g. --time-idle "1:10s:5s"')
            out.append({"partition": int(bits[0]), "from": bits[1], "for": bits[2]})
        return out
    return value


def workload_table(args: argparse.Namespace) -> dict:
    """The [workload] table the options describe (on top of --scenario's, if any)."""
    table: dict = {}
    if args.scenario is not None:
        try:
            raw = tomllib.loads(args.scenario.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SpecError(f"--scenario {args.scenario}: {exc}",
                                "pass a readable scenario TOML file") from None
        table = raw.get("workload", {})
    for path, _, kind, _ in KNOBS:
        value = getattr(args, dest(path))
        if value is None:
            continue
        *parents, leaf = path.split(".")
        node = table
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = _convert(kind, value, path)
    return table


_PATH = re.compile(r"workload\.([A-Za-z_.]+)")
_MISSING = re.compile(r"add `(\w+) = \.\.\.` to \[workload\.?([\w.]*)\]")


def _name_options(message: str) -> str:
    """'workload.delay.mean = ...' -> '--delay-mean = ...': errors speak in options."""
    known = {path for path, *_ in KNOBS}
    # "add `max = ...` to [workload.delay]" -> "pass --delay-max"
    message = _MISSING.sub(lambda m: f"pass {option('.'.join(filter(None, (m[2], m[1]))))}", message)

    def repl(m: re.Match) -> str:
        path = m[1]
        while path and path not in known:
            path = path.rpartition(".")[0]
        return option(path) + m[1][len(path):] if path else m[0]
    return _PATH.sub(repl, message)


def main(argv: list[str] | None = None) -> int:
    from workloads.errors import Interrupted

    args = parser().parse_args(argv)
    try:
        return _generate(args)
    except SpecError as exc:
        fix = f"\n  fix: {_name_options(exc.fix)}" if exc.fix else ""
        print(f"error: {_name_options(exc.problem)}{fix}",
              file=sys.stderr)
        return 2
    except Problem as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Interrupted as exc:
        print(f"aborted: {exc}", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print("aborted: interrupted; ground truth so far is in the truth directory", file=sys.stderr)
        return 130


def _generate(args: argparse.Namespace) -> int:
    from workloads.generator import spec as spec_mod

    if args.processes < 1:
        raise SpecError(f"--processes {args.processes}: must be >= 1", "pass 1 or more")
    if args.output is None and not args.bootstrap_servers:
        raise SpecError("neither --bootstrap-servers nor --output is given",
                            "send to Kafka with --bootstrap-servers HOST:PORT, "
                            "or preview with --output FILE.parquet")
    if args.output is not None and args.bootstrap_servers:
        raise SpecError("--output and --bootstrap-servers are both given",
                            "choose one: --output writes a file instead of sending")
    table = workload_table(args)
    if "duration" not in table:
        raise SpecError("--duration is missing", 'give how long to run, e.g. --duration 60s')
    spec = spec_mod.parse(table)
    if args.output is not None:
        if args.processes != 1:
            raise SpecError("--processes applies to sending only", "drop --processes with --output")
        return _preview(spec, args)
    out_dir = args.truth_dir or _results_dir() / time.strftime("generate-%Y%m%d-%H%M%S")
    return _send(spec, args, Path(out_dir))


def _send(spec, args, out_dir: Path) -> int:
    from workloads import generator

    out_dir.mkdir(parents=True, exist_ok=True)
    truth_dir = out_dir / "truth"
    if truth_dir.exists() and any(truth_dir.iterdir()):
        raise SpecError(f"--truth-dir {out_dir}: it already holds ground truth",
                            "pass an empty or new directory, so no earlier run's truth is mixed in")
    if args.create_topic:
        generator.create_topic(args.bootstrap_servers, spec.topic, spec.partitions, exist_ok=True)
    status = Progress()

    def progress(sent: int, planned: int) -> None:
        status.update(f"sent {sent:,}{f'/{planned:,}' if planned else ''}")

    if args.processes == 1:
        report = generator.generate(spec, args.bootstrap_servers, truth_dir, start_ms=args.start_ms,
                                    pace=not args.no_pace, progress=progress)
    else:
        report = generator.generate_parallel(spec, args.bootstrap_servers, truth_dir, args.processes,
                                             start_ms=args.start_ms, pace=not args.no_pace)
    status.done()
    generator.write_report(out_dir / "report.json", report)
    print(render(report))
    print(f"ground truth: {truth_dir}/\nreport:       {out_dir / 'report.json'}")
    return 0


def _results_dir() -> Path:
    """Where a send without --truth-dir writes: $HARNESS_RESULTS, else the checkout's results/."""
    default = Path(__file__).resolve().parents[2] / "results"
    return Path(os.environ.get("HARNESS_RESULTS", default))


def render(report: dict) -> str:
    """A few lines a person reads: counts, rates, slip, partitions."""
    error = report["pacing_error"]
    lines = [f"events      {report['events']:,} to {report['topic']} ({report['failed']:,} failed, "
             f"{report['late_by_design']:,} late by design)",
             f"rate        target {report['target_eps']:,.0f}/s  achieved {report['achieved_eps']:,.0f}/s"
             + (f"  error {error:+.2%}" if error is not None else "  (unpaced)")
             + f"  to the last ack {report['acked_eps']:,.0f}/s"]
    slip = report.get("schedule_slip_us")
    if slip:
        lines.append("slip        "
                     + "  ".join(f"{q} {slip[q] / 1000:,.2f} ms" for q in ("p50", "p99", "p99.9"))
                     + f"  max {slip['max'] / 1000:,.2f} ms")
    lines.append("partitions  " + " ".join(f"{n:,}" for n in report["per_partition"]))
    return "\n".join(lines)


def _preview(spec, args) -> int:
    """The same events as sending would give, written to a Parquet file without Kafka."""
    import numpy as np
    import pyarrow as pa

    from workloads.generator import truth
    from workloads.generator.encode import encoder_for
    from workloads.generator.plan import Planner

    start_ms = args.start_ms if args.start_ms is not None else time.time_ns() // 1_000_000 + 500
    planner = Planner(spec, start_ms)
    encoder = encoder_for(spec, planner.keys.names)
    writer = truth.TruthWriter(args.output, planner.keys.names, pa.schema([("value", pa.string())]))
    n, status = 0, Progress()
    try:
        for block in planner:
            if args.no_pace:
                sent_us = block.intended_us
            else:
                wait_s = (int(block.intended_us[-1]) - time.time_ns() // 1000) / 1e6 if len(block) else 0
                if wait_s > 0:
                    time.sleep(wait_s)
                sent_us = np.maximum(block.intended_us, time.time_ns() // 1000)
            none = np.full(len(block), -1, dtype=np.int64)
            writer.write(block, sent_us, none, none, np.zeros(len(block), dtype=bool),
                         extra={"value": encoder.array(block)})
            n += len(block)
            status.update(f"written {n:,}")
    finally:
        writer.close()
        status.done()
    print(f"wrote {n:,} events to {args.output} (offset and append_ms are -1: nothing was sent)")
    return 0
