"""A fault kind of a user's own is a first-class kind (issue 41): it names preconditions (the
harness's or its own) and is refused with a "did you mean" on a typo, it asks for a set-up of
its own, it tells the findings what it changed, and a summary read without its scenario still
knows what kind of fault it was."""

from __future__ import annotations

import json

import pytest

from faults import registry
from faults.base import REMOVED_BATCH, Change, Fault, Observation
from faults.kinds import DOWNTIME, CaseView, FaultKind, Precondition, Preparation, always
from faults.spec import FaultSpec
from faults.targets import Targets
from harness.errors import ScenarioError
from harness.results.model import FaultRecord
from harness.scenario import load
from harness.scenario.fault_specs import preparation, set_up
from tests.helpers import MINIMAL_SCENARIO

pytestmark = pytest.mark.unit

LONG = MINIMAL_SCENARIO.replace('duration = "1s"', 'duration = "60s"')
DRIVER: dict = {"targets": ("driver",), "default_target": "driver"}


class _Nothing(Fault):
    def _inject(self) -> None:
        pass

    def observe(self) -> Observation:
        return Observation(True, "nothing")


@pytest.fixture
def own_kind():
    """Registers kinds under test names, and takes them out of the registry afterwards."""
    added: list[str] = []

    def add(kind: FaultKind) -> FaultKind:
        registry.add(kind)
        added.append(kind.name)
        return kind

    yield add
    for name in added:
        registry.KINDS.pop(name, None)


def _scenario(tmp_path, kind: str):
    path = tmp_path / "s.toml"
    path.write_text(LONG + f'\n[[faults]]\nkind = "{kind}"\nat = "5s"\n')
    return path


class TestPreconditions:
    def test_a_misspelled_precondition_is_refused_with_what_it_may_have_meant(self, tmp_path, own_kind):
        """A user's kind requiring "fusee" was a bare KeyError; it is refused before anything
        starts, with the path of the fault and the name it may have meant."""
        own_kind(FaultKind("typo-kind", _Nothing, about="", models="", requires=always("fusee"), **DRIVER))
        with pytest.raises(ScenarioError) as err:
            load(_scenario(tmp_path, "typo-kind"))
        assert "faults[0]" in str(err.value) and "'fusee'" in str(err.value)
        assert "did you mean 'fuse'?" in err.value.fix

    def test_a_kind_s_own_precondition_refuses_with_its_reason(self, tmp_path, own_kind):
        """A kind declares a precondition of its own, checked per case, and names it in `requires`."""
        stateless = Precondition("postgres-only", lambda ctx, case: None if case.sink == "postgres"
                                 else f"case {case.name} writes to {case.sink}", per_case=True)
        own_kind(FaultKind("own-need", _Nothing, about="", models="", preconditions=(stateless,),
                           requires=always("postgres-only"), **DRIVER))
        assert load(_scenario(tmp_path, "own-need")).faults[0].kind == "own-need"   # postgres: holds
        path = tmp_path / "noop.toml"
        path.write_text(_scenario(tmp_path, "own-need").read_text().replace(
            'guarantee = "exactly-once"', 'guarantee = "exactly-once"\nsink = "noop"'))
        with pytest.raises(ScenarioError, match=r"own-need needs postgres-only: case c writes to noop"):
            load(path)


class TestSetUp:
    def _view(self, tmp_path) -> CaseView:
        return CaseView("c", tmp_path, tmp_path / "checkpoint", tmp_path / "control", "t", "127.0.0.1:1",
                        None, "sink_c", 7)

    def test_each_set_up_runs_once_and_is_undone_newest_first(self, tmp_path, own_kind):
        """Two faults of a kind asking for the same set-up run it once; undoing runs every undo,
        in reverse."""
        calls: list[str] = []

        def first(case: CaseView):
            calls.append(f"first {case.name}")
            return lambda: calls.append("undo first")

        def second(case: CaseView):
            calls.append("second")
            return lambda: calls.append("undo second")

        own_kind(FaultKind("set-up-a", _Nothing, about="", models="",
                           prepare=lambda spec: Preparation(setup=(first,))))
        own_kind(FaultKind("set-up-b", _Nothing, about="", models="",
                           prepare=lambda spec: Preparation(setup=(first, second))))
        faults = (FaultSpec("set-up-a", 1.0, "driver"), FaultSpec("set-up-b", 2.0, "driver"),
                  FaultSpec("set-up-a", 3.0, "driver"))
        undo = set_up(faults, self._view(tmp_path))
        assert calls == ["first c", "second"]
        undo()
        assert calls[2:] == ["undo second", "undo first"]

    def test_a_failing_set_up_is_named(self, tmp_path, own_kind):
        def broken(case):
            raise OSError("no space")

        own_kind(FaultKind("set-up-broken", _Nothing, about="", models="",
                           prepare=lambda spec: Preparation(setup=(broken,))))
        with pytest.raises(ScenarioError, match=r"case c: the fault set-up .*broken raised OSError: no spa"):
            set_up((FaultSpec("set-up-broken", 1.0, "driver"),), self._view(tmp_path))

    def test_what_faults_need_together_is_merged(self):
        """The proxies, steps, clocks and settings of every fault; a file system if any needs one;
        the shortest writeback."""
        a = Preparation(proxies=frozenset({"kafka"}), writeback_s=30.0, spark_conf=(("a", "1"),))
        b = Preparation(proxies=frozenset({"postgres"}), storage=True, writeback_s=5.0,
                        clocks=frozenset({"driver"}))
        both = a.merge(b)
        assert both.proxies == {"kafka", "postgres"} and both.storage and both.writeback_s == 5.0
        assert both.clocks == {"driver"} and both.spark_conf == (("a", "1"),) and not both.task_stage
        assert preparation(()) == Preparation()


class TestChanges:
    def _fault(self, tmp_path) -> Fault:
        targets = Targets(driver=lambda: None, restart_driver=lambda *a: None, expect_down=lambda d: None,
                          control_dir=tmp_path / "control", executors_log=tmp_path / "e",
                          progress=lambda: [], checkpoint=lambda: tmp_path / "case" / "checkpoint",
                          started_pids=set)
        return _Nothing(FaultSpec("x", 1.0, "driver"), targets)

    def test_a_fault_records_its_changes_as_the_case_directory_names_them(self, tmp_path):
        fault = self._fault(tmp_path)
        commit = tmp_path / "case" / "checkpoint" / "commits" / "10"
        fault.changed_file(commit, "deleted", "deleted (45 bytes)", batch=10)
        fault.removed_batch(10, was='{"t":{"0":5120,"1":5090}}')
        deleted, removed = fault.what_changed
        assert deleted == Change("deleted", "checkpoint/commits/10", 10, "", "deleted (45 bytes)")
        assert (removed.action, removed.path, removed.batch) == (REMOVED_BATCH, "checkpoint/offsets/10", 10)
        assert deleted.clause() == "checkpoint/commits/10 deleted (45 bytes)"
        assert "Spark planned batch 10 again" in removed.clause()
        assert Change.from_json(json.loads(json.dumps(removed.to_json()))) == removed

    def test_a_summary_keeps_them(self):
        record = FaultRecord.from_json({"kind": "x", "at_s": 1.0, "started_s": 1.0, "ended_s": 2.0,
                                        "target": "driver", "observed": True,
                                        "changes": [{"action": "deleted", "path": "checkpoint/commits/3"}]})
        assert [c["path"] for c in record.changes] == ["checkpoint/commits/3"]
        assert FaultRecord.from_json(record.to_json()).changes == record.changes
        assert "changes" not in FaultRecord("z", 1.0, 1.0, 2.0, "driver", True).to_json()


class TestTraits:
    def test_a_user_kind_read_back_without_its_scenario_is_known_by_its_traits(self, own_kind):
        """report, compare and the history read a summary in a process that never loaded the
        scenario's fault_kinds: the record's traits say the kind killed the driver, so its
        driver's exit is scheduled, not an incident of its own."""
        from harness.run.incidents import _scheduled

        mine = FaultKind("traits-kind", _Nothing, about="", models="", keys=(DOWNTIME,), targets=("driver",),
                         default_target="driver", restarts=True, kills_driver=True)
        traits = mine.traits()
        assert traits["kills_driver"] and traits["targets"] == ["driver"]
        record = FaultRecord("traits-kind", 5.0, 5.0, 20.0, "driver (pid 1)", True, traits=traits)
        back = FaultRecord.from_json(json.loads(json.dumps(record.to_json())))
        assert registry.kind_of("traits-kind") is None   # not registered in this process
        kind = registry.kind_of(back.kind, back.traits)
        assert kind is not None and kind.kills_driver and kind.restarts and kind.targets == ("driver",)
        assert _scheduled("driver-exit", 6.0, [back])
        assert not _scheduled("driver-exit", 6.0, [FaultRecord("traits-kind", 5.0, 5.0, 20.0, "d", True)])
        own_kind(mine)
        assert registry.kind_of("traits-kind", None) is mine

    def test_every_kind_s_traits_validate_in_a_summary(self):
        from harness.results import summary
        from tests.test_summary import sample_summary

        doc = sample_summary()
        fault = doc["cases"][0]["faults"][0]
        fault["traits"] = registry.KINDS["kill-driver"].traits()
        fault["changes"] = [Change(REMOVED_BATCH, "checkpoint/offsets/3", 3, "{}", "removed").to_json()]
        summary.validate(doc)
