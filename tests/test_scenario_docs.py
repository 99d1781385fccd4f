"""docs/scenario.md against the loader: every key the loader accepts is documented there,
and every documented key is one the loader accepts.

The accepted keys are the loader's own: each table of a valid scenario is given an unknown
key, and the loader's refusal lists the keys it knows for that table."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from faults.kinds import COMMON_KEYS
from harness.errors import ScenarioError
from harness.scenario.load import _scenario
from tests.helpers import MINIMAL_SCENARIO, REPO

pytestmark = pytest.mark.unit

DOC = REPO / "docs" / "scenario.md"
_ROW = re.compile(r"^\| `([a-z_][a-z_.]*)` \|", re.M)
_KNOWN = re.compile(r"known keys of (.+?): (.+?)\)")


def documented() -> dict[str, set[str]]:
    """Table path ("" for the top level) -> the keys docs/scenario.md lists for it."""
    out: dict[str, set[str]] = {}
    for dotted in _ROW.findall(DOC.read_text()):
        table, _, key = dotted.rpartition(".")
        out.setdefault(table, set()).add(key)
    return out


def _base() -> dict:
    return tomllib.loads(MINIMAL_SCENARIO)


def _accepted(edit) -> set[str]:
    """The keys the loader lists when the table `edit(raw)` returns gets an unknown key."""
    raw = _base()
    edit(raw)["zz_not_a_key"] = 1
    with pytest.raises(ScenarioError) as err:
        _scenario(raw, Path("/x/s.toml"), quick=False)
    found = _KNOWN.search(str(err.value))
    assert found, str(err.value)
    return set(found[2].split(", "))


def _setdefault(raw: dict, *path: str) -> dict:
    for key in path:
        raw = raw.setdefault(key, {})
    return raw


# table path in the docs -> where the unknown key goes
PROBES = {
    "": lambda raw: raw,
    "services": lambda raw: _setdefault(raw, "services"),
    "services.kafka": lambda raw: _setdefault(raw, "services", "kafka"),
    "services.spark": lambda raw: _setdefault(raw, "services", "spark"),
    "services.postgres": lambda raw: _setdefault(raw, "services", "postgres"),
    "workload": lambda raw: raw["workload"],
    "workload.rate": lambda raw: raw["workload"]["rate"],
    "workload.keys": lambda raw: _setdefault(raw, "workload", "keys"),
    "workload.delay": lambda raw: _setdefault(raw, "workload", "delay"),
    "workload.time": lambda raw: _setdefault(raw, "workload", "time"),
    "workload.time.idle": lambda raw: _idle(raw),
    "workload.payload": lambda raw: _setdefault(raw, "workload", "payload"),
    "workload.duplicates": lambda raw: _setdefault(raw, "workload", "duplicates"),
    "pipeline": lambda raw: raw["pipeline"],
    "source": lambda raw: _setdefault(raw, "source"),
    "cases": lambda raw: raw["cases"][0],
    "matrix": lambda raw: _setdefault(raw, "matrix"),
    "faults": lambda raw: _fault(raw),
    "nemesis": lambda raw: _setdefault(raw, "nemesis"),
    "measure": lambda raw: _setdefault(raw, "measure"),
}


def _idle(raw: dict) -> dict:
    item = {"partition": 0, "from": "0s", "for": "1s"}
    _setdefault(raw, "workload", "time")["idle"] = [item]
    return item


def _fault(raw: dict) -> dict:
    raw["faults"] = [{"kind": "kill-driver", "at": "0s"}]
    return raw["faults"][0]


@pytest.mark.parametrize("table", list(PROBES), ids=lambda t: t or "top")
def test_the_table_s_keys_are_the_documented_ones(table):
    """The loader's keys for the table equal docs/scenario.md's rows for it (for [[faults]]:
    the keys every kind has; each kind's own are in docs/faults.md, tests/test_fault_registry.py)."""
    accepted = _accepted(PROBES[table])
    if table == "faults":
        accepted &= set(COMMON_KEYS)
    assert documented().get(table, set()) == accepted, table


def test_quick_takes_the_workload_s_keys_and_faults():
    """[quick] documents what it takes: [workload]'s keys, [[quick.faults]], [quick.pipeline] and
    [quick.measure]."""
    assert documented()["quick"] == _accepted(PROBES["workload"]) | {"faults", "pipeline", "measure"}


def test_every_documented_table_is_probed():
    """A table added to the docs without a probe here would go unchecked."""
    assert set(documented()) - {"quick"} == set(PROBES)
