"""Your own job end to end in tox -e e2e (CI runs it on every commit, after tox -e test): the
sessions example (examples/my-job/job.py, session_window over clicks) on 3,000 clicks of its
make_data.py, replayed at 20 times their pace through the session's Kafka into PostgreSQL on
local[2], checked by the batch oracle.
The examples (balances, the update-mode aggregate behind a watermark, among them) under
kill-driver, fail-task and kill-executor, and the planted bugs at full size, run in tox -e bench
(benchmarks/test_jobs.py); update mode behind a watermark is gated on every commit by
tests/test_job_shapes_e2e.py."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO
from tests.scenarios.job_planted import clicks

# a run of its own, 45-50 s: tox -e test's ten minutes hold every fault kind at its defaults, and
# with this case beside them a fresh clone's took 544 s and 589 s of pytest (621 s in tox)
pytestmark = [pytest.mark.integration, pytest.mark.long_e2e, pytest.mark.minutes(1.5)]

SCENARIO = """
name = "job-quick"
imports = ["{examples}"]
drain_timeout = "120s"

[services.spark]
master = "local[2]"

[workload]
kind = "replay"
file = "clicks.jsonl"
event_time = "ts"
key = "user"
speed = 20.0
partitions = 2

[pipeline]
kind = "job"
from_kafka = "job:from_kafka"
key = ["user", "session_start"]

[pipeline.columns]
user = "STRING"
session_start = "LONG"
session_end = "LONG"
clicks = "LONG"
last_click_ms = "LONG"

[[cases]]
name = "sessions"
guarantee = "exactly-once"
sink = "postgres"
"""


def test_the_sessions_job_matches_its_own_batch_run(harness_run, tmp_path):
    """Every session the stream wrote is one the same function writes as a batch over the
    records the stream read, and no other: exact, the comparison whole (no click came late)."""
    (tmp_path / "clicks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clicks(3_000)))
    path = tmp_path / "job_quick.toml"
    path.write_text(SCENARIO.format(examples=REPO / "examples" / "my-job"))
    result = harness_run(path)
    case = result.case("sessions")
    e = case.events
    assert case.verdict.holds, case.verdict.detail
    assert e["lost"] == e["duplicated"] == e["unexpected"] == 0 and e["delivered"] == e["expected"] > 100, e
    assert e["late_records"] == 0 and e["left_out"] == 0, e

