"""Every registered fault kind, walked: its keys parse, bad values are refused with the dotted
path, a nemesis can draw it, its preconditions are known, and the docs list it."""

from __future__ import annotations

import importlib
import json
import pkgutil
import random

import pytest

import faults
from faults.kinds import FaultKind
from faults.registry import BUILT_IN, KINDS, drawable, table
from faults.spec import FaultSpec
from harness import docs
from harness.errors import ScenarioError
from harness.scenario import load
from harness.scenario.fault_specs import precondition, requirements
from tests.helpers import MINIMAL_SCENARIO, REPO

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def a_machine_with_everything(monkeypatch):
    """These tests are about the registry and the loader, not the machine: FUSE and libfaketime
    count as installed, so that the unit lane passes where they are not (a venv alone on PATH,
    no fusermount3; issue 41). tests/test_scenario.py pins the refusal where FUSE is missing."""
    from harness.services import fuse_mount
    from workloads import clock

    monkeypatch.setattr(fuse_mount, "fuse_problem", lambda: None)
    monkeypatch.setattr(clock, "library", lambda: "/usr/lib/faketime/libfaketimeMT.so.1")

# a minute of workload: room for a restarting kind's margin after its downtime; a Kafka cluster
# and a Spark standalone cluster of the harness's own, where every kind can run
LONG = (MINIMAL_SCENARIO.replace('duration = "1s"', 'duration = "60s"')
        + '\n[services.kafka]\nbrokers = 3\n[services.spark]\nmaster = "standalone"\n')


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return repr(value)


def _scenario(tmp_path, table: dict):
    body = "\n".join(f"{k} = {_toml(v)}" for k, v in table.items())
    path = tmp_path / "s.toml"
    source = KINDS[table["kind"]].source   # a fault on a Delta source needs one
    head = LONG + (f'\n[source]\nkind = "{source}"\n' if source else "")
    path.write_text(head + "\n[[faults]]\n" + body + "\n")
    return path


def _good(kind: FaultKind) -> dict:
    """A table of `kind` at 1 s with every key at a value it accepts."""
    table: dict = {"kind": kind.name, "at": "1s"}
    for key in kind.keys:
        table[key.name] = kind.default_target if key.type == "target" else key.example()
    return table


@pytest.mark.parametrize("name", list(KINDS))
class TestEveryKind:
    def test_every_key_parses(self, name, tmp_path):
        """A [[faults]] table with each key at an accepted value loads into one FaultSpec of the kind."""
        (spec,) = load(_scenario(tmp_path, _good(KINDS[name]))).faults
        assert spec.kind == name and spec.at_s == 1.0

    def test_a_bad_value_is_refused_with_its_dotted_path(self, name, tmp_path):
        """Each key, in turn, given a value it refuses: the error names faults[0].<key>."""
        kind = KINDS[name]
        for key in kind.keys:
            table = {**_good(kind), key.name: "nowhere" if key.type == "target" else key.wrong()}
            with pytest.raises(ScenarioError) as err:
                load(_scenario(tmp_path, table))
            assert f"faults[0].{key.name}" in str(err.value), (key.name, str(err.value))

    def test_an_unknown_key_is_refused(self, name, tmp_path):
        with pytest.raises(ScenarioError, match=r"unknown key faults\[0\]\.colour"):
            load(_scenario(tmp_path, {**_good(KINDS[name]), "colour": "red"}))

    def test_its_preconditions_are_known_to_the_harness(self, name):
        """Whatever the kind requires, for any of its targets, the loader knows how to check."""
        kind = KINDS[name]
        for target in kind.targets:
            spec = FaultSpec(name, 1.0, target if target != "executor" else "executor:0")
            for need in requirements(kind, spec):
                assert precondition(kind, need).name == need

    def test_the_docs_list_it(self, name):
        assert f"| `{name}` |" in docs.block((docs.DOCS / "faults.md").read_text(), "fault-kinds")


@pytest.mark.parametrize("name", drawable())
def test_a_drawn_fault_of_each_drawable_kind_loads(name, tmp_path):
    """What a nemesis (or the hunt) draws is a plain [[faults]] table the loader accepts."""
    table = KINDS[name].draw(random.Random(1), 2.0, 5.0)
    (spec,) = load(_scenario(tmp_path, table)).faults
    assert spec.kind == name and spec.at_s == 2.0 and spec.lasts_s <= 5.0


def test_every_kind_a_fault_module_declares_is_registered():
    """Adding a kind is one module plus one registration: a declared kind left out of the
    registry is caught here."""
    declared = set()
    for info in pkgutil.iter_modules(faults.__path__):
        module = importlib.import_module(f"faults.{info.name}")
        declared |= {v.name for v in vars(module).values() if isinstance(v, FaultKind)}
    assert declared == set(BUILT_IN)


def test_the_docs_table_is_the_registry_s():
    """docs/faults.md's generated table is what `python -m harness.docs` writes from the registry."""
    assert docs.block((docs.DOCS / "faults.md").read_text(), "fault-kinds") == table()


# every_fault.toml's siblings, each with the preconditions its kinds need: 3 brokers and a
# standalone cluster; a stateful query on RocksDB and the FUSE file system; a Delta source
SIBLINGS = ("every_fault.toml", "clusters.toml", "storage_faults.toml", "state_faults.toml", "unsynced.toml",
            "unsynced_executor.toml",
            "delta_faults.toml")


def test_every_kind_has_an_end_to_end_run():
    """tests/scenarios/every_fault.toml (one broker, local-cluster) and its siblings together
    have one fault of each kind, and every key of the state store faults at each value."""
    faults = [f for name in SIBLINGS for f in load(REPO / "tests" / "scenarios" / name).faults]
    assert {f.kind for f in faults} == set(KINDS)
    assert {f.get("phase") for f in faults if f.kind == "kill-executor"} >= {"state-commit", "maintenance"}
    assert any(f.get("after") == "state-commit" for f in faults if f.kind == "fail-task")


def _kind_literals(root) -> list[str]:
    """Every string constant of the code under `root` that is a registered kind's name (a
    docstring's text is prose, not a literal the code compares against)."""
    import ast

    names = set(KINDS)
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    return found


def test_no_kind_is_named_outside_faults():
    """Whatever the harness must know of a kind, the kind declares (kills_driver, prepare,
    details, explain, margin_s): no module outside faults/ compares a kind's name, so a new
    kind, a user's own included, is one module and one registry line."""
    found = [hit for part in ("harness", "workloads") for hit in _kind_literals(REPO / part)]
    assert not found, "a fault kind's name as a literal outside faults/:\n" + "\n".join(found)


def test_a_scenario_registers_a_kind_of_its_own():
    """examples/fault-kinds/: `fault_kinds` names a FaultKind beside the scenario; its faults load
    like a built-in kind's, and the kind says it kills the driver."""
    from faults import registry

    scenario = load(REPO / "examples" / "fault-kinds" / "scenario.toml")
    (spec,) = scenario.faults
    assert spec.kind == "restore-checkpoint" and spec.at == "batch 3" and spec.downtime_s == 1.0
    assert registry.kind("restore-checkpoint").kills_driver


def test_a_kind_of_your_own_may_not_take_a_registered_name(tmp_path):
    (tmp_path / "mine.py").write_text(
        "from dataclasses import replace\nfrom faults.registry import KINDS\n"
        "MINE = replace(KINDS['pause'], about='another pause')\n")
    path = tmp_path / "s.toml"
    path.write_text('fault_kinds = ["mine:MINE"]\n' + LONG)
    with pytest.raises(ScenarioError, match=r"fault_kinds\[0\].*registered already \(a built-in kind\)"):
        load(path)


# the kinds a user cannot run on the default stack (one broker, local-cluster, a Kafka source) with
# only their required keys, and the words of the reason the loader gives before anything starts
REFUSED_AT_DEFAULTS = {
    "restart-with": "changes nothing",
    "network": "does nothing",
    "kill-broker": "needs kafka-cluster",
    "kill-worker": "needs own-standalone",
    "hide-commit": "acts on a delta source",
    "delete-source-files": "acts on a delta source",
}


def test_every_kind_at_its_defaults_runs_on_the_default_stack_or_is_refused_with_its_reason(tmp_path):
    """A nemesis, the hunt and a user writing `kind = "..."` alone get a kind's defaults (issue 41:
    restart-broker's broke the default stack). On the default stack each kind, with only its
    required keys, loads (and tests/test_every_kind_e2e.py runs it, several kinds to a case), or
    is refused at load time, with the reason; FUSE and libfaketime count as installed here (a
    machine without them refuses those kinds, saying so)."""
    from tests import every_kind

    refused = every_kind.refused(tmp_path)
    assert set(refused) == set(REFUSED_AT_DEFAULTS), refused
    for name, words in REFUSED_AT_DEFAULTS.items():
        assert words in refused[name], (name, refused[name])
    runs = [k for k in KINDS if k not in refused]
    paths = every_kind.write(tmp_path, runs)
    planned = [f for path in paths for f in load(path).faults]
    assert sorted(f.kind for f in planned) == sorted(runs)
    assert {f.kind for f in planned if f.kind == "restart-broker" and f.mode == "hard"} == {"restart-broker"}
    for path in paths:   # a kind that ends the query comes last in its case
        kinds = [f.kind for f in load(path).faults]
        assert not set(kinds[:-1]) & set(every_kind.ENDS_THE_QUERY), kinds
    # the kinds off FUSE in two cases of about equal length, for tox -e test's two workers
    cases = every_kind.plan(runs)
    assert list(cases) == ["every-kind", "every-kind-restarts", "every-kind-storage"], list(cases)

    def batches(case):
        return sum(every_kind.AFTER_RESTART if KINDS[t["kind"]].restarts else every_kind.AFTER_PLAIN
                   for t in cases[case])

    assert abs(batches("every-kind") - batches("every-kind-restarts")) <= 2 * every_kind.AFTER_RESTART
