"""The pipeline registry and the sink registry, against the code they name: every pipeline
has its query and its oracle, every query module is registered, every sink can be read back."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import workloads.pipelines
from harness.check.registry import PIPELINES
from workloads.sinks import SINKS

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", list(PIPELINES))
class TestEveryPipeline:
    def test_its_query_declares_params_columns_and_build(self, name):
        """The query module has the names the loader and the driver read."""
        kind = PIPELINES[name]
        assert kind.params is not None and kind.columns, name
        module, _, function = kind.build.partition(":")
        build = getattr(importlib.import_module(module), function)
        inspect.signature(build).bind("events_df", "params")

    def test_it_has_an_oracle(self, name):
        """Its oracle module checks output and says when the output is final."""
        oracle = PIPELINES[name].oracle
        inspect.signature(oracle.check).bind("truth", "sink", "batches", "params")
        inspect.signature(oracle.final_watermark_ms).bind(0, "params")

    def test_a_delivered_weight_is_an_output_column(self, name):
        kind = PIPELINES[name]
        assert kind.delivered_weight is None or kind.delivered_weight in kind.columns


def test_every_query_module_is_registered():
    """A pipeline module in workloads/pipelines/ (one with NAME) has an entry, so an oracle."""
    named = set()
    for info in pkgutil.iter_modules(workloads.pipelines.__path__):
        module = importlib.import_module(f"workloads.pipelines.{info.name}")
        if hasattr(module, "NAME"):
            named.add(module.NAME)
    assert named == {k.name for k in PIPELINES.values()}


@pytest.mark.parametrize("name", list(SINKS))
def test_every_sink_has_the_protocol_s_methods_and_a_reader(name):
    """setup, close and read, and write (foreachBatch) or start (Spark's own format)."""
    cls = SINKS[name].load()
    for method in ("setup", "read", "close"):
        assert callable(getattr(cls, method, None)), (name, method)
    writes = "start" if getattr(cls, "streaming_format", False) else "write"
    assert callable(getattr(cls, writes, None)), (name, writes)
    assert SINKS[name].commit_gate == (writes == "write"), name
