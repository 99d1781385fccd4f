"""One entry of the gallery of real sink bugs, end to end (examples/known-bugs/; the four
entries and their hunts run in `tox -e bench`): apache/hudi#6098, where the table commit
succeeds, the checkpoint write fails, and the batch is written again.

Setup: examples/known-bugs/hudi-6098/scenario.toml: two cases claiming exactly-once, a sink
that commits under its own commit time and its fix that commits under Spark's batch id; the
driver is killed after the sink's commit of a batch, before Spark's commits/N. Steps: one run through
the CLI; the buggy case fails with a duplicated finding whose story tells the replay, the
fixed case holds."""

import json

import pytest

from tests.helpers import REPO, assert_nothing_left, run_cli

pytestmark = pytest.mark.integration

SCENARIO = REPO / "examples" / "known-bugs" / "hudi-6098" / "scenario.toml"


def test_the_buggy_sink_duplicates_with_its_story_and_the_fix_holds(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_cli("run", str(SCENARIO), "--out", str(run_dir))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    cases = {c["name"]: c for c in json.loads((run_dir / "summary.json").read_text())["cases"]}
    buggy, fixed = cases["buggy"], cases["fixed"]
    assert all(f["observed"] and f["landed"] for c in (buggy, fixed) for f in c["faults"]), buggy["faults"]
    assert not buggy["verdict"]["holds"] and buggy["events"]["duplicated"] > 0, buggy["verdict"]
    (dup,) = [f for f in buggy["findings"] if f["class"] == "duplicated"]
    assert dup["count"] == buggy["events"]["duplicated"] and 1 <= len(dup["witness"]) <= 5
    assert "commits/" in dup["story"] and "again" in dup["story"], dup["story"]
    assert "finding duplicated" in proc.stdout   # the story under the failed verdict
    assert fixed["verdict"]["holds"] and fixed["findings"] == [], fixed["verdict"]
    assert_nothing_left(run_dir)
