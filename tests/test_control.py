"""The commit gate decides which batch a request acts on without running a Spark job of its
own: before the write from the batch's offset log, after it from the sink's own reading."""

import pytest

from workloads.pipelines import control
from workloads.pipelines.control import (
    DELAY_COMMIT,
    FAIL_BATCH,
    CommitGate,
    InjectedFailure,
    held_batches,
    read_input,
    request,
)

pytestmark = pytest.mark.unit


def _offsets(checkpoint, batch_id: int, *sources: str) -> None:
    logs = checkpoint / "offsets"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / str(batch_id)).write_text("\n".join(["v1", '{"batchWatermarkMs":0}', *sources]))


class _NoJobs:
    """A batch DataFrame whose every action fails the test: the gate may not run one."""

    columns = ["key", "count"]

    def __getattr__(self, name):
        raise AssertionError(f"the gate called batch_df.{name}: a second run of the batch's plan")


def _gate(tmp_path, monkeypatch, rows=None, counts=None):
    """A gate whose sink records what it was handed; the sink's own reading counted `counts`."""
    written = []
    monkeypatch.setattr(control, "_observe", lambda df: (("observed", df), lambda: counts))
    gate = CommitGate(lambda df, batch_id: written.append((df, batch_id)), tmp_path / "control",
                      lambda: rows, checkpoint=tmp_path / "checkpoint")
    return gate, written


class TestReadInput:
    def test_a_batch_whose_offsets_moved_read_input(self, tmp_path):
        """offsets/3 ends past offsets/2: batch 3 read records."""
        _offsets(tmp_path, 2, '{"events":{"0":10}}')
        _offsets(tmp_path, 3, '{"events":{"0":12}}')
        assert read_input(tmp_path, 3) is True

    def test_a_no_data_batch_read_nothing(self, tmp_path):
        """The same end offsets as the batch before: a batch run only to move the watermark."""
        _offsets(tmp_path, 2, '{"events":{"0":10}}')
        _offsets(tmp_path, 3, '{"events":{"0":10}}')
        assert read_input(tmp_path, 3) is False

    def test_the_log_that_cannot_say_is_none(self, tmp_path):
        """Batch 0, a missing offsets file or no checkpoint at all: unknown."""
        _offsets(tmp_path, 0, '{"events":{"0":10}}')
        assert read_input(tmp_path, 0) is None
        assert read_input(tmp_path, 5) is None
        assert read_input(None, 5) is None


class TestNoJobOfItsOwn:
    def test_the_sink_gets_the_observed_batch_and_the_gate_runs_nothing(self, tmp_path, monkeypatch):
        """While a hold waits, the sink writes the observed batch; the gate touches the batch no
        other way, and holds it with the rows the sink's reading counted."""
        gate, written = _gate(tmp_path, monkeypatch, counts={"rows": 4, "workload_rows": 3})
        request(tmp_path / "control", DELAY_COMMIT, "10")
        batch = _NoJobs()
        gate(batch, 6)
        assert written == [(("observed", batch), 6)]
        (held,) = held_batches(tmp_path / "control")
        assert (held["batch_id"], held["rows"]) == (6, 4)

    def test_a_batch_of_control_rows_only_is_not_held_and_the_request_waits(self, tmp_path, monkeypatch):
        """The sink's reading found only the harness's control rows: the next batch is held."""
        gate, _ = _gate(tmp_path, monkeypatch, rows=2, counts={"rows": 2, "workload_rows": 0})
        request(tmp_path / "control", DELAY_COMMIT, "10")
        gate(_NoJobs(), 2)
        assert held_batches(tmp_path / "control") == [] and (tmp_path / "control" / DELAY_COMMIT).exists()

    def test_a_reading_the_gate_did_not_see_holds_on_the_sinks_word(self, tmp_path, monkeypatch):
        """A sink that read the batch through the RDD API says it wrote 5 rows: held."""
        gate, _ = _gate(tmp_path, monkeypatch, rows=5, counts=None)
        request(tmp_path / "control", DELAY_COMMIT, "10")
        gate(_NoJobs(), 3)
        assert [h["rows"] for h in held_batches(tmp_path / "control")] == [5]

    def test_without_a_request_the_sink_gets_the_batch_itself(self, tmp_path, monkeypatch):
        """Nothing pending: not even an observation is added to the sink's plan."""
        gate, written = _gate(tmp_path, monkeypatch, counts={"rows": 1, "workload_rows": 1})
        batch = _NoJobs()
        gate(batch, 1)
        assert written == [(batch, 1)]


class TestBeforeTheWrite:
    def test_a_batch_that_read_input_fails_before_the_sink_is_called(self, tmp_path, monkeypatch):
        """fail-batch at before-write, offsets/4 past offsets/3: raised, the sink never called."""
        gate, written = _gate(tmp_path, monkeypatch)
        _offsets(tmp_path / "checkpoint", 3, '{"events":{"0":10}}')
        _offsets(tmp_path / "checkpoint", 4, '{"events":{"0":11}}')
        request(tmp_path / "control", FAIL_BATCH, '{"point": "before-write", "times": 1}')
        with pytest.raises(InjectedFailure):
            gate(_NoJobs(), 4)
        assert written == []

    def test_a_no_data_batch_passes_and_the_request_waits(self, tmp_path, monkeypatch):
        """A batch that read nothing is written; the request waits for one that read input."""
        gate, written = _gate(tmp_path, monkeypatch)
        _offsets(tmp_path / "checkpoint", 3, '{"events":{"0":10}}')
        _offsets(tmp_path / "checkpoint", 4, '{"events":{"0":10}}')
        request(tmp_path / "control", FAIL_BATCH, '{"point": "before-write", "times": 1}')
        gate(_NoJobs(), 4)
        assert len(written) == 1 and (tmp_path / "control" / FAIL_BATCH).exists()


class TestEachRequestItsOwnHold:
    def test_a_pause_does_not_take_a_delay_held_meanwhile(self, tmp_path, monkeypatch):
        """Two faults overlap, as they do on a loaded machine: a kafka-retention asks to pause the
        next batch before its write, and meanwhile a stall-sink's delay holds another batch after
        its write. The retention's hold is the pause's, never the delay's: that batch had already
        read its input, and deleting it would prove nothing (a CI run took it, and found the
        deleted records read)."""
        gate, _ = _gate(tmp_path, monkeypatch, counts={"rows": 4, "workload_rows": 3})
        where = tmp_path / "control"
        mark = control.held_files(where)
        request(where, DELAY_COMMIT, "10")
        gate(_NoJobs(), 7)                    # the stall-sink's hold, after the write
        assert control.held_since(where, control.PAUSE_BATCH, mark) == []
        (delay,) = control.held_since(where, DELAY_COMMIT, mark)
        assert (delay["batch_id"], delay["point"], delay["request"]) == (7, control.AFTER_WRITE, DELAY_COMMIT)
        request(where, control.PAUSE_BATCH)
        monkeypatch.setattr(control, "HOLD_CEILING_MS", 1)     # the pause lets go at once
        gate(_NoJobs(), 8)
        (pause,) = control.held_since(where, control.PAUSE_BATCH, mark)
        assert (pause["batch_id"], pause["point"]) == (8, control.BEFORE_WRITE)
        assert control.held_since(where, DELAY_COMMIT, control.held_files(where)) == []
