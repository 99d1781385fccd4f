"""The planted bugs of your own job and their correct twins, small, in tox -e e2e (CI runs it on
every commit): each bug FAILs with its finding and each twin of its shape PASSes, under one
kill-driver after the sink's write (tests/scenarios/job_planted.py; the same six cases at 6,000
clicks, three runs each, are in tox -e bench: benchmarks/test_jobs.py).

Setup: 6,000 clicks of the sessions example's generator at 100 a second, 30 s of them, the rest
(30 s more at most) only while the kill is pending: the kill's schedule takes 23 s at least, and
a loaded machine's first batches are slow (the flake lane, pinned to one core beside a busy loop,
saw two cases whose third batch came after a 30 s file's end: "the plant did not bite"), through the
session's Kafka into PostgreSQL, Spark on local[2]; one run of six cases, shared by every test
here. Steps: per case, first that the kill did what the plants need (read from its record: else
the test fails as "the plant did not bite"), then the verdict.
"""

from __future__ import annotations

import json

import pytest

from tests.scenarios.job_planted import PLANTS, did_not_bite, scenario

pytestmark = [pytest.mark.integration, pytest.mark.long_e2e, pytest.mark.minutes(8)]


@pytest.fixture(scope="module")
def planted_run(harness_services, tmp_path_factory):
    """One run of every plant and its twin: {case name: its summary.json record}."""
    from harness import api

    directory = tmp_path_factory.mktemp("planted")
    path = scenario(directory, 6_000, eps=100, local=True, drain="120s", duration_s=30)
    registry, stack = harness_services.get()
    api.run(path, directory / "run", registry=registry, stack=stack)
    return {c["name"]: c for c in json.loads((directory / "run" / "summary.json").read_text())["cases"]}


def _bit(case: dict) -> None:
    why = did_not_bite(case)
    if why is not None:
        pytest.fail(f"the plant did not bite ({why})", pytrace=False)


@pytest.mark.parametrize("plant", PLANTS, ids=[p.bug for p in PLANTS])
def test_the_planted_bug_fails_with_its_finding(planted_run, plant):
    """The bug's case FAILs, and its findings hold the bug's own (duplicated, went-backwards,
    mismatch), with a story."""
    case = planted_run[plant.bug]
    _bit(case)
    found = {f["class"]: f for f in case.get("findings", [])}
    assert case["verdict"]["status"] == "FAIL", case["verdict"]
    assert plant.finding in found and found[plant.finding]["story"], (list(found), case["verdict"])


@pytest.mark.parametrize("plant", PLANTS, ids=[p.twin for p in PLANTS])
def test_its_correct_twin_passes(planted_run, plant):
    """The twin, the same shape without the bug, under the same kill: PASS, nothing lost,
    duplicated or unexpected, no finding, and a drain that ended by what its shape needs (the
    twins are the update-mode aggregate without a watermark and the NoTimeout state behind one of
    the shapes' test, tests/test_job_shapes_e2e.py)."""
    case = planted_run[plant.twin]
    _bit(case)
    e = case["events"]
    findings = [f["class"] for f in case.get("findings", [])]
    assert case["verdict"]["status"] == "PASS", (case["verdict"], findings)
    assert e["lost"] == e["duplicated"] == e["unexpected"] == 0 and e["delivered"] == e["expected"] > 0, e
    assert "drain_timeout" not in case["verdict"]["detail"], case["verdict"]
