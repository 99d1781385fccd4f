"""Every registered fault kind at its defaults, on the default stack (issue 41): the kinds that load
alone there (tests/every_kind.py), several to a case, each with only its required keys. Each fault
must land, and each case end with a verdict, not an error.

It runs in the quick bench (`tox -e bench -- --quick`) and the full one, not in CI: two runs of
about 3 and 2 minutes, and not yet steady enough to gate every commit (in `tox -e e2e` it failed
2 of 4 runs on a loaded machine: once the case failed at 191 s before kafka-retention's batch,
once fail-task found no batch with rows to fail within its 20 s). tests/test_fault_registry.py
checks, in `tox -e test`, which kinds load at their defaults and which are refused with their
reason, and that this plan loads; tests/test_faults_e2e.py runs restart-broker at its defaults
(a crash) in every_fault.toml --quick, in `tox -e e2e`.

Setup: nothing; each run starts its own Kafka, PostgreSQL and Spark local-cluster.
"""

from __future__ import annotations

import json

import pytest

from faults.registry import KINDS
from tests import every_kind
from tests.helpers import assert_nothing_left, run_cli

pytestmark = pytest.mark.integration


def test_every_kind_at_its_defaults_lands_and_each_case_ends_with_a_verdict(tmp_path):
    """Each case's run exits with a verdict (0 PASS, 1 FAIL, 4 UNKNOWN), never 2 or 3; every fault
    was injected, observed and landed; nothing is left running. kafka-retention at its defaults
    (failOnDataLoss) and lose-unsynced end their case's query on purpose, last, and fail it."""
    from harness.services.fuse_mount import fuse_problem

    refused = every_kind.refused(tmp_path)
    kinds = [k for k in KINDS if k not in refused]
    skipped = []
    for path in every_kind.write(tmp_path, kinds):
        if path.stem.endswith("storage") and fuse_problem() is not None:
            skipped.append(f"{path.stem}: {fuse_problem()}")
            continue
        run_dir = tmp_path / path.stem
        proc = run_cli("run", str(path), "--out", str(run_dir), timeout=1200)
        said = proc.stdout[-3000:] + proc.stderr[-3000:]
        assert proc.returncode in (0, 1, 4), (path.stem, proc.returncode, said)
        (case,) = json.loads((run_dir / "summary.json").read_text())["cases"]
        assert case["verdict"]["status"] in ("PASS", "FAIL", "UNKNOWN"), case["verdict"]
        # a fault after which Spark refused to go on (a damaged checkpoint it will not restart
        # from) leaves the faults after it no query to act on, as the hunt counts a run
        # (harness/hunt/outcome.py, stopped_at): those are excused, every one before must land
        faults = case["faults"]
        refusal = next((i for i, f in enumerate(faults) if f.get("outcome") == "refused"), len(faults))
        missed = [f"{f['kind']}: {f.get('missed') or f.get('landed_detail') or f['detail']}"
                  for f in faults[:refusal + 1]
                  if f["started_s"] is None or not (f["observed"] and f["landed"])]
        assert not missed, (path.stem, missed)
        assert_nothing_left(run_dir)
    if skipped:
        pytest.skip("; ".join(skipped))
