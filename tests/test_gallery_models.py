"""The gallery's source models and the crash's story, without services: which versions a
listing-trusting Delta reader plans, which records an offset-stepping Kafka reader returns, and
what lose-unsynced's record tells a finding."""

from __future__ import annotations

import json
import sys
from collections import namedtuple
from pathlib import Path

import pytest

from tests.helpers import REPO

sys.path.insert(0, str(REPO / "examples" / "known-bugs"))
bug_sources = pytest.importorskip("bug_sources")

pytestmark = pytest.mark.unit

Record = namedtuple("Record", "offset")


def _table(tmp_path: Path, versions) -> Path:
    log = tmp_path / "table" / "_delta_log"
    log.mkdir(parents=True)
    for v in versions:
        actions = [{"add": {"path": f"part-{v}.parquet"}}] if v else [{"protocol": {}}]
        (log / f"{v:020d}.json").write_text("\n".join(json.dumps(a) for a in actions))
    return tmp_path / "table"


class TestListingDeltaSource:
    def test_a_version_missing_from_the_listing_is_skipped_by_the_bug(self, tmp_path):
        table = _table(tmp_path, [0, 1, 2, 4, 5])   # 3's commit file left out of the listing
        reader = bug_sources._Reader(str(table), contiguous=False)
        end = reader.latestOffset(bug_sources._offset(2))
        assert end["reservoirVersion"] == 6
        planned = reader.partitions(bug_sources._offset(2), end)
        assert [p.version for p in planned] == [2, 4, 5]

    def test_the_fix_stops_before_the_gap_and_never_goes_back(self, tmp_path):
        table = _table(tmp_path, [0, 1, 2, 4, 5])
        reader = bug_sources._Reader(str(table), contiguous=True)
        assert reader.latestOffset(bug_sources._offset(2))["reservoirVersion"] == 3
        # a version already planned stays planned when it goes missing from a listing
        assert reader.latestOffset(bug_sources._offset(5))["reservoirVersion"] == 6
        with pytest.raises(RuntimeError, match=r"versions \[3\] missing"):
            reader.partitions(bug_sources._offset(2), bug_sources._offset(6))


class TestOffsetsKafkaSource:
    def test_stepping_by_one_returns_the_first_record_after_a_gap_once_per_missing_offset(self):
        held = [Record(o) for o in (13, 14, 15)]   # offsets 10-12 deleted by retention
        bug = bug_sources.answers(held, 10, 16, skip_missing=False)
        assert [r.offset for r in bug] == [13, 13, 13, 13, 14, 15]
        assert [r.offset for r in bug_sources.answers(held, 10, 16, skip_missing=True)] == [13, 14, 15]

    def test_without_a_gap_both_read_the_range_once(self):
        held = [Record(o) for o in range(5, 9)]
        for skip in (False, True):
            assert [r.offset for r in bug_sources.answers(held, 5, 9, skip)] == [5, 6, 7, 8]


def test_the_crash_s_story_names_the_newest_offsets_file_it_tore():
    from faults.unsynced import _lost

    files = [{"path": f"/{d}/{n}", "bytes_before": 400 + n, "bytes_after": 200, "age_s": 1.0, "writers": [1]}
             for d in ("offsets", "commits") for n in (7, 9, 8)]
    lost = _lost((files, False), "torn")
    assert lost.changed_file() == "offsets/9"
    told = lost.told()
    assert "tore the unsynced writes of 6 checkpoint files (3 in commits/, 3 in offsets/)" in told
    assert told.endswith("offsets/9, the newest offsets file, kept 200 of its 409 bytes")
    durable = _lost(([], True), "torn")
    assert durable.told() == "" and durable.durable_storage


@pytest.mark.parametrize("entry", sorted(p.name for p in (REPO / "examples" / "known-bugs").iterdir()
                                         if (p / "scenario.toml").exists()))
def test_every_gallery_entry_loads_with_a_buggy_and_a_fixed_case(entry, monkeypatch):
    """Its builds and sink classes import with the right parameters, its faults fit (FUSE taken
    as available: the storage entries need it)."""
    from harness.scenario import load
    from harness.services import fuse_mount

    monkeypatch.setattr(fuse_mount, "fuse_problem", lambda: None)
    scenario = load(REPO / "examples" / "known-bugs" / entry / "scenario.toml")
    assert [c.name for c in scenario.cases] == ["buggy", "fixed"] and scenario.faults
