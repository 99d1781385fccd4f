"""A job's verdict from its run directory alone, and kafka-retention on a job (issue 47, item 4).

Setup: the sessions example (examples/my-job/job.py) on 3,000 clicks of its make_data.py (and
3,000 more while the fault is pending), replayed at 20 times their pace through the session's
Kafka into PostgreSQL, with
`fail_on_data_loss = false`, 300 records a batch at most, and a kafka-retention at the second
batch after the warm-up: Kafka's delete-records moves each partition's start past the held
batch's first 40 records, deleting with them every record the earlier batches had read. The
batch oracle reads the records the recorder saved while the case ran (`<case>/records/`), not
Kafka. One run (a few minutes on a busy machine) serves both tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import REPO
from tests.scenarios.job_planted import clicks

pytestmark = [pytest.mark.integration, pytest.mark.long_e2e, pytest.mark.minutes(2)]

SCENARIO = """
name = "job-retention"
imports = ["{examples}"]
drain_timeout = "120s"

# local-cluster, not local[2]: kafka-retention evicts Spark's idle Kafka consumers within 10 ms,
# and in a single JVM the pool's evictor once closed a consumer a task was reading with
# (ConcurrentModificationException, the query failed: a run of this test on local[2])
[services.spark]
master = "local-cluster[2,1,1024]"

[workload]
kind = "replay"
file = "clicks.jsonl"
event_time = "ts"
key = "user"
speed = 20.0
partitions = 2
# 16 s of the file (its first 3,000 clicks), then the rest only while the retention is pending
# (docs/scenario.md, "A workload that waits for its faults"): in a flake-lane round pinned to one
# core, a 3,000-click file ran out at 16.4 s with one batch committed after the warm-up, and the
# retention at batch 2 never came (UNKNOWN)
duration = "16s"
max_duration = "32s"

[pipeline]
kind = "job"
from_kafka = "job:from_kafka"
key = ["user", "session_start"]
fail_on_data_loss = false
max_offsets_per_trigger = 300   # batches enough for the anchor while the 16 s of records are sent

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

[[faults]]
kind = "kafka-retention"
at = "batch 2"
records = 40
"""

_RUN: dict = {}   # the one run both tests read: its result and a copy of its directory


def _run(harness_run, _harness_runs, tmp_path_factory) -> dict:
    """Run the scenario once; keep a copy of its run directory at a deep path of another tree
    (the plugin removes a passing test's run directory)."""
    if not _RUN:
        where = tmp_path_factory.mktemp("job-retention")
        (where / "clicks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clicks(6_000)))
        path = where / "job_retention.toml"
        path.write_text(SCENARIO.format(examples=REPO / "examples" / "my-job"))
        result = harness_run(path)
        run_dir = _harness_runs[1][-1]
        copy = tmp_path_factory.mktemp("elsewhere") / "a" / "deeper" / "copy-of-the-run"
        shutil.copytree(run_dir, copy, symlinks=True)
        _RUN.update(result=result, run_dir=run_dir, copy=copy)
    return _RUN


def test_kafka_retention_on_a_job_is_decided(harness_run, _harness_runs, tmp_path_factory, kafka):
    """The retention deleted records the stream had read (Kafka now starts past offsets that
    committed batches read), and the case is still decided, PASS: the oracle ran the job over
    the recorded records, the deleted-before-read ones left out as for a built-in pipeline."""
    run = _run(harness_run, _harness_runs, tmp_path_factory)
    case = run["result"].case("sessions")
    (fault,) = case.faults
    if fault.started_s is None:   # everything below is the retention's
        pytest.fail(f"the plant did not bite: kafka-retention at {fault.at}: {fault.missed}", pytrace=False)
    assert fault.landed and fault.outcome == "accepted", fault.detail
    deleted = {d["partition"]: d for d in fault.details.deleted_ranges()}
    assert deleted, fault
    earliest = _earliest(kafka.bootstrap_servers, case.sections["topic"])
    request = json.loads((run["copy"] / "cases" / "sessions" / "oracle" / "request.json").read_text())
    read_below = {p: start for p, start, _ in request["ranges"] if start < earliest.get(p, 0)}
    # records a committed batch read, gone from Kafka now, and in the oracle's input all the same
    assert read_below and any(d["from"] > 0 for d in deleted.values()), (earliest, request["ranges"], deleted)
    e = case.events
    assert case.verdict.status == "PASS", case.verdict.detail
    assert e["deleted_before_read"] == sum(d["to"] - d["from"] for d in deleted.values()) > 0, e
    assert e["lost"] == e["duplicated"] == e["unexpected"] == 0 and e["delivered"] == e["expected"] > 100, e
    account = json.loads((run["copy"] / "cases" / "sessions" / "records" / "recorder.json").read_text())
    assert account["status"] == "stopped" and account["caught_up"], account


def test_check_on_a_copy_of_the_run_directory_gives_the_runs_verdict(harness_run, _harness_runs,
                                                                     tmp_path_factory):
    """`python -m harness check COPY`, with the run's own directory moved away (nothing recorded
    at run time may lead to it) and the driver's Kafka address made unreachable (nothing may read
    Kafka): the run's table with the run's verdict, exit 0; its files under COPY/check/, and
    summary.json as the run wrote it."""
    run = _run(harness_run, _harness_runs, tmp_path_factory)
    copy = run["copy"]
    hidden = run["run_dir"].with_name(run["run_dir"].name + "-moved")
    if run["run_dir"].exists():
        run["run_dir"].rename(hidden)
    driver = copy / "cases" / "sessions" / "driver.json"
    config = json.loads(driver.read_text())
    driver.write_text(json.dumps({**config, "bootstrap_servers": "127.0.0.1:9"}))
    before = (copy / "summary.json").read_bytes()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "harness", "check", str(copy)], capture_output=True,
                          text=True, cwd=copy.parent, env=env, timeout=600, check=False)
    ran = run["result"].case("sessions")
    assert ran.verdict.status == "PASS", ran.verdict.detail   # the run's own verdict, to give again
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sessions: exactly-once held" in proc.stdout, proc.stdout
    (out,) = (copy / "check").iterdir()
    checked = json.loads((out / "check.json").read_text())
    (case,) = checked["cases"]
    assert case["run"] == case["recheck"] == "PASS" and case["agree"] and case["rechecked"], case
    assert case["events"] == run["result"].case("sessions").events, case
    assert (out / "cases" / "sessions" / "oracle" / "expected.parquet").exists()
    assert (copy / "summary.json").read_bytes() == before


def _earliest(bootstrap: str, topic: str) -> dict[int, int]:
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    from workloads.kafka_admin import admin_client

    with admin_client(bootstrap) as admin:
        found = admin.list_partition_offsets({TopicPartition(topic, p): OffsetSpec.EARLIEST for p in (0, 1)})
    return {tp.partition: int(o.offset) for tp, o in found.items()}
