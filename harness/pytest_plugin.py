"""A pytest plugin: assert delivery guarantees from your own test suite (docs/pytest.md).

Installed with the package (a `pytest11` entry point), nothing to configure:

    def test_my_sink_is_exactly_once(harness_run):
        result = harness_run("scenario.toml", quick=True)
        case = result.case("my-sink")
        assert case.verdict.holds, case          # PASS only: FAIL and UNKNOWN print the case
        assert case.latency.p99 < 30_000

- `harness_run(scenario, quick=False, case=None, **overrides)` runs a scenario and returns its
  typed result (harness/results/model.py RunResult); `overrides` are laid over its tables
  (`workload={"duration": "20s"}`).
- `harness_hunt(scenario, runs=10, seed=1, case=None, kinds=(), budget="30m", quick=False)`
  searches fault plans and returns the hunt (hunt.json's content) with its run's result.
- The scenario is validated before anything starts: a bad one fails the test with the
  loader's message (the dotted key and the fix), and no service is started for it.
- Kafka and PostgreSQL start once per pytest session, at the first run that needs them, and
  every run shares them (a scenario with a `network` fault starts its own, behind its proxy).
- The harness's own noise is filtered: kafka-python's DeprecationWarnings (it reads its
  protocol schemas with a deprecated importlib API) do not reach the user's report.
- `pytest --harness-out DIR` keeps every run directory under DIR; without it, the runs of a
  test that failed are kept (their path is printed) and the others removed.
- `case.verdict.status` is PASS, FAIL or UNKNOWN (a case nothing failed that could not be
  decided: a noop sink, a sink or an oracle that raised, a fault that never came);
  `case.verdict.holds` is True for PASS alone, so `assert case.verdict.holds` fails on UNKNOWN.
- With pytest-benchmark, a test that also asks for `benchmark` gets each case's figures in
  the benchmark's `extra_info`, keyed `<case>.<figure>` by the figure registry's names
  (harness/results/figures.py), so `pytest-benchmark compare` compares them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

# warnings the harness's own dependencies raise, filtered in every suite that uses the plugin
FILTERS = ("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning",)


def pytest_configure(config):
    for line in FILTERS:
        config.addinivalue_line("filterwarnings", line)


def pytest_addoption(parser):
    group = parser.getgroup("harness", "the Spark Structured Streaming harness")
    group.addoption("--harness-out", default=None, metavar="DIR",
                    help="keep every harness run directory under DIR (default: only the failing tests' "
                         "runs, under pytest's temporary directory)")


class _Shared:
    """Kafka and PostgreSQL for the whole session, started by the first run that needs them
    (`get()`), so that a test whose scenario does not validate starts nothing."""

    def __init__(self, tmp_path_factory):
        from harness.services.base import Registry

        self.tmp_path_factory, self.registry, self.stack = tmp_path_factory, Registry(), None

    def get(self):
        """(registry, stack), started once."""
        if self.stack is None:
            from harness.run.stack import start_shared
            from workloads.progress import Progress

            self.registry.__enter__()
            self.stack = start_shared(self.tmp_path_factory.mktemp("harness-services"), self.registry,
                                      Progress())
        return self.registry, self.stack

    def close(self) -> None:
        if self.stack is not None:
            self.registry.__exit__(None, None, None)


@pytest.fixture(scope="session")
def harness_services(tmp_path_factory):
    """The session's Kafka and PostgreSQL, started at their first use (`.get()`), stopped at its end."""
    shared = _Shared(tmp_path_factory)
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def _harness_runs(request, tmp_path_factory):
    """Where a test's runs go; after the test, a passing test's runs are removed unless
    --harness-out keeps them all."""
    keep = request.config.getoption("--harness-out")
    root = Path(keep) if keep else tmp_path_factory.mktemp("harness-runs")
    made: list[Path] = []
    yield root, made
    failed = getattr(request.node, "_harness_failed", False)
    made = [path for path in made if path.exists()]   # a run refused before it wrote anything left none
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


def extra_info(result) -> dict:
    """Each case's verdict and every figure of the registry, flat, for a benchmark's extra_info:
    `<case>.status`, `.holds`, `.observed`, and `<case>.<figure name>`. The keys written before
    the registry named them (`throughput_eps`, `p99_ms`, `recovery_s`: summary.json's headline)
    are kept beside, deprecated: a key is added, never renamed."""
    from harness.results import figures

    out: dict = {"run_id": result.run_id, "verdict": result.verdict_status}
    for c in result.cases:
        out.update({f"{c.name}.status": c.verdict.status, f"{c.name}.holds": c.verdict.holds,
                    f"{c.name}.observed": c.verdict.observed})
        out.update({f"{c.name}.{f.name}": f.value(c) for f in figures.FIGURES})
        out.update({f"{c.name}.{key}": value for key, value in figures.headline(c).items()})
    return out


def _timed(request, fn):
    """Run `fn` under pytest-benchmark when the test asks for `benchmark`, once."""
    if "benchmark" not in request.fixturenames:
        return fn()
    benchmark = request.getfixturevalue("benchmark")
    result = benchmark.pedantic(fn, rounds=1, iterations=1)
    benchmark.extra_info.update(extra_info(result if not isinstance(result, tuple) else result[1]))
    return result


def _validated(scenario_path, quick: bool, overrides: dict | None = None, case=None):
    """The scenario, loaded and checked before anything starts, with the test's overrides laid
    over it and its case picked as the run will: a bad one fails the test with the loader's
    message (the file, the dotted key and the fix), not a traceback through the harness, and
    before the session's services are asked for, so that a machine without `java` still says
    what is wrong with the scenario (the unit lane runs with nothing installed)."""
    import tempfile

    from harness import api
    from harness import scenario as scenario_mod
    from workloads.errors import Problem

    copy = None
    try:
        if not overrides:
            loaded = scenario_mod.load(scenario_path, quick=quick)
        else:
            with tempfile.TemporaryDirectory(prefix="harness-overrides-") as into:
                copy = api.scenario_with(Path(scenario_path), overrides, Path(into))
                loaded = scenario_mod.load(copy, quick=quick)
        if case is None:
            return loaded
        return api.only_cases(loaded, [case] if isinstance(case, str) else list(case))
    except Problem as exc:
        text = str(exc)
        if copy is not None:   # the user's file, not the copy that is gone
            text = text.replace(str(copy), f"{scenario_path} with the test's overrides of "
                                           f"{', '.join(sorted(overrides or {}))}")
        pytest.fail(f"harness: the scenario does not validate, so nothing was started:\n{text}",
                    pytrace=False)


def _shared(scenario, harness_services):
    """The session's services, unless the scenario needs its own (a network fault's proxy)."""
    from harness.scenario.fault_specs import needs_proxy

    if needs_proxy(scenario.faults):
        return None, None
    return harness_services.get()


def _run_or_fail(fn):
    """Run the harness; bad input (a scenario with overrides the loader refuses, a sink whose
    constructor raises) fails the test with its message and fix, not a traceback."""
    from workloads.errors import Problem

    try:
        return fn()
    except Problem as exc:
        pytest.fail(f"harness: {exc}", pytrace=False)


@pytest.fixture
def harness_run(request, harness_services, _harness_runs):
    """harness_run(scenario, quick=False, case=None, **overrides) -> RunResult."""
    from harness import api

    root, made = _harness_runs

    def run(scenario, quick: bool = False, case: str | None = None, **overrides):
        registry, stack = _shared(_validated(scenario, quick, overrides, case), harness_services)
        out = _run_dir(root, request, made, Path(scenario).stem)
        return _timed(request, lambda: _run_or_fail(lambda: api.run(
            scenario, out, quick=quick, case=case, overrides=overrides or None, registry=registry,
            stack=stack)))
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
        loaded = _validated(scenario, quick, case=case)
        # the hunt's own options (its case, --runs, --budget) are checked before services start too
        search = _run_or_fail(lambda: HuntSearch.of(case, runs, seed, tuple(kinds), budget, all))
        registry, stack = _shared(loaded, harness_services)
        out = _run_dir(root, request, made, f"hunt-{Path(scenario).stem}")
        result = _run_or_fail(lambda: api.run(scenario, out, quick=quick, search=search, registry=registry,
                                              stack=stack))
        return {**result.sections["hunt"], "result": result, "run_dir": str(out)}
    return hunt
