"""The state before each fault (issue 49): the copy of a running query's checkpoint made as a
fault comes due, before it acts (workloads/pipelines/state_read.py `snapshot`), read after its
last committed batch and judged as every read is (harness/check/state_check.py `_before`), and a
story that says the state the fault found held what it must. Files faked as Spark and the
reader write them; no Spark (benchmarks/test_state_check.py runs the plants end to end)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.check import state_check
from harness.check.result import CheckResult
from harness.findings import Inputs, build
from harness.results.model import FaultRecord
from tests.test_state_check import BATCHES, T0_S, TRUTH, WINDOWS, _ms, _window
from workloads.pipelines import state_read

pytestmark = pytest.mark.unit


def _checkpoint(root: Path, commits: int) -> Path:
    cp = root / "checkpoint"
    for part in ("offsets", "commits", "sources/0", "state/0/0"):
        (cp / part).mkdir(parents=True)
    (cp / "metadata").write_text('{"id":"q"}\n')
    for n in range(commits):
        (cp / "commits" / str(n)).write_text("v1\n")
        (cp / "offsets" / str(n)).write_text("v1\n")
        (cp / "state" / "0" / "0" / f"{n + 1}.delta").write_bytes(b"d")
    (cp / "state" / "0" / "0" / f".{commits + 1}.delta.0a1b.tmp").write_bytes(b"half")
    return cp


class TestSnapshot:
    def test_the_logs_the_query_id_and_the_state_are_copied_and_the_last_commit_named(self, tmp_path):
        cp = _checkpoint(tmp_path, 3)
        assert state_read.snapshot(cp, tmp_path / "copy") == 2
        copy = tmp_path / "copy"
        copied = {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()}
        assert copied == {"metadata", *(f"{d}/{n}" for d in ("commits", "offsets") for n in range(3)),
                          *(f"state/0/0/{n}.delta" for n in (1, 2, 3))}   # no sources, no temporary file

    def test_nothing_committed_leaves_no_copy(self, tmp_path):
        assert state_read.snapshot(_checkpoint(tmp_path, 0), tmp_path / "copy") is None
        assert not (tmp_path / "copy").exists()

    def test_a_query_that_keeps_no_state_is_not_copied(self, tmp_path):
        cp = _checkpoint(tmp_path, 2)
        import shutil

        shutil.rmtree(cp / "state")
        assert state_read.snapshot(cp, tmp_path / "copy") is None


def _reads(where: Path, batch: int, held: list[tuple[str, float, int, int]], extra: dict | None = None):
    """A read as state_read writes it: metadata, one window state file, its answer."""
    where.mkdir(parents=True, exist_ok=True)
    metadata = pd.DataFrame({"operatorId": [0], "operatorName": [state_check.AGGREGATE]})
    metadata.to_parquet(where / "metadata.parquet")
    pd.DataFrame({"key.key": [h[0] for h in held], "key.window.start": [_ms(h[1]) for h in held],
                  "key.window.end": [_ms(h[1] + 2) for h in held], "value.count": [h[2] for h in held],
                  "value.sum": [h[3] for h in held],
                  "partition_id": 0}).to_parquet(where / f"b{batch}.parquet")
    files = [{"operator": 0, "batch": batch, "file": f"b{batch}.parquet"}]
    answer = {"batches": [batch], "failed": [], "files": files, **(extra or {})}
    (where / state_read.ANSWER).write_text(json.dumps(answer))


def _case(tmp_path: Path, before_count: int) -> Path:
    """A case whose driver read batch 2 (the last) and whose copy before a kill-driver at 1.5 s
    was read after batch 1: after batch 1 the state holds (a, [0, 2)) 2 / 11, (b, [0, 2)) 1 / 5 and
    (a, [2, 4)) 1 / 7 (tests/test_state_check.py's TRUTH and BATCHES)."""
    case = tmp_path / "case"
    (case / "checkpoint" / "state").mkdir(parents=True)
    reads = case / state_check.STATE_DIR
    _reads(reads, 2, [("a", 2, 1, 7), ("a", 4, 1, 3), ("b", 4, 1, 2)], {"in_driver": True})
    before = reads / state_read.BEFORE / "0"
    _reads(before, 1, [("a", 0, before_count, 11), ("b", 0, 1, 5), ("a", 2, 1, 7)])
    fault = {"index": 0, "kind": "kill-driver", "at_s": 1.5, "batch": 1}
    (before / state_read.FAULT).write_text(json.dumps(fault))
    return case


class TestJudged:
    def _check(self, case: Path) -> state_check.Outcome:
        outcome = state_check.check(case, WINDOWS, TRUTH, BATCHES, [], T0_S, [case / "checkpoint"],
                                    wanted={2: "final"})
        assert outcome is not None
        return outcome

    def test_the_state_the_fault_found_is_judged_and_held(self, tmp_path):
        outcome = self._check(_case(tmp_path, 2))
        assert outcome.count == 0, outcome.diverged
        (before,) = [c for c in outcome.checked if c.get("before")]
        assert (before["batch"], before["after"], before["keys"], before["diverged"]) == (
            1, "before kill-driver at 1.5 s", 3, 0)

    def test_a_divergence_in_it_is_found_and_said_as_before_the_fault(self, tmp_path):
        outcome = self._check(_case(tmp_path, 1))
        assert outcome.count == 1
        found = outcome.diverged.iloc[0]
        assert (found["batch"], found["after"], found["column"], found["expected"], found["held"]) == (
            1, "before kill-driver at 1.5 s", "count", "2", "1")

    def test_a_copy_that_was_not_read_is_said(self, tmp_path):
        case = _case(tmp_path, 2)
        before = case / state_check.STATE_DIR / state_read.BEFORE / "0"
        (before / state_read.ANSWER).unlink()
        (before / "error.txt").write_text("Traceback ...\nAnalysisException: no such version\n")
        outcome = self._check(case)
        assert not [c for c in outcome.checked if c.get("before")]
        assert "the state before fault 0 not read: AnalysisException: no such version" in outcome.notes


class TestStory:
    def test_a_divergence_after_the_fault_says_the_state_it_found_held(self, tmp_path):
        """The state held before the kill (batch 1) and diverged after it (batch 2): the story
        says both, the divergence first."""
        case = _case(tmp_path, 2)
        reads = case / state_check.STATE_DIR
        _reads(reads, 2, [("a", 2, 0, 7), ("a", 4, 1, 3), ("b", 4, 1, 2)], {"in_driver": True})
        outcome = state_check.check(case, WINDOWS, TRUTH, BATCHES, [], T0_S, [case / "checkpoint"],
                                    wanted={2: "final"})
        assert outcome is not None and outcome.count == 1
        fault = FaultRecord("kill-driver", 1.5, 1.5, 3.0, "driver", True, landed_s=1.5)
        checked = CheckResult({"lost": 0, "duplicated": 0, "unexpected": 0}, np.array([]), np.array([]))
        sink = pd.DataFrame([{**_window("a", 2), "count": 1, "sum_amount": 7, "batch_id": 2,
                              "committed_ms": _ms(3.5)}])
        inputs = Inputs(truth=TRUTH, sink=sink, batches=BATCHES, checked=checked, pipeline=WINDOWS,
                        faults=[fault], checkpoints=[case / "checkpoint"], t0_s=T0_S)
        (found,) = [f for f in build(inputs) if f.cls == "state-diverged"]
        assert found.story.startswith("After batch 2, the run's last committed batch"), found.story
        assert ("the state kill-driver at 1.5 s found, read after batch 1 from the copy made as it came due, "
                "held what the oracle says (3 keys): the divergence came after it") in found.story


class TestAsAFaultComesDue:
    """harness/run/stages.py `state_snapshot`: the schedule's call as a fault comes due."""

    def _copy(self, tmp_path: Path, wait_s: float | None = None):
        import time
        from types import SimpleNamespace

        from harness.run import stages

        checkpoint = str(_checkpoint(tmp_path, 2))
        case = SimpleNamespace(dir=tmp_path / "case", pipeline=WINDOWS, checkpoints=[checkpoint],
                               scenario=SimpleNamespace(measure=SimpleNamespace(state_check=None)))
        copy = stages.state_snapshot(case)
        assert copy is not None
        run = SimpleNamespace(index=3, spec=SimpleNamespace(kind="kill-driver"), t0=time.time() - 12.5)
        if wait_s is None:
            copy(run)
        else:
            stages._snapshot_within(case, run, wait_s)
        return case.dir / state_check.STATE_DIR / state_read.BEFORE / "3"

    def test_the_copy_and_its_record(self, tmp_path):
        where = self._copy(tmp_path)
        record = json.loads((where / state_read.FAULT).read_text())
        assert (record["index"], record["kind"], record["batch"]) == (3, "kill-driver", 1)
        assert 12.0 < record["at_s"] < 30.0 and record["copy_s"] >= 0
        assert (where / "checkpoint" / "state" / "0" / "0" / "2.delta").exists()

    def test_a_state_above_the_cap_is_not_copied_and_said(self, tmp_path, monkeypatch):
        from harness.run import stages

        monkeypatch.setattr(stages, "SNAPSHOT_MAX_BYTES", 1)
        where = self._copy(tmp_path)
        assert not (where / "checkpoint").exists()
        assert (where / "error.txt").read_text().startswith("not copied: the query's state was 0 MiB, above")

    def test_a_case_not_state_checked_is_never_copied(self, tmp_path):
        from types import SimpleNamespace

        from harness.run import stages

        off = SimpleNamespace(dir=tmp_path, pipeline=WINDOWS, checkpoints=[],
                              scenario=SimpleNamespace(measure=SimpleNamespace(state_check=False)))
        assert stages.state_snapshot(off) is None

    def test_a_copy_held_past_its_wait_is_abandoned_said_and_deleted(self, tmp_path, monkeypatch):
        """A checkpoint on storage an earlier fault holds: the copy is not done in its wait, the
        fault goes on, the reason is written, and the copy, once it ends, is deleted unread."""
        import time

        real = state_read.snapshot

        def held(live, to):   # storage that answers after 1 s
            time.sleep(1.0)
            return real(live, to)

        monkeypatch.setattr(state_read, "snapshot", held)
        began = time.monotonic()
        where = self._copy(tmp_path, wait_s=0.2)
        assert time.monotonic() - began < 0.9
        assert (where / "error.txt").read_text().startswith("not copied: the copy took over 0.2 s")
        time.sleep(1.5)
        assert not (where / "checkpoint").exists() and not (where / state_read.FAULT).exists()
