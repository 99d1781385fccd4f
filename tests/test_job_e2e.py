"""Your own job end to end in tox -e e2e (CI runs it on every commit, after tox -e test): the
sessions example (examples/my-job/job.py, session_window over clicks) on 3,000 clicks of its
make_data.py, replayed at 20 times their pace through the session's Kafka into PostgreSQL on
local[2], checked by the batch oracle.
The three examples under kill-driver, fail-task and kill-executor, and the planted bugs, run
in tox -e bench (benchmarks/test_jobs.py)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO
from tests.scenarios.job_planted import clicks

# a run of its own, 45-50 s: tox -e test's ten minutes hold every fault kind at its defaults, and
# with this case beside them a fresh clone's took 544 s and 589 s of pytest (621 s in tox)
pytestmark = [pytest.mark.integration, pytest.mark.long_e2e]

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


BALANCES = """
name = "balances-quick"
imports = ["{examples}"]
drain_timeout = "120s"

[services.spark]
master = "local[2]"

[workload]
kind = "replay"
file = "transactions.jsonl"
event_time = "ts"
key = "account"
rate = {{ eps = 100 }}
partitions = 2

[pipeline]
kind = "job"
from_kafka = "job:from_kafka"
columns = {{ account = "STRING", balance_cents = "LONG", transactions = "LONG", last_ts = "LONG" }}
key = ["account"]
output_mode = "update"

[[cases]]
name = "balances"
guarantee = "exactly-once"
sink = "postgres_upsert"

[[faults]]
kind = "kill-driver"
at = "batch 3"
"""


def test_the_balances_job_in_update_mode_passes_under_a_kill(harness_run, tmp_path):
    """The fourth example (examples/balances/): an update-mode aggregate behind a watermark,
    upserted by account, under a kill-driver. The run ends once a committed batch has read every
    record (Spark runs no batch after the input stops for an update-mode aggregate, so a drain
    waiting for its watermark waited out its timeout and FAILED a sink that held every row)."""
    import importlib.util

    made = REPO / "examples" / "balances" / "make_data.py"
    spec = importlib.util.spec_from_file_location("balances_data", made)
    assert spec is not None and spec.loader is not None
    data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(data)
    rows = data.transactions(3_000)
    (tmp_path / "transactions.jsonl").write_text("".join(json.dumps(t) + "\n" for t in rows))
    path = tmp_path / "balances.toml"
    path.write_text(BALANCES.format(examples=REPO / "examples" / "balances"))
    result = harness_run(path)
    case = result.case("balances")
    kills = [f for f in case.faults if f.kind == "kill-driver"]
    assert kills and kills[0].observed, f"the plant did not bite: the kill-driver was not observed: {kills}"
    e = case.events
    assert case.verdict.holds, case.verdict.detail
    assert "drain_timeout" not in case.verdict.detail, case.verdict.detail
    assert e["lost"] == e["duplicated"] == e["unexpected"] == 0 and e["delivered"] == e["expected"] >= 300, e
