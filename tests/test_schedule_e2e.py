"""A schedule the workload waits for, end to end: a fault whose anchor comes after the workload's
duration lands, because the workload goes on until it has landed and the query has read past
it; ground truth holds the events sent past the duration, and the verdict is exact.

Setup: the session's Kafka and PostgreSQL (the pytest plugin's shared services), a Spark driver
on local-cluster. Steps: run tests/scenarios/late_anchor.toml (a 4 s workload, a stall-sink at
batch 10 after the warm-up, about 11 s in), read its summary and truth. Before the workload
waited, the fault was missed at 4 s. Measured: 47 s here (2 cores, its driver included)."""

from __future__ import annotations

import pytest

from harness import api
from tests.helpers import REPO
from workloads.generator import truth

# a run of its own, about 30 s: tox -e e2e (tox -e test runs every kind at its defaults, whose
# workload waits for its faults the same way)
pytestmark = [pytest.mark.long_e2e, pytest.mark.minutes(0.8)]

SCENARIO = REPO / "tests" / "scenarios" / "late_anchor.toml"


def test_the_workload_goes_on_until_a_late_fault_landed_and_was_read_past(harness_services, tmp_path):
    registry, stack = harness_services.get()
    result = api.run(SCENARIO, tmp_path / "run", registry=registry, stack=stack)
    case = result.case("eo")
    (fault,) = case.faults
    assert fault.missed is None and fault.observed and fault.landed, fault
    assert fault.landed_s is not None and fault.landed_s > 4, fault
    workload = case.sections["workload"]
    assert workload["extended_by_s"] > 0 and not workload["cut_at_max_duration"], workload
    assert "went on" in workload["why"] and "read 3 batches past each" in workload["why"], workload
    sent = truth.read(tmp_path / "run" / "cases" / "eo" / "truth").query("~control")
    past = sent[sent["intended_ms"] - sent["intended_ms"].min() >= 4000]
    assert len(past) >= 100 * workload["extended_by_s"] * 0.9, (len(past), workload)
    counts = case.events
    assert case.verdict.status == "PASS", case.verdict
    # every event sent is expected, or dropped as late or filtered out by the query, as its oracle says
    accounted = counts["expected"] + counts["dropped_late"] + counts["filtered"]
    assert counts["produced"] == len(sent) == accounted, counts
    assert counts["lost"] == counts["duplicated"] == counts["unexpected"] == 0, counts
    assert result.status == "completed"
    assert case.sections["references"]["restart_floor_s"] > 0, case.sections["references"]
