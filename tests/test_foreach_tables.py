"""The foreach_batch sink's scenario keys and its oracle's comparison, table by table
(harness/scenario/foreach.py, harness/check/batch_oracle/foreach_tables.py): pure, no Spark. End
to end, with Spark, Kafka and Delta: benchmarks/test_foreach_batch.py."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.check.batch_oracle import foreach_tables
from harness.findings import tables as table_findings
from harness.scenario.foreach import FOREACH_BATCH
from harness.scenario.load import load
from tests.helpers import REPO
from workloads.errors import SpecError
from workloads.sinks.foreach_batch import STREAM, Table, locations

MERGED = Table("user_totals", "delta", ("user",), ("last_batch",))
APPENDED = Table("clicks", "postgres")


def _totals(rows):
    return pd.DataFrame(rows, columns=["user", "total", "last_batch"])


class TestMergedTable:
    def test_the_same_final_state_per_key_holds_whatever_the_batch_ids(self):
        """A merged table equal to its twin in every compared column holds; `ignore` leaves out
        the stream's batch ids (the twin's one call is batch 0)."""
        stream = _totals([("u1", 5, 7), ("u2", 3, 9)])
        twin = _totals([("u2", 3, 0), ("u1", 5, 0)])
        c = foreach_tables.compare(MERGED, stream, twin)
        assert not c.wrong and c.found.delivered == 2, c.found

    def test_a_batch_merged_twice_is_a_key_in_another_state_named_with_the_table(self):
        """total = total + n applied twice: one lost and one unexpected row of one key, told as
        the key's value against the expected one, the table named."""
        c = foreach_tables.compare(MERGED, _totals([("u1", 8, 7), ("u2", 3, 9)]),
                                   _totals([("u1", 5, 0), ("u2", 3, 0)]))
        assert c.wrong and (c.found.lost, c.found.unexpected) == (1, 1), c.found
        text = foreach_tables.sentence(c)
        assert text.startswith("table user_totals (delta, merged on user)"), text
        assert "user=u1: total=8, expected total=5" in text and "not idempotent" in text, text

    def test_the_flushs_own_key_is_set_aside_and_no_other(self):
        """A key only the twin with the flush's records has, in the stream as that twin has it,
        is the harness's own; a key the flush changes and the stream holds otherwise is not."""
        twin = _totals([("u1", 5, 0)])
        flushed = _totals([("u1", 5, 0), ("__control__1", 1, 0)])
        ok = foreach_tables.compare(MERGED, _totals([("u1", 5, 3), ("__control__1", 1, 4)]), twin, flushed)
        assert not ok.wrong and ok.set_aside == 1, ok.found
        bad = foreach_tables.compare(MERGED, _totals([("u1", 5, 3), ("__control__1", 2, 4)]), twin, flushed)
        assert bad.wrong and bad.found.unexpected == 1, bad.found


class TestAppendedTable:
    def test_a_batch_appended_twice_is_duplicated_and_a_note_not_a_problem(self):
        """Rows as multisets: a batch's rows twice are duplicated (the guarantee decides), said
        with the table's name."""
        twin = pd.DataFrame({"user": ["u1", "u2"], "ts": [1, 2]})
        stream = pd.DataFrame({"user": ["u1", "u2", "u2"], "ts": [1, 2, 2]})
        c = foreach_tables.compare(APPENDED, stream, twin)
        assert (c.found.duplicated, c.found.lost, c.found.unexpected) == (1, 0, 0), c.found
        said = foreach_tables.sentence(c)
        assert said.startswith("table clicks (postgres, appended): 1 rows written twice"), said

    def test_a_table_the_stream_never_made_is_all_lost(self):
        """A second table a failing write_batch never reached: every twin row lost."""
        twin = pd.DataFrame({"user": ["u1", "u2"], "ts": [1, 2]})
        c = foreach_tables.compare(APPENDED, None, twin)
        assert c.found.lost == 2 and "never created it" in foreach_tables.sentence(c)

    def test_the_flushs_rows_are_set_aside_as_often_as_it_gives_them(self):
        twin = pd.DataFrame({"user": ["u1"], "ts": [1]})
        flushed = pd.DataFrame({"user": ["u1", "__control__1"], "ts": [1, -1]})
        stream = pd.DataFrame({"user": ["u1", "__control__1", "__control__1"], "ts": [1, -1, -1]})
        c = foreach_tables.compare(APPENDED, stream, twin, flushed)
        assert c.set_aside == 1 and c.found.duplicated == 0 and c.found.unexpected == 1, c.found


class TestRanAgain:
    def test_a_batch_id_write_batch_was_called_for_twice_ran_again(self):
        made = [{"batch_id": 3, "pid": 1}, {"batch_id": 4, "pid": 1}, {"batch_id": 3, "pid": 2}]
        assert table_findings.ran_again(made) == [3]


class TestPlaces:
    def test_each_side_has_places_of_its_own(self, tmp_path):
        tables = [MERGED, APPENDED]
        stream = locations(tables, tmp_path, "sink_a_1234", STREAM)
        twin = locations(tables, tmp_path, "sink_a_1234", "with-flush")
        assert stream == {"user_totals": str(tmp_path / "tables" / "stream" / "user_totals"),
                          "clicks": "sink_a_1234.clicks"}
        assert twin["clicks"] == "sink_a_1234_with_flush.clicks"
        assert twin["user_totals"] != stream["user_totals"]


SCENARIO = """
name = "fb"
imports = ["{merge}"]
[workload]
kind = "replay"
file = "{data}"
event_time = "ts"
rate = {{ eps = 500 }}
[pipeline]
kind = "job"
from_kafka = "job:from_kafka"
columns = {{ user = "STRING", page = "STRING", ts = "LONG" }}
[[cases]]
name = "c"
guarantee = "exactly-once"
{case}
"""


def _load(tmp_path, case: str):
    data = tmp_path / "clicks.jsonl"
    data.write_text("".join(f'{{"user":"u{i % 7}","page":"/","ts":{1_714_564_800_000 + i * 10}}}\n'
                            for i in range(500)))
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(merge=REPO / "examples" / "merge", data=data, case=case))
    return load(path)


class TestScenarioKeys:
    def test_function_and_tables_are_read(self, tmp_path):
        case = _load(tmp_path, f'sink = "{FOREACH_BATCH}"\nfunction = "job:write_batch"\n'
                               '[[cases.tables]]\ndelta = "user_totals"\nkey = ["user"]\n'
                               'ignore = ["last_batch"]\n'
                               '[[cases.tables]]\npostgres = "clicks"\n').cases[0]
        assert case.function == "job:write_batch" and case.tables == (MERGED, APPENDED)

    @pytest.mark.parametrize(("case", "said"), [
        (f'sink = "{FOREACH_BATCH}"\n', "needs cases[0].function"),
        (f'sink = "{FOREACH_BATCH}"\nfunction = "job:from_kafka"\n[[cases.tables]]\ndelta = "t"\n',
         "cannot be called as from_kafka(df, batch_id)"),
        (f'sink = "{FOREACH_BATCH}"\nfunction = "job:write_batch"\n', "write_batch's tables"),
        (f'sink = "{FOREACH_BATCH}"\nfunction = "job:write_batch"\n[[cases.tables]]\nkey = ["u"]\n',
         "needs one of delta, postgres"),
        (f'sink = "{FOREACH_BATCH}"\nfunction = "job:write_batch"\n[[cases.tables]]\ndelta = "t"\n'
         '[[cases.tables]]\npostgres = "t"\n', "names a table an earlier one names"),
        ('sink = "postgres"\nfunction = "job:write_batch"\n', 'is used only with sink = "foreach_batch"'),
    ])
    def test_a_mistake_is_refused_with_its_key(self, tmp_path, case, said):
        with pytest.raises(SpecError) as err:
            _load(tmp_path, case)
        assert said in str(err.value), str(err.value)
