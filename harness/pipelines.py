"""Every built-in pipeline, registered once with the oracle that checks it.

A pipeline is what a case runs and what its output is checked against: its name, its
scenario keys (`params`), its output columns, the `build` the driver calls, and its
oracle. The query lives in `workloads/pipelines/<module>.py` (it runs in the driver
process), the oracle in `harness/check/<module>.py` (it runs in the harness); this table
is the one place where the two meet, so a pipeline cannot exist without its oracle.

Adding a pipeline is a module in each of those folders plus one line in `PIPELINES`.
A scenario's own pipeline (`kind = "custom"`) brings its build and oracle itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType
from typing import Any, Protocol

CUSTOM = "custom"   # the user's own query and oracle: no module of ours


class Oracle(Protocol):
    """An oracle module (harness/check/<name>.py)."""

    def check(self, truth, sink, batches, params: dict) -> Any:
        """The sink's rows against ground truth: a harness.check.result.CheckResult."""

    def final_watermark_ms(self, max_event_time_ms: int, params: dict) -> int | None:
        """The watermark at which all the run's output is final (None: no watermark)."""


class Pipeline(Protocol):
    """What the harness needs of a pipeline kind."""

    name: str

    @property
    def params(self) -> tuple: ...        # workloads.pipelines.params.Param, the scenario keys

    @property
    def columns(self) -> Mapping[str, str]: ...   # output column -> Spark SQL type, in order

    @property
    def build(self) -> str: ...           # "module:function", build(events_df, params)

    @property
    def oracle(self) -> Oracle: ...


@dataclass(frozen=True)
class PipelineKind:
    """A built-in pipeline: its query's module, its oracle's module, and how to count its rows."""

    name: str
    module: str                       # workloads.pipelines.<x>: PARAMS, COLUMNS, build(...)
    oracle_module: str                # harness.check.<x>: check(...), final_watermark_ms(...)
    # a column whose value is how many events a row stands for (a windowed count's `count`):
    # the delivered throughput counts events, not rows
    delivered_weight: str | None = None

    @cached_property
    def query(self) -> ModuleType:
        return importlib.import_module(self.module)

    @property
    def params(self) -> tuple:
        return self.query.PARAMS

    @property
    def columns(self) -> Mapping[str, str]:
        return dict(self.query.COLUMNS)

    @property
    def build(self) -> str:
        return f"{self.module}:build"

    @cached_property
    def oracle(self) -> Oracle:
        return importlib.import_module(self.oracle_module)   # type: ignore[return-value]

    @property
    def stateless(self) -> bool:
        """Whether the query keeps no state (Spark's real-time mode runs only such queries)."""
        return getattr(self.query, "STATELESS", False)

    @property
    def state_stores(self) -> tuple[str, ...] | None:
        """The state stores it runs on, when not every one (transformWithState: RocksDB)."""
        return getattr(self.query, "STATE_STORES", None)

    def check_params(self, values: dict) -> None:
        """Raise SpecError when its keys contradict each other (a window shorter than its slide)."""
        check = getattr(self.query, "check_params", None)
        if check is not None:
            check(values)


def _register(*kinds: PipelineKind, aliases: Mapping[str, str]) -> dict[str, PipelineKind]:
    out = {k.name: k for k in kinds}
    out.update({alias: out[name] for alias, name in aliases.items()})
    return out


PIPELINES: dict[str, PipelineKind] = _register(
    PipelineKind("passthrough", "workloads.pipelines.passthrough", "harness.check.passthrough"),
    PipelineKind("tumbling_count", "workloads.pipelines.tumbling_count", "harness.check.windows",
                 delivered_weight="count"),
    PipelineKind("sliding_top_n", "workloads.pipelines.sliding_top_n", "harness.check.topn"),
    PipelineKind("session_count", "workloads.pipelines.session_count", "harness.check.sessions"),
    PipelineKind("dedup", "workloads.pipelines.dedup", "harness.check.dedup"),
    PipelineKind("failed_logins", "workloads.pipelines.failed_logins", "harness.check.logins"),
    PipelineKind("order_payment_join", "workloads.pipelines.order_payment_join", "harness.check.join"),
    aliases={"windowed_count": "tumbling_count"},   # an older scenario name keeps working
)


def kind(name: str) -> PipelineKind:
    """The built-in pipeline `name` (a KeyError names an unknown one)."""
    return PIPELINES[name]
