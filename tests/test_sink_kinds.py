"""The built-in sinks' classes are imported by name (issue 48, item 8: no string imports in the
product), and each is the class its `target` names in messages and in the driver's config."""

from __future__ import annotations

import pytest

from workloads.sinks import CUSTOM_SINK, SINKS, sink_class

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", sorted(SINKS))
def test_each_built_in_sink_s_class_is_the_one_its_target_names(name):
    kind = SINKS[name]
    cls = sink_class(name, None)
    assert cls is kind.load()
    assert f"{cls.__module__}:{cls.__qualname__}" == kind.target


def test_a_scenario_s_own_sink_is_loaded_from_its_sink_class():
    from workloads.sinks.noop import NoopSink

    assert sink_class(CUSTOM_SINK, "workloads.sinks.noop:NoopSink") is NoopSink
