"""One pair of the gallery of real sink bugs, end to end in `tox -e test` (the four entries
and their hunts run in `tox -e bench`): apache/paimon#9666, a replayed micro-batch
committed twice.

Setup: examples/known-bugs/paimon-9666/scenario.toml through the pytest plugin, on the
session's Kafka and PostgreSQL, sending for 24 s with the batch replayed at 3 s (the
entry's own schedule is 40 s and 10 s; a restart needs 20 s of events after it).
Steps: one run of its buggy case, claiming exactly-once; the buggy sink commits a replayed
batch again, and the case fails with a duplicated finding whose story tells the replay. The
fixed sink, which skips a batch id it has committed, holds in tox -e bench
(benchmarks/test_gallery_hunts.py hunts it for 3 runs): its 40 s left tox -e test for the
Nexmark case (tests/test_nexmark_e2e.py)."""

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.integration

SCENARIO = REPO / "examples" / "known-bugs" / "paimon-9666" / "scenario.toml"
SHORT = {"workload": {"duration": "24s"},
         "faults": [{"kind": "replay-batch", "at": "3s", "downtime": "1s"}]}


def test_the_buggy_sink_duplicates_with_its_story(harness_run):
    buggy = harness_run(SCENARIO, case="buggy", **SHORT).case("buggy")
    assert all(f.observed and f.landed for f in buggy.faults), buggy.faults
    assert not buggy.verdict.holds and buggy.duplicated > 0, buggy
    (dup,) = [f for f in buggy.findings if f.cls == "duplicated"]
    assert dup.count == buggy.duplicated and 1 <= len(dup.witness) <= 5
    assert "again" in dup.story and "batch" in dup.story, dup.story
