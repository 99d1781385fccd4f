"""A stateful case under pending holds accuses Spark of nothing (issue 41): the commit gate looks at
no batch by running its plan again. Before, the held batch's numRowsDroppedByWatermark and
numRowsUpdated came out twice one run's ("batch 10 ... Spark dropped 6, the oracle finds 3 late") and
the case carried a dropped-late-wrongly finding.

Setup: the session's Kafka and PostgreSQL; tests/scenarios/probe_hold.toml: a 2 s tumbling count
with 5% of its events 4 s late, 10 s at 200 events/s on local[2], into a custom sink (NaiveAppend,
at-least-once); delay-commit holds a batch after its write from batch 3 on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import metrics
from harness.check import checkpoint
from harness.results.rundir import CaseDir
from tests.helpers import REPO

# a run of its own, about 30 s: tox -e e2e
pytestmark = [pytest.mark.integration, pytest.mark.long_e2e, pytest.mark.minutes(0.6)]


def test_held_batches_of_a_stateful_query_count_their_late_rows_once(harness_run, request, tmp_path_factory):
    result = harness_run(REPO / "tests" / "scenarios" / "probe_hold.toml")
    case = result.case("naive-append")
    unseen = [f"{f.kind} at {f.at}: {f.missed or f.detail}" for f in case.faults if not f.observed]
    if unseen:   # the held batches below are the delay's
        pytest.fail(f"the plant did not bite: {unseen}", pytrace=False)
    assert "dropped-late-wrongly" not in {f.cls for f in case.findings}, case.findings
    # batch by batch: Spark's late rows, over the batches the checkpoint holds committed, are the
    # oracle's (a held batch counted twice would be one more than that)
    kept = request.config.getoption("--harness-out")
    root = Path(kept) if kept else tmp_path_factory.getbasetemp()
    run_dir = next(root.glob(f"**/{request.node.name}-probe_hold"))
    cdir = CaseDir(run_dir / "cases" / case.name)
    committed = {b.batch_id: b for b in checkpoint.read_queries([cdir.checkpoint], case.sections["topic"])
                 if b.committed}
    runs = metrics.read_progress(cdir.progress)
    once = [p for p in metrics.once_per_batch(runs) if p["batchId"] in committed]
    spark, ours = sum(metrics.batch_dropped(p) for p in once), case.events["dropped_late_spark"]
    assert ours > 0 and spark == ours, (spark, ours)
    held = [json.loads(p.read_text())["batch_id"] for p in cdir.control.glob("held-*.json")]
    if not any(metrics.batch_dropped(p) for p in once if p["batchId"] in held):
        pytest.fail(f"the plant did not bite: the held batches {held} dropped no late row, so a second "
                    f"count of theirs would not show (Spark dropped {spark} in all)", pytrace=False)
