"""The plug-in contract's bad input: each mistake exits 2 naming the key and the fix, and
the scenario loader starts nothing (these tests run no service)."""

import textwrap

import pytest

from harness.errors import ScenarioError
from harness.scenario import load

pytestmark = pytest.mark.unit

HEAD = """
name = "plug"
[workload]
duration = "5s"
[workload.rate]
eps = 10
"""

MODULE = '''
def build(events_df, params):
    return events_df

def two_args(a):
    return a

def oracle(truth_df, batches, params):
    return truth_df

class Sink:
    def __init__(self, ctx): self.ctx = ctx
    def setup(self): pass
    def write(self, batch_df, batch_id): pass
    def read(self): pass
    def close(self): pass

class NoRead:
    def __init__(self, ctx): pass
    def setup(self): pass
    def write(self, batch_df, batch_id): pass
    def close(self): pass
'''


def _load(tmp_path, body, module=MODULE, name="plug_mod"):
    (tmp_path / f"{name}.py").write_text(module)
    path = tmp_path / "s.toml"
    path.write_text(HEAD + textwrap.dedent(body))
    return load(path)


CASE = '\n[[cases]]\nname = "c"\nguarantee = "exactly-once"\n'
TUMBLING = '[pipeline]\nkind = "tumbling_count"\nwindow = "5s"\nwatermark = "1s"\n'


def test_a_user_build_beside_the_scenario_is_found(tmp_path):
    s = _load(tmp_path, TUMBLING + 'build = "plug_mod:build"\n' + CASE)
    assert s.pipeline.build == "plug_mod:build" and s.pipeline.kind == "tumbling_count"


def test_two_scenarios_with_a_module_of_one_name_each_get_their_own(tmp_path):
    """A team's pytest suite loads examples/balances and examples/dedup in one process, each
    with its own job.py: the second must get its own module, not the first one's (it was refused:
    "module 'job' (examples/balances/job.py) has no 'transform'"), and the first its own again."""
    first, second = tmp_path / "balances", tmp_path / "dedup"
    for where, fn in ((first, "totals"), (second, "transform")):
        where.mkdir()
        _load(where, TUMBLING + f'build = "job:{fn}"\n' + CASE,
              module=f"def {fn}(events_df, params):\n    return events_df\n", name="job")
    for where, fn in ((first, "totals"), (second, "transform")):   # and back again
        s = _load(where, TUMBLING + f'build = "job:{fn}"\n' + CASE,
                  module=f"def {fn}(events_df, params):\n    return events_df\n", name="job")
        assert s.pipeline.build == f"job:{fn}"


@pytest.mark.parametrize("body, words", [
    ('[pipeline]\nkind = "nope"\n' + CASE, ["pipeline.kind", "nope"]),
    (TUMBLING + 'build = "missing_mod:build"\n' + CASE, ["pipeline.build", "no module named 'missing_mod'"]),
    (TUMBLING + 'build = "plug_mod:nothing"\n' + CASE, ["pipeline.build", "has no 'nothing'"]),
    (TUMBLING + 'build = "plug_mod:two_args"\n' + CASE,
     ["pipeline.build", "cannot be called as two_args(events_df, params)"]),
    (TUMBLING + 'build = "plug_mod"\n' + CASE, ["pipeline.build", 'not of the form "module:name"']),
    (TUMBLING + 'gap = "1s"\n' + CASE, ["pipeline.gap"]),
    ('[pipeline]\nkind = "session_count"\ngap = "1s"\nwatermark = "1s"\nwindow = "5s"\n' + CASE,
     ["pipeline.window"]),
    ('[pipeline]\nkind = "custom"\nbuild = "plug_mod:build"\ncolumns = { key = "STRING" }\n' + CASE,
     ["event_id", "oracle"]),
    ('[pipeline]\nkind = "custom"\nbuild = "plug_mod:build"\noracle = "plug_mod:oracle"\n'
     'columns = { key = "STRING" }\n' + CASE, ["pipeline.key"]),
    ('[pipeline]\nkind = "custom"\nbuild = "plug_mod:build"\ncolumns = { event_id = "UUID" }\n' + CASE,
     ["pipeline.columns.event_id", "STRING, LONG"]),
    (TUMBLING + CASE + 'sink = "nosuch"\n', ["cases[0].sink", "nosuch"]),
    (TUMBLING + CASE + 'sink = "custom"\n', ["cases[0].sink_class"]),
    (TUMBLING + CASE + 'sink = "custom"\nsink_class = "plug_mod:NoRead"\n',
     ["cases[0].sink_class", "has no read"]),
    (TUMBLING + CASE + 'sink = "custom"\nsink_class = "plug_mod:build"\n', ["not a class"]),
    (TUMBLING + CASE + 'sink_class = "plug_mod:Sink"\n', ["cases[0].sink_class", 'sink = "custom"']),
])
def test_bad_plug_in_input_names_the_key_and_the_fix(tmp_path, body, words):
    with pytest.raises(ScenarioError) as err:
        _load(tmp_path, body)
    text = str(err.value)
    assert all(w in text for w in words), text
    assert err.value.fix and err.value.exit_code == 2


def test_a_module_that_fails_to_import_says_so(tmp_path):
    body = TUMBLING + 'build = "broken_mod:build"\n' + CASE
    (tmp_path / "broken_mod.py").write_text("import nonexistent_thing_xyz\n")
    with pytest.raises(ScenarioError, match="importing the module failed: ModuleNotFoundError"):
        _load(tmp_path, body)


def test_a_custom_sink_takes_any_claimed_guarantee(tmp_path):
    s = _load(tmp_path, TUMBLING + CASE + 'sink = "custom"\nsink_class = "plug_mod:Sink"\n')
    assert (s.cases[0].sink, s.cases[0].sink_class) == ("custom", "plug_mod:Sink")


def test_a_case_may_run_its_own_pipeline(tmp_path):
    s = _load(tmp_path, TUMBLING + CASE + '[cases.pipeline]\nkind = "dedup"\nwatermark = "2s"\n')
    assert s.cases[0].pipeline.kind == "dedup" and s.cases[0].pipeline.values["watermark_ms"] == 2000
    assert s.pipeline.kind == "tumbling_count"


def test_a_format_sink_refuses_a_weaker_claim_with_the_reason(tmp_path):
    with pytest.raises(ScenarioError) as err:
        _load(tmp_path, TUMBLING + '\n[[cases]]\nname = "c"\nguarantee = "at-least-once"\nsink = "parquet"\n')
    assert "cases[0].guarantee" in str(err.value) and "_spark_metadata" in str(err.value)


def test_a_commit_window_fault_is_refused_on_a_format_sink(tmp_path):
    body = (TUMBLING + '\n[[cases]]\nname = "c"\nguarantee = "exactly-once"\nsink = "parquet"\n'
            '\n[[faults]]\nkind = "delay-commit"\nat = "1s"\nduration = "1s"\n')
    with pytest.raises(ScenarioError, match="delay-commit needs commit-gate: .*no batch can be held in"):
        _load(tmp_path, body)


def test_exactly_once_into_spark_kafka_sink_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ScenarioError) as err:
        _load(tmp_path, TUMBLING + '\n[[cases]]\nname = "c"\nguarantee = "exactly-once"\nsink = "kafka"\n')
    assert "not transactional" in str(err.value) and "at-least-once" in err.value.fix
