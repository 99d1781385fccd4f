"""Every built-in pipeline, registered once with the oracle that checks it, and a scenario's
own pipeline, which brings its build and oracle itself (`CustomPipeline`).

A pipeline is what a case runs and what its output is checked against: its name, its
scenario keys (`params`), its output columns, the `build` the driver calls, and its
oracle. The query lives in `workloads/pipelines/<module>.py` (it runs in the driver
process), the oracle in `harness/check/<module>.py` (it runs in the harness); this table
is the one place where the two meet, so a pipeline cannot exist without its oracle, and
everything the checker and the findings must know of one is declared here:

  delivered_weight     a column saying how many events a row stands for (a windowed count's
                       `count`): the delivered throughput counts events, not rows
  unit                 how the findings tell its anomalies: "events" (rows carry event_id),
                       "windows" (per (event, window) pair), "rows" (by their key columns)
  extra_truth_columns  columns of ground truth its oracle reads beyond the checker's own
  watermark_oracle     whether the one-input watermark rule applies (a self-join has two inputs)
  sliced               the function checking a large run from its files, in bounded memory

Adding a pipeline is a module in each of those folders plus one line in `PIPELINES`.
`of(pipeline)` gives the entry for any scenario pipeline, built-in, custom or a user's job:
each kind of entry answers the one protocol `Entry`, which is all the checker, the drain and
the findings ask of a pipeline. Every module is imported by its name (lint-imports sees each
arrow); the registry lives with the checker, whose oracles it names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from harness.check import (
    custom,
    dedup,
    join,
    large_windows,
    logins,
    nexmark,
    sessions,
    streaks,
    topn,
    windows,
)
from harness.check import passthrough as passthrough_check
from harness.check.batch_oracle.oracle import JobPipeline
from workloads.pipelines import dedup as dedup_query
from workloads.pipelines import (
    failed_logins,
    order_payment_join,
    session_count,
    sliding_top_n,
    streak_count,
    tumbling_count,
)
from workloads.pipelines import nexmark as nexmark_query
from workloads.pipelines import passthrough as passthrough_query

CUSTOM = "custom"   # the user's own query and oracle: no module of ours
JOB = "job"         # the user's own job, checked by Spark's batch engine (harness/check/batch_oracle/)
EVENTS, WINDOWS, ROWS = "events", "windows", "rows"


class Entry(Protocol):
    """What the checker, the drain and the findings ask of any pipeline's entry."""

    @property
    def name(self) -> str: ...

    @property
    def unit(self) -> str: ...

    @property
    def delivered_weight(self) -> str | None: ...

    @property
    def extra_truth_columns(self) -> tuple[str, ...]: ...

    @property
    def watermark_oracle(self) -> bool: ...

    def in_case(self, case_dir: Path) -> Entry:
        """The entry bound to its case's directory (a job reads its plan there); others as they are."""

    def check(self, truth, sink, batches, pipeline) -> Any:
        """The sink's rows against ground truth (a harness.check.result.CheckResult)."""

    def final_watermark_ms(self, max_event_time_ms: int, pipeline) -> int | None:
        """The watermark at which all the run's output is final (None: the offsets decide)."""

    def drain_wait(self) -> str | None:
        """Which operators' output waits for the watermark, in words (None: the generic words)."""

    def check_files(self) -> Callable | None:
        """Its check of a large run from the run's files, or None."""


@dataclass(frozen=True)
class PipelineKind:
    """A built-in pipeline: its query's module, its oracle's module, and what the checker and the
    findings must know of it."""

    name: str
    query: ModuleType                 # workloads.pipelines.<x>: PARAMS, COLUMNS, build(...)
    oracle: ModuleType                # harness.check.<x>: check(...), final_watermark_ms(...)
    delivered_weight: str | None = None
    unit: str = ROWS
    extra_truth_columns: tuple[str, ...] = ()
    watermark_oracle: bool = True
    sliced: Callable | None = None    # (files, batches, params) -> CheckResult

    @property
    def params(self) -> tuple:
        return self.query.PARAMS

    @property
    def columns(self) -> Mapping[str, str]:
        return dict(self.query.COLUMNS)

    def columns_for(self, values: Mapping[str, Any]) -> Mapping[str, str]:
        """The output columns of the pipeline with these keys (a Nexmark query's own)."""
        own = getattr(self.query, "columns_for", None)
        return dict(own(dict(values))) if own is not None else self.columns

    @property
    def build(self) -> str:
        """"module:build", as the driver process loads it."""
        return f"{self.query.__name__}:build"

    @property
    def stateless(self) -> bool:
        """Whether the query keeps no state (Spark's real-time mode runs only such queries)."""
        return getattr(self.query, "STATELESS", False)

    def stateless_for(self, values: Mapping[str, Any]) -> bool:
        own = getattr(self.query, "stateless_for", None)
        return bool(own(dict(values))) if own is not None else self.stateless

    @property
    def available_now_refused(self) -> str | None:
        """Why the query cannot run as an available-now job, when it cannot (streak_count)."""
        return getattr(self.query, "AVAILABLE_NOW_REFUSED", None)

    @property
    def state_stores(self) -> tuple[str, ...] | None:
        """The state stores it runs on, when not every one (transformWithState: RocksDB)."""
        return getattr(self.query, "STATE_STORES", None)

    def state_stores_for(self, values: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The state stores it runs on with these keys (a Nexmark query on transformWithState)."""
        own = getattr(self.query, "state_stores_for", None)
        return own(dict(values)) if own is not None else self.state_stores

    def check_params(self, values: dict) -> None:
        """Raise SpecError when its keys contradict each other (a window shorter than its slide)."""
        check = getattr(self.query, "check_params", None)
        if check is not None:
            check(values)

    # -- the Entry protocol ----------------------------------------------------------------------
    def in_case(self, case_dir: Path) -> PipelineKind:
        return self

    def check(self, truth, sink, batches, pipeline) -> Any:
        return self.oracle.check(truth, sink, batches, pipeline.params())

    def final_watermark_ms(self, max_event_time_ms: int, pipeline) -> int | None:
        return self.oracle.final_watermark_ms(max_event_time_ms, pipeline.params())

    def drain_wait(self) -> str | None:
        return None

    def check_files(self) -> Callable | None:
        return self.sliced


@dataclass(frozen=True)
class CustomPipeline:
    """A scenario's own query (`kind = "custom"`): checked by its own oracle by the key columns
    it declares, or, without one, event by event (its rows carry event_id)."""

    pipeline: Any                     # harness.scenario.model.Pipeline
    name: str = CUSTOM
    delivered_weight: str | None = None
    extra_truth_columns: tuple[str, ...] = ()
    watermark_oracle: bool = True

    @property
    def unit(self) -> str:
        return ROWS if self.pipeline.oracle else EVENTS

    def in_case(self, case_dir: Path) -> CustomPipeline:
        return self

    def check(self, truth, sink, batches, pipeline) -> Any:
        return custom.check(pipeline, truth, sink, batches)

    def final_watermark_ms(self, max_event_time_ms: int, pipeline) -> int | None:
        """A custom query's windows or sessions are its own: any key it declares bounds them."""
        if pipeline.values.get("watermark_ms") is None:
            return None
        reach = max(pipeline.values.get(k) or 0 for k in ("window_ms", "gap_ms", "bound_ms", "within_ms"))
        return max_event_time_ms + reach + 1

    def drain_wait(self) -> str | None:
        return None

    def check_files(self) -> Callable | None:
        return None


def _register(*kinds: PipelineKind, aliases: Mapping[str, str]) -> dict[str, PipelineKind]:
    out = {k.name: k for k in kinds}
    out.update({alias: out[name] for alias, name in aliases.items()})
    return out


PIPELINES: dict[str, PipelineKind] = _register(
    PipelineKind("passthrough", passthrough_query, passthrough_check, unit=EVENTS,
                 sliced=passthrough_check.check_files),
    PipelineKind("tumbling_count", tumbling_count, windows, delivered_weight="count", unit=WINDOWS,
                 sliced=large_windows.check),
    PipelineKind("sliding_top_n", sliding_top_n, topn),
    PipelineKind("session_count", session_count, sessions),
    PipelineKind("dedup", dedup_query, dedup, unit=EVENTS),
    PipelineKind("failed_logins", failed_logins, logins, extra_truth_columns=("user", "event_type")),
    # processing-time mode (a state TTL takes no other): no watermark
    PipelineKind("streak_count", streak_count, streaks, extra_truth_columns=("user",),
                 watermark_oracle=False),
    PipelineKind("order_payment_join", order_payment_join, join, extra_truth_columns=("user", "event_type"),
                 # the global watermark is the minimum of two: not the one-input rule
                 watermark_oracle=False),
    # Nexmark's queries: `query` picks one; each has its own columns and oracle (harness/check/nexmark.py)
    # its oracle applies the watermark rule itself, to the queries it holds for (Query.watermark_rule)
    PipelineKind("nexmark", nexmark_query, nexmark, watermark_oracle=False,
                 extra_truth_columns=(
                     "nx_type", "person_id", "name", "email", "credit_card", "city",
                     "state", "auction_id", "item_name", "description", "initial_bid", "reserve",
                     "expires_ms", "seller", "category", "auction", "bidder", "price", "channel",
                     "url", "extra")),
    aliases={"windowed_count": "tumbling_count"},   # an older scenario name keeps working
)


def kind(name: str) -> PipelineKind:
    """The built-in pipeline `name` (a KeyError names an unknown one)."""
    return PIPELINES[name]


def of(pipeline) -> Entry:
    """The registry's entry for a scenario's pipeline (harness.scenario.model.Pipeline)."""
    if pipeline.kind == JOB:
        return JobPipeline(pipeline)
    return CustomPipeline(pipeline) if pipeline.kind == CUSTOM else PIPELINES[pipeline.kind]
