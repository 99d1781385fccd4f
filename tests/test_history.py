"""The nightly history (harness/history/): planted steps, flips and A/A nights, on synthetic
summaries; what `history check` says of each and its exit codes; the trend page."""

from __future__ import annotations

import json
import random

import pytest

from harness.errors import HarnessError
from harness.history import changes, check, correctness, noise, trend
from harness.history.store import Store
from tests.helpers import REPO, run_cli

NOISE = 0.01   # the quick bench's throughput noise (about 1.1% over three runs)


def _case(name: str, eps: float, p99: float, *, holds: bool = True, duplicated: int = 0,
          observed: str = "exactly-once", seen: bool = True) -> dict:
    return {"name": name, "series": name, "repeat": 1, "guarantee": "exactly-once",
            "pipeline": "tumbling_count", "sink": "postgres",
            "verdict": {"expected": "exactly-once", "observed": observed, "holds": holds, "detail": ""},
            "events": {"expected": 22000, "lost": 0, "duplicated": duplicated, "unexpected": 0},
            "throughput_eps": {"processed": eps, "measured": {"processed": eps}},
            "latency_ms": {"event_time": {"p50": p99 / 3, "p99": p99}},
            "headline": {"throughput_eps": eps, "p99_ms": p99},
            "backpressure": {"max_lag_records": 100},
            "faults": [{"kind": "kill-executor", "at_s": 5.0, "started_s": 5.0, "ended_s": 5.5,
                        "target": "executor:0", "observed": seen}]}


def _night(root, k: int, cases: list[dict], *, commit: str, h: str = "abc123", spark: str = "4.2.0",
           cpus: int = 2) -> object:
    d = root / f"run-{k:03d}"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({
        "schema_version": 3, "run_id": f"20261101T{k:06d}-bench-{k:04x}", "status": "completed",
        "started_at": f"2026-11-{1 + k // 24:02d}T{k % 24:02d}:00:00+0000",
        "scenario": {"name": "bench", "quick": True, "hash": h},
        "environment": {"git_sha": commit, "git_dirty": False, "spark": spark, "kafka": "4.3.1",
                        "python": "3.11", "java": "17", "harness": "0.1.0", "cpus": 2, "cpus_usable": cpus},
        "cases": cases}))
    return d


def _history(tmp_path, values: list[float], *, aa_every: int = 5, seed: int = 1, spark=lambda k: "4.2.0",
             **per_night) -> Store:
    """A store with one night per value of throughput (p99 steady), a new commit each night but
    every `aa_every`-th night, which reruns the night before's commit (an A/A pair)."""
    rng = random.Random(seed)
    store = Store(tmp_path / "store")
    commit = "c000"
    for k, v in enumerate(values):
        if k % aa_every != 1:
            commit = f"c{k:03d}"
        kwargs = {key: fn(k) for key, fn in per_night.items()}
        case = _case("eo", v * (1 + rng.gauss(0, NOISE)), 5000 * (1 + rng.gauss(0, NOISE)), **kwargs)
        store.add(_night(tmp_path, k, [case], commit=commit, spark=spark(k)))
    return store


@pytest.mark.unit
class TestStore:
    def test_adding_a_run_twice_is_refused(self, tmp_path):
        d = _night(tmp_path, 0, [_case("eo", 400, 5000)], commit="c0")
        Store(tmp_path / "s").add(d)
        with pytest.raises(HarnessError, match="is in the history already"):
            Store(tmp_path / "s").add(d)
        proc = run_cli("history", "add", str(tmp_path / "s"), str(d))
        assert proc.returncode == 2 and "in the history already" in proc.stderr

    def test_a_run_of_another_scenario_hash_starts_a_new_series(self, tmp_path):
        store = Store(tmp_path / "s")
        store.add(_night(tmp_path, 0, [_case("eo", 400, 5000)], commit="c0"))
        store.add(_night(tmp_path, 1, [_case("eo", 400, 5000)], commit="c1", h="def456"))
        store.add(_night(tmp_path, 2, [_case("eo", 400, 5000)], commit="c2", cpus=1))
        assert sorted((s.scenario_hash, s.cpus, len(s.nights)) for s in store.series()) == [
            ("abc123", 1, 1), ("abc123", 2, 1), ("def456", 2, 1)]

    def test_every_figure_of_the_registry_is_kept(self, tmp_path):
        from harness.results import figures

        store = Store(tmp_path / "s")
        (entry,) = store.add(_night(tmp_path, 0, [_case("eo", 400, 5000)], commit="c0"))
        assert set(entry.figures) == {f.name for f in figures.FIGURES}
        assert entry.figures["throughput"] == 400 and entry.versions["spark"] == "4.2.0"


@pytest.mark.unit
class TestSpeed:
    def test_a_5_percent_step_in_throughput_is_found_within_3_nights(self, tmp_path):
        """30 nights at 400 events/s, then 380 (-5%): the third night after, check alarms, and
        places the change at the step, with the commits between."""
        store = _history(tmp_path, [400.0] * 30 + [380.0] * 3)
        checked = check.check(store)
        (alarm,) = [c for c in checked.alarms if isinstance(c, changes.Change)]
        assert alarm.figure == "throughput" and alarm.night == 30 and alarm.worse
        assert -0.07 < alarm.size < -0.03
        assert alarm.between() == "commits c028..c030" or alarm.between().startswith("commits ")
        text = check.render(checked)
        assert "ALARM worse: bench (quick) eo throughput from night 31" in text
        proc = run_cli("history", "check", str(store.path), "--json", str(tmp_path / "c.json"))
        assert proc.returncode == 1, proc.stdout + proc.stderr
        data = json.loads((tmp_path / "c.json").read_text())
        assert data["speed"][0]["after_commit"] == "c030" and data["speed"][0]["alarm"]

    def test_a_steady_history_of_a_a_nights_raises_no_alarm(self, tmp_path):
        """Steady nights of 1% gaussian noise: an alarm on the last night is a false one, and
        comes in a few histories of twenty at most (the planted measurement: 0.31 in 30 nights)."""
        alarmed = []
        for seed in range(1, 21):
            (tmp_path / f"s{seed}").mkdir()
            store = _history(tmp_path / f"s{seed}", [400.0] * 40, aa_every=2, seed=seed)
            checked = check.check(store)
            alarmed += [check.render(checked)] if checked.alarms else []
        assert len(alarmed) <= 2, "\n\n".join(alarmed)
        (table,) = checked.noise.values()
        assert table["throughput"].source == noise.AA and 0.004 < table["throughput"].sd < 0.02
        proc = run_cli("history", "check", str(store.path))
        assert proc.returncode == 0 and "smallest change told from it" in proc.stdout

    def test_the_real_history_of_a_a_nights_raises_no_alarm(self):
        """results/history: ten real quick benches on three commits, none of which changed the
        bench's speed. Its fifth night was 4 sd off in four figures at once, which levels of a
        single night made four false alarms, and its at-most-once case's throughput (it moves
        with what the case lost) alarmed against the pooled noise."""
        checked = check.check(Store(REPO / "results" / "history" / "store"))
        assert len(checked.series) == 6 and max(len(s.nights) for s in checked.series) == 7
        assert not checked.alarms, check.render(checked)

    def test_a_case_noisier_than_the_others_is_judged_by_its_own_noise(self):
        pooled = {"throughput": noise.Noise("throughput", 0.01, 15, noise.AA)}
        own = {"throughput": noise.Noise("throughput", 0.03, 5, noise.AA)}
        assert noise.wider(pooled, own)["throughput"].sd == 0.03
        assert noise.wider(own, pooled)["throughput"].sd == 0.03
        assert noise.wider(pooled, {"throughput": noise.Noise("throughput", None, 0, noise.NONE)}) == pooled

    def test_the_noise_says_what_it_can_tell(self):
        """At 1.2% noise (the quick bench's throughput) a 5% step is caught within 3 nights; at
        11.6% (its p99, under faults) only one of about 40%: a 10% step in p99 is noise there."""
        assert changes.detectable(0.012) < 0.05
        assert 0.35 < changes.detectable(0.116) < 0.45
        assert changes.detectable(None) is None


@pytest.mark.unit
class TestCorrectness:
    def test_a_single_flip_to_fail_is_reported_on_its_night(self, tmp_path):
        store = _history(tmp_path, [400.0] * 12, holds=lambda k: k != 11)
        checked = check.check(store)
        flips = [f for f in checked.alarms if isinstance(f, correctness.Flip)]
        assert [(f.what, f.night) for f in flips] == [("verdict", 11)]

    def test_duplicates_where_there_were_none_are_a_change(self, tmp_path):
        store = _history(tmp_path, [400.0] * 8, duplicated=lambda k: 37 if k == 7 else 0)
        (flip,) = correctness.flips(store.series()[0])
        assert (flip.what, flip.before, flip.after, flip.night) == ("duplicated", "0", "37", 7)

    def test_a_fault_no_longer_seen_and_an_old_flip_that_does_not_page(self, tmp_path):
        store = _history(tmp_path, [400.0] * 10, seen=lambda k: k != 3)
        checked = check.check(store)
        assert [(f.what, f.night) for f in checked.flips] == [("faults seen", 3)]
        assert not checked.alarms   # night 4 of 10: not among the newest


@pytest.mark.unit
class TestTrend:
    def test_the_page_draws_each_figure_with_its_marks_and_links(self, tmp_path):
        store = _history(tmp_path, [400.0] * 30 + [380.0] * 3, spark=lambda k: "4.2.0" if k < 20 else "4.2.1")
        page = trend.write(store, tmp_path / "trend.html").read_text()
        from harness.results import figures

        compared = [f for f in figures.shown_in(figures.COMPARE) if f.better is not None]
        assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart"') == len(compared)
        assert page.count('class="change"') >= 1 and page.count('class="noise"') >= 1
        drawn = len(compared) - page.count(">not measured</text>")
        assert drawn >= 5 and page.count('class="version"') == drawn and "spark 4.2.1" in page
        assert page.count("report.html") == 0 and page.count('class="night"') >= 33
        assert page.count("<tr>") == 33 + 1


_PROBE = """<script>
addEventListener("load", () => {
  const drawn = [...document.querySelectorAll("svg.chart")]
    .filter(s => s.getBoundingClientRect().width > 100);
  document.body.setAttribute("data-probe", JSON.stringify({charts: drawn.length,
    nights: document.querySelectorAll("svg.chart circle.night").length,
    rows: document.querySelectorAll("table.correctness tr").length}));
});
</script></body>"""


@pytest.mark.integration   # needs Debian's chromium, as report.html's own check does
def test_the_trend_page_renders_in_headless_chromium(tmp_path):
    """Chromium lays the trend page out: every chart at its size, a point a night in each, and
    the correctness table's rows."""
    import re
    import shutil
    import subprocess

    chromium = shutil.which("chromium")
    assert chromium, "chromium is not on PATH: apt-get install chromium (python -m harness.sysdeps does)"
    store = _history(tmp_path, [400.0] * 12 + [370.0] * 3)
    page = trend.write(store, tmp_path / "trend.html").read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", _PROBE))
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                          f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    found = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert found, f"chromium did not run the page: {dom.stderr[-2000:]}"
    laid_out = json.loads(found.group(1).replace("&quot;", '"'))
    assert laid_out["charts"] == page.count('class="chart"') and laid_out["rows"] == 15 + 1
    drawn = page.count('class="chart"') - page.count(">not measured</text>")
    assert laid_out["nights"] == 15 * drawn
