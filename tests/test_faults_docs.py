"""docs/faults.md's own fault kind, "A fault kind of your own": written there in full, the same as
examples/fault-kinds/, and run from those two blocks alone (issue 41: the docs' example elided its
body, and writing a kind from them took five source files)."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import REPO, assert_nothing_left, run_cli

DOCS = REPO / "docs" / "faults.md"
EXAMPLE = REPO / "examples" / "fault-kinds"


def _section() -> str:
    text = DOCS.read_text()
    return text[text.index("## A fault kind of your own"):text.index("## Adding a fault kind")]


def blocks() -> dict[str, str]:
    """The section's code blocks, by the file their first line names (`# examples/...`)."""
    found = {}
    for body in re.findall(r"```(?:python|toml)\n(.*?)```", _section(), re.S):
        head, _, rest = body.partition("\n")
        found[head.removeprefix("# ").strip()] = rest
    return found


@pytest.mark.unit
class TestTheDocsExample:
    def test_the_docs_hold_the_example_s_files_whole(self):
        """Each block is the file it names, character for character: no `...`, nothing left out."""
        shown = blocks()
        assert set(shown) == {f"examples/fault-kinds/{n}" for n in ("restore_checkpoint.py", "scenario.toml")}
        for name, body in shown.items():
            assert body == (REPO / name).read_text(), f"docs/faults.md's {name} is not the file"
            assert "..." not in body

    def test_the_example_loads_from_a_directory_of_its_own(self, tmp_path):
        """From the two blocks alone: the kind registers, its set-up and precondition are declared,
        and the loader refuses it on an at-most-once case with the kind's own reason."""
        from faults import registry
        from harness.errors import ScenarioError
        from harness.scenario import load
        from harness.scenario.fault_specs import preparation

        for name, body in blocks().items():
            (tmp_path / name.rsplit("/", 1)[1]).write_text(body)
        try:
            scenario = load(tmp_path / "scenario.toml")
            (spec,) = scenario.faults
            assert spec.kind == "restore-checkpoint" and spec.seconds("every") == 5.0
            assert len(preparation(scenario.faults).setup) == 1
            path = tmp_path / "amo.toml"
            path.write_text((tmp_path / "scenario.toml").read_text().replace(
                'guarantee = "exactly-once"', 'guarantee = "at-most-once"'))
            with pytest.raises(ScenarioError, match="needs same-checkpoint: case exactly-once is at-most"):
                load(path)
        finally:
            registry.KINDS.pop("restore-checkpoint", None)


def did_not_bite(fault: dict) -> str | None:
    """Why the docs' kind did not bite, read from its record in summary.json, or None when it did:
    it restored the checkpoint without a batch the sink had committed, and Spark planned that
    batch again over other offsets (the sink then skips the new range's events)."""
    if not (fault["observed"] and fault["landed"] and fault.get("outcome") == "accepted"):
        return f"the fault did not land: {fault.get('detail')}"
    if not fault.get("committed"):
        return (f"the sink had committed no batch past the backup's newest ({fault.get('backup_batch')}) "
                f"when the checkpoint was restored: {fault.get('landed_detail')}")
    if not fault.get("replanned"):
        return (f"Spark planned none of the committed batches {fault['committed']} again over other "
                f"offsets, so the sink skipped no event: {fault.get('landed_detail')}")
    return None


@pytest.mark.unit
class TestDidNotBite:
    """The precondition is read from the record alone; each way it fails is named."""

    BIT = {"observed": True, "landed": True, "outcome": "accepted", "backup_batch": 9, "committed": [10],
           "replanned": [10], "landed_detail": "...", "detail": "..."}

    def test_a_record_that_bit(self):
        assert did_not_bite(self.BIT) is None

    def test_a_fault_that_did_not_land(self):
        assert "did not land" in did_not_bite({**self.BIT, "landed": False})

    def test_nothing_committed_past_the_backup(self):
        """The record of the kind before it waited for the sink's commit (no such field) too."""
        record = {k: v for k, v in self.BIT.items() if k not in ("committed", "replanned")}
        assert "committed no batch past the backup's newest" in did_not_bite(record)

    def test_nothing_planned_over_other_offsets(self):
        assert "planned none of the committed batches [10]" in did_not_bite({**self.BIT, "replanned": []})


@pytest.mark.integration
@pytest.mark.long_e2e  # a run of its own, about 50 s: tox -e e2e
@pytest.mark.minutes(1.7)
def test_the_docs_example_runs_from_the_docs_alone(tmp_path):
    """The two blocks, copied to a directory of their own, run: the set-up's backups are taken,
    the sink commits a batch past the newest backup, the checkpoint is restored without the
    batches it ran since, the new driver plans them again over other offsets, and the
    exactly-once sink, which skips a batch id it has committed, loses the new ranges' events: the
    run exits 1 with a finding `lost`, and the fault's record says which batches it removed and
    what each had planned. That the fault bit is read from its record first: a plant that did
    not bite fails the test as such, never as a wrong verdict."""
    for name, body in blocks().items():
        (tmp_path / name.rsplit("/", 1)[1]).write_text(body)
    run_dir = tmp_path / "run"
    proc = run_cli("run", str(tmp_path / "scenario.toml"), "--out", str(run_dir))
    summary = json.loads((run_dir / "summary.json").read_text())
    (case,) = summary["cases"]
    (fault,) = case["faults"]
    why = did_not_bite(fault)
    if why is not None:
        pytest.fail(f"the plant did not bite ({why})", pytrace=False)
    assert proc.returncode == 1, (fault, proc.stdout[-3000:] + proc.stderr[-3000:])
    removed = [c for c in fault["changes"] if c["action"] == "removed-batch"]
    assert set(fault["committed"]) <= {c["batch"] for c in removed}, fault
    assert all(c["was"] and c["path"] == f"checkpoint/offsets/{c['batch']}" for c in removed), fault
    assert fault["traits"]["kills_driver"] and fault["recovery"]["startup_s"] > 0, fault
    assert case["events"]["lost"] > 0 and case["verdict"]["status"] == "FAIL", case["events"]
    assert "lost" in {f["class"] for f in case["findings"]}, case["findings"]
    assert (run_dir / "cases" / "exactly-once" / "checkpoint-backup" / "offsets").is_dir()
    assert_nothing_left(run_dir)
