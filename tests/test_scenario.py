"""Scenario files: validation into frozen dataclasses, and errors that name the field."""

import json
from pathlib import Path

import pytest

from harness.errors import ScenarioError
from harness.scenario import GUARANTEES, load, parse_duration_ms
from tests.helpers import MINIMAL_SCENARIO as GOOD
from tests.helpers import REPO

SCENARIOS = Path(__file__).resolve().parent.parent / "workloads" / "scenarios"



def _write(tmp_path, text: str) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    return path


def _edited(tmp_path, old: str, new: str) -> Path:
    """GOOD with one edit; the edit must apply, or the test would prove nothing."""
    assert old in GOOD
    return _write(tmp_path, GOOD.replace(old, new, 1))


def _error(path: Path) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load(path)
    return info.value


class TestShippedScenarios:
    @pytest.mark.parametrize("name, n_cases", [("smoke", 1), ("bench", 3), ("faults", 3), ("pipelines", 8),
                                                ("sinks", 5), ("triggers", 3), ("capped", 1),
                                                ("watermarks", 3), ("overhead", 1), ("steady", 1)])
    def test_each_shipped_scenario_loads(self, name, n_cases):
        """The shipped scenarios validate, with quick and without."""
        for quick in (False, True):
            scenario = load(SCENARIOS / f"{name}.toml", quick=quick)
            assert scenario.name == name and len(scenario.cases) == n_cases

    def test_smoke_has_the_documented_values(self):
        """Durations become milliseconds and the slide defaults to the window."""
        s = load(SCENARIOS / "smoke.toml")
        assert (s.pipeline.window_ms, s.pipeline.slide_ms, s.pipeline.watermark_ms) == (5000, 5000, 4000)
        assert s.workload.delay.max_ms == 2000 and s.drain_timeout_s == 180.0
        assert s.workload.delay.late_by_ms == 12_000 and s.workload.duration_s == 20

    def test_to_dict_is_json_serialisable(self):
        """The validated values can be copied into a results file as they are."""
        d = load(SCENARIOS / "bench.toml").to_dict()
        assert json.loads(json.dumps(d))["workload"]["rate"] == {"shape": "constant", "eps": 3000}


class TestQuick:
    def test_overrides_apply_only_with_quick(self, tmp_path):
        """[quick] is validated always but replaces workload values only when asked."""
        path = _write(tmp_path, GOOD)
        assert load(path).workload.rate.eps == 10
        assert load(path, quick=True).workload.rate.eps == 5

    def test_an_unknown_quick_key_is_an_error_without_quick(self, tmp_path):
        """A typo in [quick] is caught even on a normal run."""
        err = _error(_edited(tmp_path, "eps = 5", "epz = 5"))
        assert "workload.rate.epz" in err.problem and "[quick]" in err.problem and "`eps`" in err.fix

    def test_quick_pipeline_keys_replace_the_pipeline_s_only_with_quick(self, tmp_path):
        """[quick.pipeline] shortens the windows of a --quick run; a bad value in it is refused
        on every run, named with [quick.pipeline]."""
        path = _write(tmp_path, GOOD + '\n[quick.pipeline]\nwindow = "2s"\nwatermark = "1s"\n')
        plain, quick = load(path).pipeline, load(path, quick=True).pipeline
        assert (quick.window_ms, quick.watermark_ms) == (2000, 1000)
        assert (plain.window_ms, plain.watermark_ms) != (2000, 1000)
        err = _error(_write(tmp_path, GOOD + '\n[quick.pipeline]\nwindow = "-2s"\n'))
        assert "window" in err.problem and "[quick.pipeline]" in err.problem

    def test_a_quick_value_is_validated_like_the_workload(self, tmp_path):
        """A negative quick rate fails with the quick field named."""
        err = _error(_edited(tmp_path, "eps = 5", "eps = -5"))
        assert "workload.rate.eps = -5" in err.problem and "[quick]" in err.problem


class TestDurations:
    @pytest.mark.parametrize("text, ms", [
        ("5s", 5000), ("500ms", 500), ("2m", 120_000), ("1h", 3_600_000), ("1.5s", 1500), ("0s", 0),
    ])
    def test_a_duration_with_a_unit_parses(self, text, ms):
        """Every supported unit converts to whole milliseconds."""
        assert parse_duration_ms(text, "f") == ms

    @pytest.mark.parametrize("value", ["5x", "5 sec", "-5s", "s", "", "5", True, [5]])
    def test_a_bad_duration_fails_naming_the_field(self, value):
        """Unknown units, negatives, missing numbers and wrong types are refused."""
        with pytest.raises(ScenarioError, match="pipeline.window"):
            parse_duration_ms(value, "pipeline.window")

    @pytest.mark.parametrize("value", [5, 2.5])
    def test_a_bare_number_needs_a_unit(self, value):
        """A number could be seconds or milliseconds, so the unit is required."""
        with pytest.raises(ScenarioError) as info:
            parse_duration_ms(value, "f")
        assert info.value.fix == 'write it with a unit, e.g. "5s"'


class TestUnknownKeys:
    def test_an_unknown_top_level_key_is_named(self, tmp_path):
        """A stray top-level key names itself and lists the known ones."""
        err = _error(_edited(tmp_path, 'name = "t"', 'name = "t"\nnmae = "u"'))
        assert "unknown key nmae" in err.problem and "drain_timeout" in err.problem

    def test_an_unknown_nested_key_names_the_dotted_path(self, tmp_path):
        """A misspelt workload key names workload.<key> and suggests the close one."""
        err = _error(_edited(tmp_path, 'duration = "1s"', 'duration = "1s"\nduraton = "2s"'))
        assert "workload.duraton" in err.problem and "did you mean `duration`" in err.fix

    def test_an_unknown_service_key_names_the_full_path(self, tmp_path):
        """Sub-tables of [services] are checked too."""
        path = _write(tmp_path, GOOD + '\n[services.kafka]\nbootstrap = "x:9092"\n')
        assert "services.kafka.bootstrap" in _error(path).problem


class TestValues:
    def test_a_negative_rate_names_field_value_and_file(self, tmp_path):
        """The message carries the file, the dotted field and the bad value."""
        path = _edited(tmp_path, "eps = 10", "eps = -5")
        err = _error(path)
        assert str(path) in err.problem and "workload.rate.eps = -5" in err.problem

    def test_an_impossible_rate_gives_the_limit(self, tmp_path):
        """Rates beyond what the generator can offer fail with the limit in the message."""
        err = _error(_edited(tmp_path, "eps = 10", "eps = 5_000_000"))
        assert "1,000,000" in err.problem

    def test_a_window_shorter_than_the_slide_fails(self, tmp_path):
        """Both durations are quoted as written."""
        err = _error(_edited(tmp_path, 'window = "5s"', 'window = "2s"\nslide = "5s"'))
        assert "pipeline.window (2s) is shorter than pipeline.slide (5s)" in err.problem

    def test_a_slide_that_does_not_divide_the_window_fails(self, tmp_path):
        """Sliding windows need window % slide == 0."""
        err = _error(_edited(tmp_path, 'window = "5s"', 'window = "5s"\nslide = "2s"'))
        assert "not a multiple" in err.problem

    def test_a_bool_is_not_an_int(self, tmp_path):
        """TOML true is refused where an integer is expected, although Python calls it one."""
        err = _error(_edited(tmp_path, 'duration = "1s"', 'duration = "1s"\npartitions = true'))
        assert "workload.partitions = true" in err.problem and "boolean" in err.problem

    def test_a_string_is_not_a_number(self, tmp_path):
        """A quoted number names the expected type."""
        err = _error(_edited(tmp_path, "eps = 10", 'eps = "10"'))
        assert "expected a number, got a string" in err.problem

    def test_a_bad_topic_name_fails(self, tmp_path):
        """Topics must use Kafka's legal characters."""
        err = _error(_edited(tmp_path, 'duration = "1s"', 'duration = "1s"\ntopic = "my topic"'))
        assert "workload.topic" in err.problem


class TestWorkloadTables:
    """The nested [workload.*] tables, read by the same validator as the generator's options."""

    def test_every_knob_reaches_the_spec(self, tmp_path):
        """A sine rate, hot keys, pareto delays, skew, an idle partition and a payload all load."""
        extra = """
[workload.keys]
count = 20
hot_share = 0.3
hot_keys = 2
[workload.delay]
distribution = "pareto"
scale = "50ms"
alpha = 2.5
late_share = 0.01
late_by = "30s"
[workload.time]
dilation = 60
clock_skew = ["0s", "-1s"]
idle = [{ partition = 1, from = "200ms", for = "300ms" }]
[workload.payload]
fields = ["user", "amount"]
size = 128
"""
        text = GOOD.replace("[quick.rate]\neps = 5", "[quick]\nduration = \"2s\"").replace(
            "eps = 10", 'shape = "sine"\nmean_eps = 10\namplitude_eps = 5\nperiod = "1s"\n' + extra)
        w = load(_write(tmp_path, text)).workload
        assert (w.rate.mean_eps, w.keys.hot_share, w.delay.alpha) == (10, 0.3, 2.5)
        assert w.time.clock_skew_ms == (0, -1000)
        assert w.time.idle[0].from_s == 0.2 and w.payload.size_bytes == 128 and w.time.dilation == 60

    def test_a_key_the_shape_does_not_use_is_refused(self, tmp_path):
        """period with a constant rate would be silently ignored, so it is an error."""
        err = _error(_edited(tmp_path, "eps = 10", 'eps = 10\nperiod = "5s"'))
        assert "workload.rate.period is not used by rate shape 'constant'" in err.problem

    def test_skew_needs_one_entry_per_partition(self, tmp_path):
        """Three skews for two partitions is a mistake, not a guess."""
        err = _error(_write(tmp_path, GOOD + '\n[workload.time]\nclock_skew = ["0s", "1s", "2s"]\n'))
        assert "3 entries for 2 partitions" in err.problem

    def test_an_idle_partition_must_exist(self, tmp_path):
        """Partition 5 of a 2-partition topic is named with its path."""
        idle = '\n[[workload.time.idle]]\npartition = 5\nfrom = "0s"\nfor = "1s"\n'
        err = _error(_write(tmp_path, GOOD + idle))
        assert "workload.time.idle[0].partition = 5" in err.problem

    def test_steps_must_start_at_zero_and_increase(self, tmp_path):
        """Out-of-order steps would make a shape that jumps back in time."""
        steps = 'shape = "steps"\nsteps = [["0s", 5], ["2s", 9], ["1s", 3]]'
        err = _error(_edited(tmp_path, "eps = 10", steps))
        assert "increasing order" in err.problem


class TestCases:
    def test_an_unknown_guarantee_lists_the_three(self, tmp_path):
        """The message gives every known guarantee so the fix is obvious."""
        err = _error(_edited(tmp_path, '"exactly-once"', '"exactly-twice"'))
        assert "cases[0].guarantee" in err.problem and all(g in str(err) for g in GUARANTEES)

    def test_every_guarantee_runs_into_postgres(self, tmp_path):
        """at-most-once comes from the restart (a fresh checkpoint), over a plain append."""
        scenario = load(_edited(tmp_path, '"exactly-once"', '"at-most-once"'))
        assert scenario.cases[0].guarantee == "at-most-once"

    def test_duplicate_case_names_fail(self, tmp_path):
        """Case names become directories, so two cases cannot share one."""
        path = _write(tmp_path, GOOD + '\n[[cases]]\nname = "c"\nguarantee = "at-least-once"\n')
        assert 'cases[1].name = "c"' in _error(path).problem

    def test_no_cases_fails(self, tmp_path):
        """A scenario without a case would run nothing."""
        text = GOOD.replace('[[cases]]\nname = "c"\nguarantee = "exactly-once"\n', "")
        assert "cases" in _error(_write(tmp_path, text)).problem

    def test_an_empty_cases_array_fails(self, tmp_path):
        """cases = [] is as empty as no cases at all."""
        text = GOOD.replace('[[cases]]\nname = "c"\nguarantee = "exactly-once"\n', "")
        path = _write(tmp_path, text.replace('name = "t"', 'name = "t"\ncases = []'))
        assert "at least one case" in _error(path).problem

    def test_faults_in_a_case_point_to_the_top_level(self, tmp_path):
        """Faults apply to every case: a case's own `faults` key says where they go."""
        err = _error(_edited(tmp_path, 'guarantee = "exactly-once"',
                             'guarantee = "exactly-once"\nfaults = ["kill"]'))
        assert "cases[0].faults" in err.problem and "[[faults]]" in err.fix


class TestMatrix:
    def test_the_matrix_expands_into_one_case_per_combination(self, tmp_path):
        """[matrix] guarantee x sink: named cases, the same workload and faults under each."""
        text = GOOD.replace('[[cases]]\nname = "c"\nguarantee = "exactly-once"\n',
                            '[matrix]\nguarantee = ["at-most-once", "exactly-once"]\n')
        names = [c.name for c in load(_write(tmp_path, text)).cases]
        assert names == ["at-most-once-postgres", "exactly-once-postgres"]

    def test_a_bad_guarantee_in_the_matrix_is_named(self, tmp_path):
        text = GOOD + '\n[matrix]\nguarantee = ["exactly-twice"]\n'
        assert "matrix[exactly-twice, postgres].guarantee" in _error(_write(tmp_path, text)).problem


def _with_fault(tmp_path, body: str):
    return _write(tmp_path, GOOD + "\n[[faults]]\n" + body + "\n")


class TestFaults:
    def test_a_fault_is_read_with_its_defaults(self, tmp_path):
        """kill-driver at 0.5s: target driver, downtime 3s by default."""
        path = _with_fault(tmp_path, 'kind = "kill-driver"\nat = "500ms"')
        path.write_text(path.read_text().replace('duration = "1s"', 'duration = "30s"'))
        (fault,) = load(path).faults
        assert (fault.kind, fault.at_s, fault.target, fault.downtime_s) == ("kill-driver", 0.5, "driver", 3.0)

    @pytest.mark.parametrize("body, path, words", [
        ('kind = "kill-executr"\nat = "0s"', "faults[0].kind", "did you mean 'kill-executor'"),
        ('kind = "kill-driver"\nat = "5s"', "faults[0].at", "not before the workload ends"),
        ('kind = "kill-driver"\nat = "0s"', "faults[0].at", "no `at` fits a 1s workload"),
        ('kind = "kill-executor"\nat = "0s"\ntarget = "executor:5"', "faults[0].target", "no executor 5"),
        ('kind = "pause"\nat = "0s"\nduration = "-1s"', "faults[0].duration", "negative"),
        ('kind = "pause"\nat = "0s"', "faults[0].duration", "missing"),
        ('kind = "pause"\nat = "0s"\nduration = "1s"\ntarget = "kafka"', "faults[0].target", "not a target"),
        ('kind = "delay-commit"\nat = "0s"\nduration = "1s"\ndowntime = "1s"', "faults[0].downtime",
         "unknown key"),
    ], ids=["unknown kind", "after the end", "no time to restart", "executor 5 of 2", "negative",
            "no duration", "bad target", "key of another kind"])
    def test_bad_faults_name_the_dotted_path(self, tmp_path, body, path, words):
        """Each mistake is refused before anything starts, with the field's dotted path."""
        err = _error(_with_fault(tmp_path, body))
        assert path in str(err) and words in str(err), str(err)


class TestFiles:
    def test_a_missing_file_names_the_path(self, tmp_path):
        """A typo in the path is reported with the path."""
        with pytest.raises(ScenarioError, match="nope.toml"):
            load(tmp_path / "nope.toml")

    def test_a_syntax_error_carries_tomllib_message(self, tmp_path):
        """The TOML parser's line and column reach the user."""
        err = _error(_write(tmp_path, 'name = "t\n'))
        assert "not valid TOML" in err.problem and "line 1" in err.problem


class TestNemesis:
    NEMESIS = '\n[nemesis]\nkinds = ["kill-executor", "pause", "stall-sink"]\ninterval = "10s"\nseed = 5\n'

    def _long(self, tmp_path, extra):
        return _write(tmp_path, GOOD.replace('duration = "1s"', 'duration = "60s"') + extra)

    def test_the_same_seed_gives_the_same_plan(self, tmp_path):
        """Seeded: two loads of one file plan the same faults at the same times."""
        a = load(self._long(tmp_path, self.NEMESIS)).faults
        assert a == load(self._long(tmp_path, self.NEMESIS)).faults and len(a) == 6

    def test_faults_alternate_with_heals_and_end_before_the_workload(self, tmp_path):
        """One fault per 10 s interval, each over within 5 s, the last before 60 s."""
        faults = load(self._long(tmp_path, self.NEMESIS)).faults
        for earlier, later in zip(faults, faults[1:], strict=False):
            assert earlier.at_s + earlier.lasts_s <= later.at_s
        assert faults[-1].at_s + faults[-1].lasts_s <= 60

    def test_another_seed_gives_another_plan(self, tmp_path):
        other = self.NEMESIS.replace("seed = 5", "seed = 6")
        assert load(self._long(tmp_path, self.NEMESIS)).faults != load(self._long(tmp_path, other)).faults

    def test_span_bounds_how_long_a_drawn_fault_lasts(self, tmp_path):
        """span = "1s": every pause and stall lasts 1 s, not half the interval; a span longer
        than half the interval is refused, naming the limit."""
        spanned = self.NEMESIS.replace('interval = "10s"', 'interval = "10s"\nspan = "1s"')
        lasting = [f.lasts_s for f in load(self._long(tmp_path, spanned)).faults if f.kind != "kill-executor"]
        assert lasting and all(s == 1 for s in lasting), lasting
        err = _error(self._long(tmp_path, spanned.replace('span = "1s"', 'span = "6s"')))
        assert "nemesis.span" in err.problem and "half the interval" in err.problem

    def test_an_unknown_kind_is_named(self, tmp_path):
        bad_kind = self.NEMESIS.replace('"pause"', '"paus"')
        err = _error(self._long(tmp_path, bad_kind))
        assert "nemesis.kinds[1]" in err.problem and "did you mean 'pause'" in err.fix


class TestSparkSettings:
    def test_the_defaults_are_the_hdfs_store_and_two_shuffle_partitions(self, tmp_path):
        spark = load(_write(tmp_path, GOOD)).pipeline.spark
        assert spark.conf() == {"spark.sql.shuffle.partitions": "2"} and spark.source_options() == {}

    def test_rocksdb_with_changelog_and_a_cap_per_trigger(self, tmp_path):
        text = GOOD.replace("[pipeline]\n", '[pipeline]\nstate_store = "rocksdb-changelog"\n'
                            "shuffle_partitions = 4\nmax_offsets_per_trigger = 5000\n", 1)
        spark = load(_write(tmp_path, text)).pipeline.spark
        assert spark.conf()["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] == "true"
        assert spark.conf()["spark.sql.shuffle.partitions"] == "4"
        assert spark.source_options() == {"maxOffsetsPerTrigger": "5000"}

    def test_an_unknown_state_store_is_named(self, tmp_path):
        text = GOOD.replace("[pipeline]\n", '[pipeline]\nstate_store = "leveldb"\n', 1)
        assert "pipeline.state_store" in _error(_write(tmp_path, text)).problem

    NEXMARK = ('name = "t"\n[[cases]]\nname = "c"\nguarantee = "exactly-once"\n'
               '[workload]\nkind = "nexmark"\nduration = "10s"\n[workload.rate]\neps = 100\n'
               '[pipeline]\nkind = "nexmark"\nquery = "q9"\n')

    def test_a_nexmark_query_on_transform_with_state_runs_on_rocksdb(self, tmp_path):
        """q9 keeps its state in transformWithState, which runs on RocksDB only: its default
        store is RocksDB, and hdfs is refused naming the query; q5 keeps Spark's default."""
        assert load(_write(tmp_path, self.NEXMARK)).pipeline.spark.state_store == "rocksdb"
        err = _error(_write(tmp_path, self.NEXMARK + 'state_store = "hdfs"\n'))
        assert "nexmark q9 runs only on rocksdb" in err.problem, err.problem
        q5 = self.NEXMARK.replace('"q9"', '"q5"')
        assert load(_write(tmp_path, q5)).pipeline.spark.state_store == "hdfs"


class TestTrigger:
    def test_a_duration_is_a_processing_time_trigger(self, tmp_path):
        p = load(_edited(tmp_path, 'watermark = "1s"', 'watermark = "1s"\ntrigger = "500ms"')).pipeline
        assert (p.trigger, p.trigger_ms) == ("processing-time", 500)

    def test_available_now_reruns_after_its_interval(self, tmp_path):
        p = load(_edited(tmp_path, 'watermark = "1s"', 'watermark = "1s"\ntrigger = "available-now"\n'
                                                       'trigger_interval = "3s"')).pipeline
        assert (p.trigger, p.trigger_ms) == ("available-now", 3000)

    def test_real_time_defaults_to_spark_s_minimum_batch(self, tmp_path):
        path = _write(tmp_path, GOOD.replace('window = "5s"\nwatermark = "1s"',
                                             'kind = "passthrough"\ntrigger = "real-time"')
                      .replace('guarantee = "exactly-once"', 'guarantee = "at-least-once"\nsink = "kafka"'))
        p = load(path).pipeline
        assert (p.trigger, p.trigger_ms) == ("real-time", 5000)

    @pytest.mark.parametrize("edit, field, words", [
        ('trigger = "soon"', "pipeline.trigger", "available-now"),
        ('trigger_interval = "2s"', "pipeline.trigger_interval", "processing-time trigger"),
        ('trigger = "real-time"', "pipeline.trigger", "stateless"),
    ])
    def test_bad_triggers_name_the_key_and_the_fix(self, tmp_path, edit, field, words):
        err = _error(_edited(tmp_path, 'watermark = "1s"', f'watermark = "1s"\n{edit}'))
        assert field in err.problem and words in err.problem + err.fix

    def test_available_now_is_refused_where_spark_never_stops_it(self, tmp_path):
        """streak_count's processing-time transformWithState asks for a batch after each one:
        an available-now query of it never ends, so the scenario is refused before anything starts."""
        err = _error(_edited(tmp_path, 'window = "5s"\nwatermark = "1s"',
                             'kind = "streak_count"\nttl = "5s"\ntrigger = "available-now"'))
        assert "pipeline.trigger" in err.problem and "never stops" in err.problem, err.problem
        assert 'trigger = "1s"' in err.fix
        ok = load(_edited(tmp_path, 'window = "5s"\nwatermark = "1s"', 'kind = "streak_count"\nttl = "5s"'))
        assert ok.pipeline.kind == "streak_count" and ok.pipeline.values["ttl_ms"] == 5000

    def test_real_time_needs_a_sink_in_its_tasks_and_a_core_per_partition(self, tmp_path):
        text = GOOD.replace('window = "5s"\nwatermark = "1s"', 'kind = "passthrough"\ntrigger = "real-time"')
        err = _error(_write(tmp_path, text))
        assert "cases[0].sink" in err.problem and "foreachBatch" in err.problem
        text = text.replace('guarantee = "exactly-once"', 'guarantee = "at-least-once"\nsink = "kafka"')
        err = _error(_write(tmp_path, text.replace('duration = "1s"', 'duration = "1s"\npartitions = 3')))
        assert "workload.partitions" in err.problem and "2 cores" in err.problem
        err = _error(_write(tmp_path, text.replace('trigger = "real-time"',
                                                   'trigger = "real-time"\ntrigger_interval = "1s"')))
        assert "pipeline.trigger_interval" in err.problem and "5s" in err.fix


class TestMeasure:
    def test_warmup_is_seconds_left_out_of_the_measurement(self, tmp_path):
        text = GOOD.replace('duration = "1s"', 'duration = "30s"') + '[measure]\nwarmup = "5s"\n'
        path = _write(tmp_path, text)
        assert load(path).measure.warmup_s == 5.0 and load(path).measure.lag_trend_max == 0.02

    def test_a_warmup_as_long_as_the_workload_is_refused(self, tmp_path):
        err = _error(_write(tmp_path, GOOD + '[measure]\nwarmup = "1s"\n'))
        assert "measure.warmup" in err.problem and "shorter than workload.duration" in err.fix

    def test_a_warmup_rate_makes_warmup_a_phase_of_the_workload(self, tmp_path):
        """warmup_eps: the generator sends at that rate for the warm-up, then the workload's
        own shape; without it the workload is sent as written."""
        text = GOOD.replace('duration = "1s"', 'duration = "30s"')
        scenario = load(_write(tmp_path, text + '[measure]\nwarmup = "5s"\nwarmup_eps = 50\n'))
        offered = scenario.measure.offered(scenario.workload)
        assert offered.rate.tick(4.9) == 50 and offered.rate.tick(5.0) == scenario.workload.rate.tick(5.0)
        assert offered.duration_s == scenario.workload.duration_s
        plain = load(_write(tmp_path, text + '[measure]\nwarmup = "5s"\n'))
        assert plain.measure.offered(plain.workload) is plain.workload

    def test_measurement_can_be_switched_off_with_a_boolean(self, tmp_path):
        """enabled = false: the run without live measurement (what measuring costs); any
        other value than true or false is refused, naming the key."""
        assert load(_write(tmp_path, GOOD)).measure.enabled is True
        assert load(_write(tmp_path, GOOD + '[measure]\nenabled = false\n')).measure.enabled is False
        err = _error(_write(tmp_path, GOOD + '[measure]\nenabled = "no"\n'))
        assert "measure.enabled" in err.problem and "true or false" in err.problem

    def test_a_warmup_rate_without_a_warmup_duration_is_refused(self, tmp_path):
        err = _error(_write(tmp_path, GOOD + '[measure]\nwarmup_eps = 50\n'))
        assert "measure.warmup_eps" in err.problem and "warmup a duration" in err.fix


ONE_CASE = '[[cases]]\nname = "c"\nguarantee = "exactly-once"\n'
SWEEP = '[matrix]\nguarantee = ["exactly-once"]\nwatermark = ["1s", "3s"]\n'


class TestWatermarkSweep:
    def test_a_matrix_watermark_axis_gives_one_case_per_delay(self, tmp_path):
        path = _write(tmp_path, GOOD.replace(ONE_CASE, SWEEP))
        cases = load(path).cases
        assert [c.name for c in cases] == ["exactly-once-postgres-wm1s", "exactly-once-postgres-wm3s"]
        assert [c.pipeline.watermark_ms for c in cases] == [1000, 3000]
        assert all(c.pipeline.window_ms == 5000 for c in cases)

    def test_a_pipeline_without_a_watermark_cannot_sweep_one(self, tmp_path):
        text = GOOD.replace('window = "5s"\nwatermark = "1s"', 'kind = "passthrough"').replace(
            '[[cases]]\nname = "c"\nguarantee = "exactly-once"\n',
            '[matrix]\nguarantee = ["exactly-once"]\nwatermark = ["1s"]\n')
        err = _error(_write(tmp_path, text))
        assert "matrix.watermark" in err.problem and "no watermark" in err.problem

    def test_the_sweep_reports_p99_and_late_share_per_delay(self, tmp_path):
        from harness.results.model import CaseResult, Verdict
        from harness.run.runner import watermark_sweep

        path = _write(tmp_path, GOOD.replace(ONE_CASE, SWEEP))
        scenario = load(path)

        def case(name, p99, late):
            return CaseResult(name=name, guarantee="exactly-once", pipeline="tumbling_count", sink="postgres",
                              events={"produced": 1000, "dropped_late": late},
                              verdict=Verdict("exactly-once", "exactly-once", True, ""), throughput_eps={},
                              latency_ms={"event_time": {"p99": p99}}, backpressure={})

        rows = watermark_sweep(scenario, [case("exactly-once-postgres-wm3s", 9000.0, 2),
                                          case("exactly-once-postgres-wm1s", 6000.0, 40)])
        assert [(r["watermark_ms"], r["event_time_p99_ms"], r["late_share"]) for r in rows] == [
            (1000, 6000.0, 0.04), (3000, 9000.0, 0.002)]


@pytest.mark.unit
class TestQuickMeasure:
    def test_quick_measure_replaces_measure_keys_only_with_quick(self, tmp_path):
        """[quick.measure] warmup_eps is a quick run's warm-up rate; the full run keeps its own,
        and a bad [quick.measure] key is refused with or without --quick."""
        path = tmp_path / "s.toml"
        text = GOOD.replace('duration = "1s"', 'duration = "60s"').replace("[quick.rate]", "[quick]\n")
        text = text.replace("eps = 5", 'duration = "30s"\nrate = { eps = 5 }')
        path.write_text(text + '\n[measure]\nwarmup = "5s"\nwarmup_eps = 1000\n\n'
                        '[quick.measure]\nwarmup_eps = 400\n')
        assert load(path).measure.warmup_eps == 1000
        assert load(path, quick=True).measure.warmup_eps == 400
        assert load(path, quick=True).measure.warmup_s == 5
        path.write_text(path.read_text().replace("warmup_eps = 400", "warmup_ep = 400"))
        with pytest.raises(ScenarioError, match="quick.measure.warmup_ep"):
            load(path)


class TestStorageFaultsWithoutFuse:
    def test_the_loader_refuses_them_with_the_reason_before_anything_starts(self, tmp_path,
                                                                             monkeypatch):
        """Where FUSE cannot mount, a disk-full is refused naming why, and so is a case that asks
        for the FUSE layer without a fault."""
        from harness.services import fuse_mount

        monkeypatch.setattr(fuse_mount, "fuse_problem", lambda: "/dev/fuse does not exist")
        text = GOOD.replace('duration = "1s"', 'duration = "60s"', 1) + (
            '\n[[faults]]\nkind = "disk-full"\nat = "1s"\nduration = "1s"\n')
        err = _error(_write(tmp_path, text))
        assert "disk-full needs fuse" in err.problem, err.problem
        assert "/dev/fuse does not exist" in err.problem, err.problem
        fuse_case = GOOD.replace('guarantee = "exactly-once"',
                                 'guarantee = "exactly-once"\ncheckpoint_fs = "fuse"')
        err = _error(_write(tmp_path, fuse_case))
        assert "checkpoint_fs" in err.problem and "/dev/fuse does not exist" in err.problem, err.problem
        err = _error(_write(tmp_path, fuse_case.replace('checkpoint_fs = "fuse"', 'checkpoint_fs = "sync"')))
        assert "checkpoint_fs" in err.problem and "sync" in err.problem, err.problem


class TestStateStoreAndUnsyncedFaults:
    """Issue 30's public names: fail-task after = "state-commit", kill-executor phase, and
    lose-unsynced, validated before anything starts (FUSE taken as available)."""

    @pytest.fixture(autouse=True)
    def _fuse(self, monkeypatch):
        from harness.services import fuse_mount

        monkeypatch.setattr(fuse_mount, "fuse_problem", lambda: None)

    def _with(self, tmp_path, fault: str, pipeline: str = "") -> Path:
        text = GOOD.replace('duration = "1s"', 'duration = "90s"', 1)
        if pipeline:
            text = text.replace('[pipeline]\nwindow = "5s"\nwatermark = "1s"\n', "[pipeline]\n" + pipeline, 1)
        return _write(tmp_path, text + "\n[[faults]]\n" + fault)

    def test_state_commit_and_phases_parse_and_prepare_the_mount(self, tmp_path):
        from harness.scenario.fault_specs import fault_conf, storage_fs, writeback_s

        sc = load(self._with(tmp_path, 'kind = "fail-task"\nat = "1s"\nafter = "state-commit"\n'))
        assert sc.faults[0].get("after") == "state-commit" and not storage_fs(sc.faults)
        sc = load(self._with(tmp_path, 'kind = "kill-executor"\nat = "1s"\nphase = "maintenance"\n'))
        assert storage_fs(sc.faults) and writeback_s(sc.faults) is None
        assert fault_conf(sc.faults) == {"spark.sql.streaming.stateStore.maintenanceInterval": "2s"}
        sc = load(self._with(tmp_path, 'kind = "lose-unsynced"\nat = "1s"\ntarget = "executor:1"\n'))
        (f,) = sc.faults
        assert (f.target, f.mode, f.get("writeback")) == ("executor:1", "drop", 30_000)
        assert storage_fs(sc.faults) and writeback_s(sc.faults) == 30.0

    def test_a_stateless_pipeline_is_refused_naming_the_precondition(self, tmp_path):
        for fault in ('kind = "fail-task"\nat = "1s"\nafter = "state-commit"\n',
                      'kind = "kill-executor"\nat = "1s"\nphase = "state-commit"\n'):
            err = _error(self._with(tmp_path, fault, 'kind = "passthrough"\n'))
            assert "needs state-store" in err.problem and "keeps no state" in err.problem, err.problem

    def test_a_phase_through_spark_s_api_and_an_unknown_mode_are_refused(self, tmp_path):
        err = _error(self._with(tmp_path, 'kind = "kill-executor"\nat = "1s"\nphase = "state-commit"\n'
                                          'via = "spark-api"\n'))
        assert "phase" in err.problem and 'via = "signal"' in err.fix, (err.problem, err.fix)
        err = _error(self._with(tmp_path, 'kind = "lose-unsynced"\nat = "1s"\nmode = "shred"\n'))
        assert "faults[0].mode" in err.problem, err.problem
        err = _error(self._with(tmp_path, 'kind = "lose-unsynced"\nat = "1s"\ntarget = "broker"\n'))
        assert "faults[0].target" in err.problem, err.problem


class TestSource:
    """[source]: kind = "kafka" (the default) or "delta", and the faults that need one."""

    def _with(self, tmp_path, source: str = "", fault: str = "") -> Path:
        text = GOOD.replace('duration = "1s"', 'duration = "90s"', 1) + source
        return _write(tmp_path, text + (("\n[[faults]]\n" + fault) if fault else ""))

    def test_the_default_reads_kafka_and_keeps_the_fingerprint(self, tmp_path):
        plain = load(self._with(tmp_path))
        assert plain.source.kind == "kafka"
        said = load(self._with(tmp_path, '\n[source]\nkind = "kafka"\n'))
        assert said.fingerprint() == plain.fingerprint()
        delta = load(self._with(tmp_path, '\n[source]\nkind = "delta"\ncommit_interval = "500ms"\n'))
        assert (delta.source.kind, delta.source.commit_interval_s) == ("delta", 0.5)
        assert delta.fingerprint() != plain.fingerprint()

    def test_mistakes_are_named(self, tmp_path):
        assert "source.kind" in _error(self._with(tmp_path, '\n[source]\nkind = "kinesis"\n')).problem
        err = _error(self._with(tmp_path, '\n[source]\ncommit_interval = "1s"\n'))
        assert "source.commit_interval" in err.problem and 'kind = "delta"' in err.fix, err
        assert "source.colour" in _error(self._with(tmp_path, '\n[source]\ncolour = "red"\n')).problem
        amo = self._with(tmp_path, '\n[source]\nkind = "delta"\n').read_text().replace(
            'guarantee = "exactly-once"', 'guarantee = "at-most-once"')
        assert "cases[0].guarantee" in _error(_write(tmp_path, amo)).problem

    def test_a_source_fault_needs_its_source(self, tmp_path, monkeypatch):
        from harness.services import fuse_mount

        monkeypatch.setattr(fuse_mount, "fuse_problem", lambda: None)
        err = _error(self._with(tmp_path, fault='kind = "hide-commit"\nat = "1s"\nduration = "2s"\n'))
        assert "faults[0].kind" in err.problem and "delta" in err.problem, err.problem
        err = _error(self._with(tmp_path, '\n[source]\nkind = "delta"\n',
                                'kind = "kafka-retention"\nat = "1s"\n'))
        assert "faults[0].kind" in err.problem and "kafka" in err.problem, err.problem
        ok = load(self._with(tmp_path, '\n[source]\nkind = "delta"\n',
                             'kind = "delete-source-files"\nat = "1s"\nrecords = 50\n'))
        assert ok.faults[0].get("records") == 50

    def test_restart_with_takes_a_trigger(self, tmp_path):
        sc = load(self._with(tmp_path, fault='kind = "restart-with"\nat = "1s"\ntrigger = "available-now"\n'))
        assert sc.faults[0].get("trigger") == "available-now"
        load(self._with(tmp_path, fault='kind = "restart-with"\nat = "1s"\ntrigger = "2s"\n'))
        err = _error(self._with(tmp_path, fault='kind = "restart-with"\nat = "1s"\ntrigger = "soon"\n'))
        assert "faults[0].trigger" in err.problem, err.problem


class TestStorageUnderState:
    @pytest.fixture(autouse=True)
    def _fuse(self, monkeypatch):
        from harness.services import fuse_mount

        monkeypatch.setattr(fuse_mount, "fuse_problem", lambda: None)

    def test_a_storage_fault_under_the_state_of_a_stateless_query_is_refused(self, tmp_path):
        """passthrough writes no state: io-error under state could only miss; a durable case
        (checkpoint_fs = "sync") loads."""
        text = GOOD.replace('duration = "1s"', 'duration = "60s"', 1).replace(
            'guarantee = "exactly-once"', 'guarantee = "exactly-once"\ncheckpoint_fs = "sync"') + (
            '\n[[faults]]\nkind = "io-error"\nat = "1s"\ntarget = "state"\nduration = "1s"\n')
        text = text.replace('[pipeline]\nwindow = "5s"\nwatermark = "1s"', '[pipeline]\nkind = "passthrough"')
        assert 'kind = "passthrough"' in text
        err = _error(_write(tmp_path, text))
        assert "keeps no state" in err.problem, err.problem
        ok = load(_write(tmp_path, text.replace('target = "state"', 'target = "checkpoint"')))
        assert ok.cases[0].checkpoint_fs == "sync"


class TestReplayFingerprint:
    @pytest.fixture(autouse=True)
    def _forget_the_job_module(self):
        """The copies' job.py is imported as `job`: a later test's own job.py must not find it."""
        import sys

        yield
        sys.modules.pop("job", None)

    @staticmethod
    def _copy(where: Path, payments: int = 50) -> Path:
        """examples/dedup's scenario and job, with `payments` records of its own, at `where`."""
        import json as _json
        import shutil

        where.mkdir(parents=True)
        shutil.copy(REPO / "examples" / "dedup" / "job.py", where / "job.py")
        text = (REPO / "examples" / "dedup" / "scenario.toml").read_text()
        (where / "scenario.toml").write_text(text[:text.index("[[faults]]")])   # no fault: any length
        start = 1_714_564_800_000
        rows = [{"payment_id": f"p{i}", "account": f"a{i % 7}", "amount_cents": i, "ts": start + i}
                for i in range(payments)]
        (where / "payments.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in rows))
        return where / "scenario.toml"

    def test_the_same_scenario_in_two_checkouts_has_one_fingerprint(self, tmp_path):
        """The replayed file is held by its path relative to the scenario, its size and a hash of
        its content: two copies at different depths give one fingerprint (issue 47 measured
        be5249029f9c and 94adf7114357 for examples/dedup in two directories)."""
        one = load(self._copy(tmp_path / "ci" / "workspace" / "a" / "very" / "deep" / "checkout"))
        two = load(self._copy(tmp_path / "b"))
        assert one.fingerprint() == two.fingerprint()

    def test_other_records_make_another_fingerprint(self, tmp_path):
        """A file of other content, of the same name and place, is another workload."""
        one = load(self._copy(tmp_path / "a", payments=50))
        two = load(self._copy(tmp_path / "b", payments=51))
        assert one.fingerprint() != two.fingerprint()
