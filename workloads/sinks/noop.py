"""A sink for pure speed runs: every batch is computed in full and nothing is kept.

Spark's own `noop` format evaluates the whole batch and discards it, so the batch costs
what the query costs. There is nothing to read back: a case into it has no verdict.
"""

from __future__ import annotations

from workloads.sinks import SinkContext


class NoopSink:
    def __init__(self, ctx: SinkContext):
        self.ctx = ctx
        self.last_rows: int | None = None

    def setup(self) -> None:
        pass

    def write(self, batch_df, batch_id: int) -> None:
        batch_df.write.format("noop").mode("append").save()

    def read(self):
        import pandas as pd

        return pd.DataFrame(columns=[*self.ctx.columns, "committed_ms"])

    def close(self) -> None:
        pass
