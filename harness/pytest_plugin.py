"""A pytest plugin: assert delivery guarantees from your own test suite (docs/pytest.md).

Installed with the package (a `pytest11` entry point), nothing to configure:

    def test_my_sink_is_exactly_once(harness_run):
        result = harness_run("scenario.toml", quick=True)
        case = result.case("my-sink")
        assert case.verdict.holds, case          # a failure prints each finding's story
        assert case.latency.p99 < 30_000

- `harness_run(scenario, quick=False, case=None, **overrides)` runs a scenario and returns its
  typed result (harness/results/model.py RunResult); `overrides` are laid over its tables
  (`workload={"duration": "20s"}`).
- `harness_hunt(scenario, runs=10, seed=1, case=None, kinds=(), budget="30m", quick=False)`
  searches fault plans and returns the hunt (hunt.json's content) with its run's result.
- Kafka and PostgreSQL start once per pytest session and every run shares them (a scenario
  with a `network` fault starts its own, behind its proxy).
- `pytest --harness-out DIR` keeps every run directory under DIR; without it, the runs of a
  test that failed are kept (their path is printed) and the others removed.
- With pytest-benchmark, a test that also asks for `benchmark` gets each case's figures in
  the benchmark's `extra_info`, so `pytest-benchmark compare` compares them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("harness", "the Spark Structured Streaming harness")
    group.addoption("--harness-out", default=None, metavar="DIR",
                    help="keep every harness run directory under DIR (default: only the failing tests' "
                         "runs, under pytest's temporary directory)")


@pytest.fixture(scope="session")
def harness_services(tmp_path_factory):
    """(registry, stack): Kafka and PostgreSQL for the whole session, stopped at its end."""
    from harness.run.stack import start_shared
    from harness.services.base import Registry
    from workloads.progress import Progress

    with Registry() as registry:
        stack = start_shared(tmp_path_factory.mktemp("harness-services"), registry, Progress())
        yield registry, stack


@pytest.fixture
def _harness_runs(request, tmp_path_factory):
    """Where a test's runs go; after the test, a passing test's runs are removed unless
    --harness-out keeps them all."""
    keep = request.config.getoption("--harness-out")
    root = Path(keep) if keep else tmp_path_factory.mktemp("harness-runs")
    made: list[Path] = []
    yield root, made
    failed = getattr(request.node, "_harness_failed", False)
    if keep is None and not failed:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
    elif made:
        request.node.add_report_section("teardown", "harness", "run directories kept:\n" +
                                        "\n".join(f"  {p}" for p in made))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        item._harness_failed = True


def _run_dir(root: Path, request, made: list[Path], label: str) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{request.node.name}-{label}")[:80]
    path, n = root / name, 1
    while path.exists():
        n += 1
        path = root / f"{name}-{n}"
    made.append(path)
    return path


def _figures(result) -> dict:
    """Each case's figures, flat, for a benchmark's extra_info."""
    out: dict = {"run_id": result.run_id}
    for c in result.cases:
        out.update({f"{c.name}.holds": c.verdict.holds, f"{c.name}.observed": c.verdict.observed,
                    f"{c.name}.throughput_eps": c.throughput, f"{c.name}.p99_ms": c.p99_ms,
                    f"{c.name}.recovery_s": c.recovery_s, f"{c.name}.lost": c.lost,
                    f"{c.name}.duplicated": c.duplicated})
    return out


def _timed(request, fn):
    """Run `fn` under pytest-benchmark when the test asks for `benchmark`, once."""
    if "benchmark" not in request.fixturenames:
        return fn()
    benchmark = request.getfixturevalue("benchmark")
    result = benchmark.pedantic(fn, rounds=1, iterations=1)
    benchmark.extra_info.update(_figures(result if not isinstance(result, tuple) else result[1]))
    return result


def _shared(scenario_path, harness_services):
    """The session's services, unless the scenario needs its own (a network fault's proxy)."""
    from harness import scenario as scenario_mod
    from harness.scenario.fault_specs import needs_proxy

    if needs_proxy(scenario_mod.load(scenario_path).faults):
        return None, None
    return harness_services


@pytest.fixture
def harness_run(request, harness_services, _harness_runs):
    """harness_run(scenario, quick=False, case=None, **overrides) -> RunResult."""
    from harness import api

    root, made = _harness_runs

    def run(scenario, quick: bool = False, case: str | None = None, **overrides):
        registry, stack = _shared(scenario, harness_services)
        out = _run_dir(root, request, made, Path(scenario).stem)
        return _timed(request, lambda: api.run(scenario, out, quick=quick, case=case,
                                               overrides=overrides or None, registry=registry, stack=stack))
    return run


@pytest.fixture
def harness_hunt(request, harness_services, _harness_runs):
    """harness_hunt(scenario, runs=10, seed=1, ...) -> the hunt: hunt.json's content, with
    "result" its run's RunResult and "run_dir" where it is."""
    from harness import api
    from harness.hunt.search import HuntSearch

    root, made = _harness_runs

    def hunt(scenario, runs: int = 10, seed: int = 1, case: str | None = None, kinds=(),
             budget: str = "30m", quick: bool = False, all: bool = False):
        registry, stack = _shared(scenario, harness_services)
        out = _run_dir(root, request, made, f"hunt-{Path(scenario).stem}")
        search = HuntSearch.of(case, runs, seed, tuple(kinds), budget, all)
        result = api.run(scenario, out, quick=quick, search=search, registry=registry, stack=stack)
        return {**result.sections["hunt"], "result": result, "run_dir": str(out)}
    return hunt
