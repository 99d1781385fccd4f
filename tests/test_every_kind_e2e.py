"""Every registered fault kind at its defaults, on the default stack (issue 41): the kinds that load
alone there (tests/every_kind.py), several to a case, each with only its required keys. Each fault
must land, and each case end with a verdict, not an error. In `tox -e test`: three runs, side by
side on its two workers (docs/faults.md, "Every kind at its defaults").

tests/test_fault_registry.py checks, in the unit lane, which kinds load at their defaults and which
are refused with their reason, and that this plan loads.

Setup: nothing; each run starts its own Kafka, PostgreSQL and Spark local-cluster. Steps: write the
plan's scenarios, run each with the CLI, read its summary.json and the process table.
"""

from __future__ import annotations

import json

import pytest

from faults.registry import KINDS
from tests import every_kind
from tests.helpers import assert_nothing_left, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    """The plan's scenarios, by case name."""
    tmp = tmp_path_factory.mktemp("every-kind")
    refused = every_kind.refused(tmp)
    return {path.stem: path for path in every_kind.write(tmp, [k for k in KINDS if k not in refused])}


@pytest.mark.minutes(4.3)
class TestEveryKind:
    """A class per case: tox -e test's workers take a class each (pytest-xdist --dist loadscope)."""

    def test_every_kind_at_its_defaults_lands_and_its_case_ends_with_a_verdict(self, scenarios, tmp_path):
        _lands_and_ends_with_a_verdict(scenarios, "every-kind", tmp_path)


@pytest.mark.minutes(3.5)
class TestEveryKindRestarts:
    def test_every_kind_at_its_defaults_lands_and_its_case_ends_with_a_verdict(self, scenarios, tmp_path):
        _lands_and_ends_with_a_verdict(scenarios, "every-kind-restarts", tmp_path)


@pytest.mark.minutes(3.5)
class TestEveryKindStorage:
    def test_every_kind_at_its_defaults_lands_and_its_case_ends_with_a_verdict(self, scenarios, tmp_path):
        _lands_and_ends_with_a_verdict(scenarios, "every-kind-storage", tmp_path)


def _lands_and_ends_with_a_verdict(scenarios, case_name, tmp_path):
    """The case's run exits with a verdict (0 PASS, 1 FAIL, 4 UNKNOWN), never 2 or 3; every fault
    was injected, observed and landed; nothing is left running. kafka-retention at its defaults
    (failOnDataLoss) and lose-unsynced end their case's query on purpose, last, and fail it."""
    from harness.services.fuse_mount import fuse_problem

    if case_name.endswith("storage") and fuse_problem() is not None:
        pytest.skip(f"{case_name}: {fuse_problem()}")
    run_dir = tmp_path / case_name
    proc = run_cli("run", str(scenarios[case_name]), "--out", str(run_dir), timeout=1200)
    said = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode in (0, 1, 4), (case_name, proc.returncode, said)
    (case,) = json.loads((run_dir / "summary.json").read_text())["cases"]
    assert case["verdict"]["status"] in ("PASS", "FAIL", "UNKNOWN"), case["verdict"]
    # a fault after which Spark refused to go on (a damaged checkpoint it will not restart from)
    # leaves the faults after it no query to act on, as the hunt counts a run (harness/hunt/
    # outcome.py, stopped_at): those are excused, every one before must land
    faults = case["faults"]
    refusal = next((i for i, f in enumerate(faults) if f.get("outcome") == "refused"), len(faults))
    missed = [f"{f['kind']} ({f['at']}, at {f['started_s']} s): "
              f"{f.get('missed') or f.get('landed_detail') or f['detail']}"
              for f in faults[:refusal + 1]
              if f["started_s"] is None or not (f["observed"] and f["landed"])]
    # what the schedule said as it went, for a CI log that outlives the run directory
    story = [line for line in (proc.stdout + proc.stderr).splitlines() if "fault " in line]
    assert not missed, (case_name, missed, f"run directory {run_dir}", story)
    assert_nothing_left(run_dir)
