"""The replay workload without Kafka: reading the user's files, scanning them, validating the
[workload] table, pacing the records and making control records in their format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workloads.errors import Problem, SpecError
from workloads.replay import preview, records, scan, schema, send
from workloads.replay.pace import Pacer, partition_of
from workloads.replay.spec import parse

pytestmark = pytest.mark.unit

T0 = 1_714_564_800_000


def _jsonl(path: Path, rows: list[dict], blank_lines: bool = False) -> Path:
    text = "\n".join(json.dumps(r) for r in rows) + "\n"
    if blank_lines:
        text = text.replace("\n", "\n\n", 3)
    path.write_text(text)
    return path


def _clicks(n: int, late_every: int = 0, lag_ms: int = 0) -> list[dict]:
    out = []
    for i in range(n):
        ts = T0 + i * 10 - (lag_ms if late_every and i % late_every == late_every - 1 else 0)
        out.append({"id": i, "user": f"u{i % 7}", "ts": ts, "price": i / 4})
    return out


def _all(source: records.Source) -> list[records.Records]:
    return list(records.blocks(source, rows=100))


class TestRecords:
    def test_json_lines_travel_byte_for_byte(self, tmp_path):
        """Each JSON line is the record's value exactly as written (spacing, field order); blank lines go."""
        path = tmp_path / "a.jsonl"
        path.write_text('{"ts": 5,  "k": "x"}\n\n{"k":"y","ts":7}\r\n')
        got = _all(records.Source(path, "ts", "k"))
        assert [v for b in got for v in b.values] == [b'{"ts": 5,  "k": "x"}', b'{"k":"y","ts":7}']
        assert got[0].event_time_ms.tolist() == [5, 7] and got[0].keys == ["x", "y"]

    def test_iso_times_and_zones_become_epoch_ms(self, tmp_path):
        """ISO-8601 event times with Z, an offset or no zone (UTC) are read as epoch milliseconds."""
        times = ["2024-05-01T12:00:00Z", "2024-05-01T14:00:00.250+02:00", "2024-05-01 12:00:01"]
        path = _jsonl(tmp_path / "t.jsonl", [{"t": t} for t in times])
        got = _all(records.Source(path, "t"))[0].event_time_ms.tolist()
        assert got == [T0, T0 + 250, T0 + 1000]

    def test_csv_and_parquet_rows_go_as_json_objects(self, tmp_path):
        """A CSV or Parquet row is sent as one JSON object of its columns, in order."""
        frame = pd.DataFrame({"user": ["a", "b"], "ts": [T0, T0 + 1], "n": [1.5, None]})
        frame.to_csv(tmp_path / "r.csv", index=False)
        frame.to_parquet(tmp_path / "r.parquet")
        for name in ("r.csv", "r.parquet"):
            got = _all(records.Source(tmp_path / name, "ts", "user"))[0]
            assert [json.loads(v) for v in got.values] == [{"user": "a", "ts": T0, "n": 1.5},
                                                           {"user": "b", "ts": T0 + 1, "n": None}], name
            assert got.event_time_ms.tolist() == [T0, T0 + 1] and got.keys == ["a", "b"]

    def test_a_directory_is_its_files_in_name_order(self, tmp_path):
        """A directory's files are read in name order, rows numbered across them; hidden files are skipped."""
        _jsonl(tmp_path / "b.jsonl", [{"ts": 3}])
        _jsonl(tmp_path / "a.jsonl", [{"ts": 1}, {"ts": 2}])
        (tmp_path / "_SUCCESS.json").write_text("")
        got = _all(records.Source(tmp_path, "ts"))
        assert [b.first_row for b in got] == [0, 2]
        assert np.concatenate([b.event_time_ms for b in got]).tolist() == [1, 2, 3]

    def test_a_record_without_event_time_is_refused_with_its_row(self, tmp_path):
        """A null event time names the row and the fix."""
        path = _jsonl(tmp_path / "n.jsonl", [{"ts": 1}, {"ts": None}])
        with pytest.raises(Problem, match="row 1 has no ts"):
            _all(records.Source(path, "ts"))

    def test_a_missing_column_names_the_file_s_columns(self, tmp_path):
        """An event-time column the records lack is refused, listing the fields they have."""
        path = _jsonl(tmp_path / "m.jsonl", [{"time": 1, "user": "a"}])
        with pytest.raises(Problem, match="no field 'ts'.*time, user"):
            _all(records.Source(path, "ts"))

    def test_an_unknown_suffix_is_refused(self, tmp_path):
        """A file of no format the replay reads is refused with the formats it does."""
        path = tmp_path / "x.txt"
        path.write_text("1\n")
        with pytest.raises(Problem, match="JSON lines"):
            assert records.Source(path, "ts").format


class TestScan:
    def test_order_statistics_follow_file_order(self, tmp_path):
        """Every 10th record 2 s behind: 10% out of order, lateness about 2 s, and the span."""
        path = _jsonl(tmp_path / "c.jsonl", _clicks(1000, late_every=10, lag_ms=2000))
        found = scan.scan(records.Source(path, "ts"))
        assert found.rows == 1000 and found.out_of_order == 100
        assert 1900 <= found.lateness_ms["max"] <= 2000
        assert found.min_ms == T0 - 2000 + 90 and found.max_ms == T0 + 9980 and found.first_ms == T0
        assert found.schema == "`id` BIGINT, `user` STRING, `ts` BIGINT, `price` DOUBLE"

    def test_records_in_order_have_none_out_of_order(self, tmp_path):
        """Records in event-time order across several blocks count no out-of-order record."""
        path = _jsonl(tmp_path / "o.jsonl", _clicks(300))
        assert scan.scan(records.Source(path, "ts")).out_of_order == 0

    def test_preview_says_span_order_and_the_delay_that_covers_it(self, tmp_path):
        """The preview names schema, records, out-of-order share and the delay covering the lateness."""
        path = _jsonl(tmp_path / "p.jsonl", _clicks(1000, late_every=10, lag_ms=2000))
        text = preview.preview(path)   # the event time guessed from its name
        assert "records     1,000" in text and "`ts` BIGINT" in text
        assert "10.00% out of order" in text and "delay of at least 2.0 s" in text

    def test_the_cli_prints_the_preview_and_exits_2_on_a_missing_file(self, tmp_path, capsys):
        """python -m harness replay-preview FILE prints the preview; a missing file exits 2 with the fix."""
        from harness import cli

        path = _jsonl(tmp_path / "p.jsonl", _clicks(50))
        assert cli.main(["replay-preview", str(path), "--event-time", "ts", "--key", "user"]) == 0
        assert "records     50" in capsys.readouterr().out
        assert cli.main(["replay-preview", str(tmp_path / "none.jsonl")]) == 2
        err = capsys.readouterr().err
        # the preview has no scenario: its fix speaks of the path given, not of workload.file
        assert "no such file" in err and "workload.file" not in err and "relative to this directory" in err

    def test_preview_asks_for_the_event_time_when_it_cannot_tell(self, tmp_path):
        """Without a column that looks like an event time the preview asks for --event-time."""
        path = _jsonl(tmp_path / "q.jsonl", [{"a": 1, "b": 2}])
        with pytest.raises(Problem, match="--event-time"):
            preview.preview(path)


class TestSchema:
    def test_a_schema_that_reads_the_records_has_no_problem(self):
        """Matching names and types (TIMESTAMP from ISO text, DOUBLE from an integer) parse."""
        sample = [b'{"user": "a", "n": 3, "at": "2024-05-01T12:00:00Z", "x": 1}']
        assert schema.problems("user STRING, n BIGINT, at TIMESTAMP, x DOUBLE", sample) == []

    def test_a_misspelt_field_and_a_wrong_type_are_named(self):
        """A field no record has and text where the DDL says INT are each named with the record."""
        sample = [b'{"user": "a", "n": "three"}']
        found = schema.problems("usr STRING, n INT", sample)
        assert "no record has a field 'usr'" in found[0]
        assert "n = \"three\", which INT reads as null" in found[1]

    def test_epoch_millis_declared_timestamp_is_refused(self):
        """A number declared TIMESTAMP would be read as seconds: refused (declare BIGINT)."""
        assert schema.problems("ts TIMESTAMP", [b'{"ts": 1714564800000}'])

    def test_nested_types_split_at_top_level_commas(self):
        """STRUCT and DECIMAL arguments do not split the field list."""
        assert schema.fields("a STRUCT<x: INT, y: STRING>, b DECIMAL(10, 2)") == [
            ("a", "STRUCT<X: INT, Y: STRING>"), ("b", "DECIMAL(10, 2)")]


class TestSpec:
    def test_duration_is_the_file_s_length_at_its_rate(self, tmp_path):
        """A constant rate without duration lasts rows / eps (plus a millisecond)."""
        _jsonl(tmp_path / "c.jsonl", _clicks(500))
        spec = _spec(tmp_path, rate={"eps": 100})
        assert spec.duration_s == 5.001 and spec.rows == 500 and spec.kind == "replay"

    def test_speed_lasts_the_event_time_span_over_speed(self, tmp_path):
        """At speed 2 a 9.99 s span lasts about 5 s; the mean rate is rows over that."""
        _jsonl(tmp_path / "c.jsonl", _clicks(1000))
        spec = _spec(tmp_path, speed=2)
        assert spec.duration_s == pytest.approx(4.996)
        assert spec.mean_eps == pytest.approx(1000 / 4.996, rel=0.01)

    @pytest.mark.parametrize("key", ["keys", "payload", "duplicates", "time"])
    def test_knobs_of_generated_events_are_refused(self, tmp_path, key):
        """keys, payload, duplicates and time belong to generated events: refused for a replay."""
        _jsonl(tmp_path / "c.jsonl", _clicks(10))
        with pytest.raises(SpecError, match=f"workload.{key}"):
            _spec(tmp_path, speed=1, **{key: {}})

    def test_speed_and_rate_together_are_refused(self, tmp_path):
        """Pacing by event time and by a rate shape at once is refused."""
        _jsonl(tmp_path / "c.jsonl", _clicks(10))
        with pytest.raises(SpecError, match="keep one"):
            parse({"kind": "replay", "file": "c.jsonl", "event_time": "ts", "speed": 1, "rate": {"eps": 5}},
                  base_dir=tmp_path)

    def test_a_shaped_rate_needs_a_duration(self, tmp_path):
        """A ramp has no end of its own for a file: workload.duration is asked for."""
        _jsonl(tmp_path / "c.jsonl", _clicks(10))
        with pytest.raises(SpecError, match="duration is missing"):
            parse({"kind": "replay", "file": "c.jsonl", "event_time": "ts",
                   "rate": {"shape": "ramp", "from_eps": 1, "to_eps": 5}}, base_dir=tmp_path)

    def test_a_missing_file_names_the_key(self, tmp_path):
        """A file that is not there is refused under workload.file."""
        with pytest.raises(SpecError, match="workload.file"):
            parse({"kind": "replay", "file": "nope.jsonl", "event_time": "ts", "speed": 1}, base_dir=tmp_path)

    def test_the_generator_s_keys_are_still_checked(self, tmp_path):
        """An unknown key is refused by the generator's own validation, with a suggestion."""
        _jsonl(tmp_path / "c.jsonl", _clicks(10))
        with pytest.raises(SpecError, match="did you mean `partitions`"):
            parse({"kind": "replay", "file": "c.jsonl", "event_time": "ts", "speed": 1, "partition": 2},
                  base_dir=tmp_path)

    def test_a_misspelled_key_is_named_with_the_replay_s_own_keys(self, tmp_path):
        """`sped` is refused with `speed` suggested and the replay's keys listed (a new user was
        told "did you mean `seed`?", from the generator's keys alone)."""
        _jsonl(tmp_path / "c.jsonl", _clicks(10))
        with pytest.raises(SpecError, match="did you mean `speed`") as caught:
            parse({"kind": "replay", "file": "c.jsonl", "event_time": "ts", "sped": 5}, base_dir=tmp_path)
        assert "file, event_time, key, speed" in str(caught.value)


def _spec(tmp_path: Path, **keys):
    """A replay of tmp_path/c.jsonl paced by `keys`."""
    return parse({"kind": "replay", "file": "c.jsonl", "event_time": "ts", **keys}, base_dir=tmp_path)


def _paced(spec, start_ms: int = 0) -> list:
    return list(Pacer(spec, start_ms).blocks(records.blocks(spec.source, rows=128)))


class TestPace:
    def test_a_constant_rate_sends_the_k_th_record_at_k_over_eps(self, tmp_path):
        """At 100 records/s record k is due k/100 s after the start, in file order."""
        _jsonl(tmp_path / "c.jsonl", _clicks(300))
        got = _paced(_spec(tmp_path, rate={"eps": 100}))
        rows = np.concatenate([p.row for p in got])
        due = np.concatenate([p.intended_us for p in got])
        assert rows.tolist() == list(range(300))
        assert np.allclose(due, rows * 10_000, atol=1)
        assert max(p.nominal_us.max() - p.nominal_us.min() for p in got) < 1_000_000   # at most 1 s a block

    def test_speed_follows_the_running_maximum_of_event_time(self, tmp_path):
        """At speed 10 a record is due when the running maximum of event time reaches it."""
        _jsonl(tmp_path / "c.jsonl", [{"ts": T0}, {"ts": T0 + 1000}, {"ts": T0 + 500}, {"ts": T0 + 2000}])
        due = np.concatenate([p.intended_us for p in _paced(_spec(tmp_path, speed=10))])
        assert due.tolist() == [0, 100_000, 100_000, 200_000]

    def test_a_duration_shorter_than_the_file_sends_its_share(self, tmp_path):
        """A 2 s duration at 100 records/s sends the first 200 of 300 records."""
        _jsonl(tmp_path / "c.jsonl", _clicks(300))
        spec = parse({"kind": "replay", "file": "c.jsonl", "event_time": "ts", "rate": {"eps": 100},
                      "duration": "2s"}, base_dir=tmp_path)
        assert sum(len(p) for p in _paced(spec)) == 200

    def test_delays_reorder_but_never_send_out_of_send_time_order(self, tmp_path):
        """Exponential delays and a late share reorder records, yet all go out in send-time order."""
        _jsonl(tmp_path / "c.jsonl", _clicks(2000))
        spec = _spec(tmp_path, rate={"eps": 1000}, seed=3, delay={
            "distribution": "exponential", "mean": "200ms", "late_share": 0.05, "late_by": "1s"})
        got = _paced(spec)
        due = np.concatenate([p.intended_us for p in got])
        rows = np.concatenate([p.row for p in got])
        assert (np.diff(due) >= 0).all() and sorted(rows.tolist()) == list(range(2000))
        assert (rows != np.arange(2000)).any()   # reordered
        late = np.concatenate([p.late for p in got])
        assert 50 <= late.sum() <= 150
        again = np.concatenate([p.row for p in _paced(spec)])
        assert (again == rows).all()   # the seed fixes the order

    def test_the_same_key_always_lands_on_the_same_partition(self):
        """A key's partition is a stable hash: equal keys agree, and keys spread over the partitions."""
        keys = [f"u{i % 50}" for i in range(500)]
        p = partition_of(keys, 4)
        assert (p[:50] == p[50:100]).all() and set(p.tolist()) == {0, 1, 2, 3}


class TestControl:
    def test_a_control_record_keeps_the_format_and_marks_every_field(self):
        """The template's event time is set in its own form; numbers become the mark, texts __control__<n>."""
        template = {"id": 7, "user": "u1", "ts": "2024-05-01T12:00:00Z", "ok": True, "tags": ["a"], "x": None}
        got = json.loads(send.control_value(template, "ts", -3, T0 + 250))
        assert got == {"id": -3, "user": "__control__3", "ts": "2024-05-01T12:00:00.250Z", "ok": True,
                       "tags": ["__control__3"], "x": None}
        assert json.loads(send.control_value({"ts": 1, "n": 2}, "ts", -1, 99)) == {"ts": 99, "n": -1}

    def test_control_marks_are_negative_and_unique(self):
        """Warm-up ids (negative) keep theirs; the flush's go below every warm-up's."""
        marks = [send.control_mark(first, i) for first in (-2, 500) for i in (0, 1)]
        assert marks == [-2, -1, -1_000_000_500, -1_000_000_501] and len(set(marks)) == 4
