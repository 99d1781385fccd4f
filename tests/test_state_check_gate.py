"""When the state check runs ([measure] state_check): "auto" (the default) on a case long enough
for a read to stay within 15% of it, true on every case, false on none; any other value refused
with the three it takes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.errors import ScenarioError
from harness.run.collect import STATE_CHECK_SHARE, STATE_READ_S, _state_skipped
from harness.scenario.load import load
from tests.helpers import MINIMAL_SCENARIO

pytestmark = pytest.mark.unit
LONG_ENOUGH_S = STATE_READ_S / STATE_CHECK_SHARE


def _case(state_check, lasted_s: float, where: Path = Path("/nonexistent-case")):
    measure = SimpleNamespace(state_check=state_check)
    case = SimpleNamespace(scenario=SimpleNamespace(measure=measure), started_at=1000.0, dir=where)
    return case, 1000.0 + lasted_s


@pytest.mark.parametrize("value, expected", [('"auto"', None), ("true", True), ("false", False)])
def test_the_key_takes_auto_true_and_false(tmp_path, value, expected):
    path = tmp_path / "s.toml"
    path.write_text(MINIMAL_SCENARIO + f"\n[measure]\nstate_check = {value}\n")
    assert load(path).measure.state_check is expected


def test_it_is_auto_when_not_given(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(MINIMAL_SCENARIO)
    assert load(path).measure.state_check is None


def test_another_value_is_refused_naming_the_three(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(MINIMAL_SCENARIO + '\n[measure]\nstate_check = "yes"\n')
    with pytest.raises(ScenarioError) as err:
        load(path)
    assert "state_check" in str(err.value) and '"auto"' in str(err.value.fix)


def test_auto_checks_a_short_case_whose_driver_read_its_state_at_its_end(tmp_path):
    """The read is paid already, in the case's own driver (no JVM of its own): checked."""
    from harness.check.state_check import STATE_DIR
    from workloads.pipelines.state_read import ANSWER

    (tmp_path / STATE_DIR).mkdir()
    (tmp_path / STATE_DIR / ANSWER).write_text("{}")
    assert _state_skipped(*_case(None, LONG_ENOUGH_S - 10, tmp_path)) is None
    assert _state_skipped(*_case(False, LONG_ENOUGH_S - 10, tmp_path)) is not None   # false stays false


def test_auto_skips_a_short_case_and_says_why():
    case, now = _case(None, LONG_ENOUGH_S - 10)
    why = _state_skipped(case, now)
    assert why is not None and "state_check = true checks it anyway" in why


def test_auto_checks_a_case_long_enough():
    case, now = _case(None, LONG_ENOUGH_S + 10)
    assert _state_skipped(case, now) is None


def test_true_checks_a_short_case_and_false_skips_a_long_one():
    assert _state_skipped(*_case(True, 30)) is None
    assert _state_skipped(*_case(False, 3600)) == "not checked: [measure] state_check = false"


def _state_case(tmp_path, kind: str, with_state: bool, lasted_s: float = 30.0):
    import time

    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "state" if with_state else checkpoint).mkdir(parents=True)
    measure = SimpleNamespace(state_check=None)
    return SimpleNamespace(pipeline=SimpleNamespace(kind=kind), checkpoints=[checkpoint], dir=tmp_path,
                           scenario=SimpleNamespace(measure=measure), started_at=time.monotonic() - lasted_s)


@pytest.mark.parametrize("kind, with_state", [("passthrough", False), ("tumbling_count", False)])
def test_a_case_with_no_state_it_judges_says_nothing_of_it(tmp_path, kind, with_state):
    from harness.run.collect import _state

    result, checked = SimpleNamespace(sections={}), object()
    assert _state(_state_case(tmp_path, kind, with_state), result, None, None, checked, 0.0) is checked
    assert "state_check" not in result.sections


def test_a_short_stateful_case_says_it_was_not_checked_and_why(tmp_path):
    from harness.run.collect import _state

    result, checked = SimpleNamespace(sections={}), object()
    assert _state(_state_case(tmp_path, "tumbling_count", True), result, None, None, checked, 0.0) is checked
    (note,) = result.sections["state_check"]["notes"]
    assert note.startswith("not checked: the case lasted 30 s"), note


def test_a_job_whose_state_has_no_model_says_so_not_that_it_was_short(tmp_path):
    """A short case of an applyInPandasWithState job: the note names its operator (nothing would
    check it however long it ran), not the case's length."""
    import json

    from harness.run.collect import _state

    (tmp_path / "plan.json").write_text(json.dumps({"operators": ["applyInPandasWithState"]}))
    result, checked = SimpleNamespace(sections={}), object()
    assert _state(_state_case(tmp_path, "job", True), result, None, None, checked, 0.0) is checked
    (note,) = result.sections["state_check"]["notes"]
    assert "applyInPandasWithState" in note and "lasted" not in note, note


def test_a_case_restarted_on_a_fresh_checkpoint_says_so_not_that_it_was_short(tmp_path):
    """At-most-once's restart on a fresh checkpoint: the note is the check's own (no model of a
    fresh query's state), not the case's length (the quick bench's at-most-once case said 'the
    case lasted 115 s')."""
    from harness.run.collect import _state

    case = _state_case(tmp_path, "tumbling_count", True)
    fresh = tmp_path / "checkpoint-1"
    (fresh / "state").mkdir(parents=True)
    case.checkpoints.append(fresh)
    case.dir = tmp_path
    result, checked = SimpleNamespace(sections={}, faults=[]), object()
    out = SimpleNamespace(batches=[])
    assert _state(case, result, None, out, checked, 0.0) is checked
    (note,) = result.sections["state_check"]["notes"]
    assert "more than one checkpoint" in note and "lasted" not in note, note


def test_a_short_case_whose_driver_read_part_of_it_starts_no_reader_for_the_rest(tmp_path):
    """The driver read batch 2 at its end, but the check also wants batch 1 (a fault its read did
    not see): on a short case under "auto", batch 1 is said unchecked with the gate's reason, and
    no reader of its own starts (the unit lane has no Spark: one would fail here); on a long
    case, or with state_check = true, the reader would be started (no_reader None)."""
    import json

    import pandas as pd

    from harness.check import state_check
    from harness.check.checkpoint import Batch
    from harness.run.collect import _too_short
    from harness.scenario.model import Pipeline
    from workloads.pipelines.state_read import ANSWER

    case_dir = tmp_path / "case"
    (case_dir / "checkpoint" / "state").mkdir(parents=True)
    out = case_dir / state_check.STATE_DIR
    out.mkdir()
    (out / ANSWER).write_text(json.dumps({"in_driver": True, "batches": [2], "files": []}))
    pd.DataFrame({"operatorId": [0], "operatorName": ["stateStoreSave"]}).to_parquet(out / "metadata.parquet")
    batches = [Batch(1, 0, {0: 1}, True, {0: 0}, committed_ms=2_000),
               Batch(2, 0, {0: 2}, True, committed_ms=4_000)]
    faults = [SimpleNamespace(kind="kill-driver", landed_s=1.0, started_s=1.0)]
    truth = pd.DataFrame({"event_id": [0, 1], "key": "a", "event_time_ms": 0, "amount": 1, "partition": 0,
                          "offset": [0, 1], "control": False})
    windows = Pipeline(kind="tumbling_count")
    short, _ = _case(None, 30)
    why = _too_short(short, 1030.0)
    assert why is not None
    assert _too_short(*_case(True, 30)) is None and _too_short(*_case(None, 3600)) is None
    outcome = state_check.check(case_dir, windows, truth, batches, faults, 0.0, [case_dir / "checkpoint"],
                                no_reader=why)
    assert outcome is not None
    said = [n for n in outcome.notes if "batch 1 after kill-driver" in n and "did not read it" in n]
    assert said and said[0].startswith("not checked: the case lasted 30 s"), outcome.notes
    assert [c["batch"] for c in outcome.checked] in ([2], []), outcome.checked
