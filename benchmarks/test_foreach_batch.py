"""The user's own foreachBatch function as it is, end to end in the full tox -e bench (not
--quick; about 8 minutes, two cases whose oracle starts two Spark processes each, one with Delta,
too long for CI's e2e lane, which the shapes, plants and re-check of a job hold): the foreach_batch
example (examples/merge/job.py: clicks appended to one Delta table, each user's running total
MERGEd into another) and its planted twin (tests/scenarios/merge_planted.py: a MERGE that adds
each batch's counts with no batch id to guard it), 3,000 clicks at 100 a second (30 s: replay-batch
needs 23 s of workload after it) through the session's Kafka on local[2], each case under
replay-batch: the batch after 3 s that wrote rows is held after
write_batch returned, the driver killed before Spark's commit, and the new driver runs it again.
The oracle runs each write_batch once over the batch answer into twin tables and compares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.e2e_variation]

SCENARIO = """
name = "foreach-batch"
imports = ["{merge}", "{planted}"]
drain_timeout = "120s"

[services.spark]
master = "local[2]"

[workload]
kind = "replay"
file = "clicks.jsonl"
event_time = "ts"
key = "user"
rate = {{ eps = 100 }}
partitions = 2

[pipeline]
kind = "job"
from_kafka = "job:from_kafka"
columns = {{ user = "STRING", page = "STRING", ts = "LONG" }}

[[cases]]
name = "guarded"
guarantee = "exactly-once"
sink = "foreach_batch"
function = "job:write_batch"

[[cases.tables]]
delta = "clicks"

[[cases.tables]]
delta = "user_totals"
key = ["user"]
ignore = ["last_batch"]

[[cases]]
name = "adds"
guarantee = "exactly-once"
sink = "foreach_batch"
function = "merge_planted:write_batch_adds"

[[cases.tables]]
delta = "user_totals"
key = ["user"]

[[faults]]
kind = "replay-batch"
at = "3s"
"""


def _clicks(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("merge_data", REPO / "examples" / "merge" / "make_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "clicks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in module.clicks(3_000)))


def _replayed(case) -> str:
    """The replay-batch's own account, asserted to have bitten: observed, landed, and the held
    batch ran again."""
    fault = next(f for f in case.faults if f.kind == "replay-batch")
    assert fault.observed and fault.landed, (fault.detail, fault.landed_detail)
    assert "ran again" in fault.detail, fault.detail
    return fault.detail


def test_an_idempotent_merge_holds_and_one_that_adds_fails_naming_its_table(harness_run, tmp_path):
    """Setup: 3,000 clicks, two foreach_batch cases, replay-batch at 3 s in each.
    Steps: run; read each case's verdict, its fault and its findings.
    The guarded MERGE (and Delta's idempotent append) leave both tables equal to their twins:
    PASS. The MERGE that adds leaves the replayed batch's users with too high a total: FAIL, the
    verdict and the table-differs finding naming user_totals and the batch Spark ran twice."""
    _clicks(tmp_path)
    path = tmp_path / "foreach_batch.toml"
    path.write_text(SCENARIO.format(merge=REPO / "examples" / "merge", planted=REPO / "tests" / "scenarios"))
    result = harness_run(path)

    good = result.case("guarded")
    _replayed(good)
    assert good.verdict.holds, good.verdict.detail
    e = good.events
    assert e["lost"] == e["duplicated"] == e["unexpected"] == 0 and e["tables"] == 2, e
    assert e["expected"] > 3_000 and e["delivered"] == e["expected"], e   # every click, and 300 users' totals

    bad = result.case("adds")
    detail = _replayed(bad)
    assert bad.verdict.status == "FAIL", bad.verdict.detail
    assert "table user_totals (delta, merged on user)" in bad.verdict.detail, bad.verdict.detail
    assert bad.events["lost"] == bad.events["unexpected"] > 0, bad.events
    finding = next(f for f in bad.findings if f.cls == "table-differs")
    assert "user_totals" in finding.story and finding.witness[0]["table"] == "user_totals", finding.story
    again = finding.witness[0]["batches_run_again"]
    assert again and f"batch {again[0]}" in detail, (again, detail)   # the held batch is the one run twice
    assert finding.witness[0]["keys"], finding.witness   # "user=u123: total=.., expected total=.."
