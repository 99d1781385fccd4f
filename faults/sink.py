"""stall-sink: block the sink for a while (PostgreSQL: another session holds a lock)."""

from __future__ import annotations

import time

from faults.base import Fault, Observation
from faults.kinds import DURATION, FaultKind, always
from faults.targets import RefusedTarget
from workloads.wait import WaitTimeout


class StallSink(Fault):
    """An ACCESS EXCLUSIVE lock on the sink table, held by a session of our own: every write
    (and read) of the table waits until heal releases it."""

    conn = None
    locked_at = released_at = 0.0

    def _inject(self) -> None:
        import psycopg

        url, table = self.targets.postgres_url, self.targets.sink_table
        if url is None or table is None:
            raise RefusedTarget("stall-sink knows how to stall a PostgreSQL sink only")
        self.conn = psycopg.connect(url)
        self.conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        self.locked_at = time.time()
        self.target = f"sink table {table}"

    def _heal(self) -> None:
        conn = self.conn
        if conn is not None:
            # stamped before the release: a batch blocked on the lock commits just after it,
            # within the same millisecond, and must not count as committed while locked
            self.released_at = time.time()
            conn.rollback()
            conn.close()

    def observe(self) -> Observation:
        import psycopg

        table, url = self.targets.sink_table, self.targets.postgres_url
        assert url is not None and table is not None, "checked at injection"
        # commit times are whole milliseconds, cut down: a batch that commits just after the
        # release can carry the release's own millisecond, so that millisecond is not "during"
        lo, hi = (self.locked_at + 0.5) * 1000, int(self.released_at * 1000)

        def commits(since_ms: float, until_ms: float) -> int:
            with psycopg.connect(url) as conn:
                row = conn.execute(f"SELECT count(*) FROM {table}_batches WHERE committed_ms > %s "
                                   "AND committed_ms < %s", (since_ms, until_ms)).fetchone()
                return row[0] if row else 0

        during = commits(lo, hi)
        if during:
            return Observation(False, f"{during} batches committed to {table} while it was locked")
        try:
            self.targets.wait(lambda: commits(hi, time.time() * 1000 + 1), "batch",
                              f"no batch committed to {table} after the lock's release", 0.5)
        except WaitTimeout as exc:
            return Observation(False, str(exc))
        return Observation(True, f"no batch committed to {table} for {self.spec.duration_s:g}s; "
                                 f"commits resumed after the lock was released")


STALL_SINK_FAULT = FaultKind(
    "stall-sink", StallSink,
    about="another session holds `LOCK TABLE ... ACCESS EXCLUSIVE` on the sink table for `duration`; no "
          "batch may commit meanwhile, and commits must resume",
    models="a sink that stops answering: a locked table, a database under maintenance",
    keys=(DURATION,), targets=("sink",), default_target="sink", requires=always("postgres-sink"))
