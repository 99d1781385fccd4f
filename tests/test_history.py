"""The nightly history (harness/history/): planted steps, flips, machines and A/A nights, on
synthetic summaries and on the committed history; what `history check` says of each and its exit
codes; `history add`; the trend page."""

from __future__ import annotations

import json
import random
import shutil

import pytest

from harness.errors import HarnessError
from harness.history import changes, check, correctness, noise, trend
from harness.history.store import Store
from tests.helpers import REPO, run_cli

NOISE = 0.01   # the quick bench's throughput noise (about 1.1% over three runs)
XEON, EPYC = "Intel(R) Xeon(R) Processor", "AMD EPYC"
COMMITTED = REPO / "results" / "history" / "store"
QUICK_BASELINE = REPO / "results" / "baseline" / "bench-quick.summary.json"


def _case(name: str, eps: float, p99: float, *, holds: bool = True, duplicated: int = 0,
          observed: str = "exactly-once", seen: bool = True, status: str | None = None,
          ceiling: float | None = None, max_lag: int = 100) -> dict:
    verdict = {"expected": "exactly-once", "observed": observed, "holds": holds, "detail": ""}
    if status:
        verdict.update(status=status, holds=status == "PASS", detail=f"{status}: planted")
    case = {"name": name, "series": name, "repeat": 1, "guarantee": "exactly-once",
            "pipeline": "tumbling_count", "sink": "postgres", "verdict": verdict,
            "events": {"expected": 22000, "lost": 0, "duplicated": duplicated, "unexpected": 0},
            "throughput_eps": {"processed": eps, "measured": {"processed": eps}},
            "latency_ms": {"event_time": {"p50": p99 / 3, "p99": p99}},
            "headline": {"throughput_eps": eps, "p99_ms": p99},
            "backpressure": {"max_lag_records": max_lag, "keeping_up": ceiling is None},
            "faults": [{"kind": "kill-executor", "at_s": 5.0, "started_s": 5.0, "ended_s": 5.5,
                        "target": "executor:0", "observed": seen}]}
    if ceiling is not None:
        case["references"] = {"spark_ceiling_eps": ceiling, "restart_floor_s": None, "why": {}}
    return case


def _night(root, k: int, cases: list[dict], *, commit: str, h: str = "abc123", spark: str = "4.2.0",
           cpus: int = 2, cpu_model: str = XEON) -> object:
    d = root / f"run-{k:03d}"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({
        "schema_version": 3, "run_id": f"20261101T{k:06d}-bench-{k:04x}", "status": "completed",
        "started_at": f"2026-11-{1 + k // 24:02d}T{k % 24:02d}:00:00+0000",
        "scenario": {"name": "bench", "quick": True, "hash": h},
        "environment": {"git_sha": commit, "git_dirty": False, "spark": spark, "kafka": "4.3.1",
                        "python": "3.11", "java": "17", "harness": "0.1.0", "cpus": 2, "cpus_usable": cpus,
                        "cpu_model": cpu_model, "memory_bytes": 24 * 2 ** 30},
        "cases": cases}))
    return d


def _history(tmp_path, values: list[float], *, aa_every: int = 5, seed: int = 1, spark=lambda k: "4.2.0",
             machine=lambda k: XEON, ceiling=lambda k: None, **per_night) -> Store:
    """A store with one night per value of throughput (p99 steady), a new commit each night but
    every `aa_every`-th night, which reruns the night before's commit (an A/A pair; 0: none)."""
    rng = random.Random(seed)
    store = Store(tmp_path / "store")
    commit = "c000"
    for k, v in enumerate(values):
        if not aa_every or k % aa_every != 1:
            commit = f"c{k:03d}"
        kwargs = {key: fn(k) for key, fn in per_night.items()}
        case = _case("eo", v * (1 + rng.gauss(0, NOISE)), 5000 * (1 + rng.gauss(0, NOISE)),
                     ceiling=ceiling(k), **kwargs)
        store.add(_night(tmp_path, k, [case], commit=commit, spark=spark(k), cpu_model=machine(k)))
    return store


def _with_night_from(tmp_path, cpu_model: str, **case_changes) -> Store:
    """A copy of the committed history plus the committed quick baseline's run as one more
    night, run again on `cpu_model` at a later commit (678fb32), its cases changed as asked."""
    shutil.copytree(COMMITTED, tmp_path / "store")
    summary = json.loads(QUICK_BASELINE.read_text())
    summary.update(run_id="20261127T101500-bench-e9c1", started_at="2026-11-27T10:15:00+0000")
    summary["environment"].update(cpu_model=cpu_model, git_sha="678fb32" + "0" * 33)
    for name, changed in case_changes.items():
        case = next(c for c in summary["cases"] if c["name"] == name)
        for key, value in changed.items():
            case[key] = {**case[key], **value} if isinstance(value, dict) else value
    run = tmp_path / "night"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(summary))
    Store(tmp_path / "store").add(run)
    return Store(tmp_path / "store")


@pytest.mark.unit
class TestStore:
    def test_adding_a_run_that_is_there_already_is_a_no_op_with_a_note(self, tmp_path):
        """A retried night completes: the run already there is left as it was, exit 0 (it was
        refused with exit 2, "already in history")."""
        d = _night(tmp_path, 0, [_case("eo", 400, 5000)], commit="c0")
        Store(tmp_path / "s").add(d)
        before = (tmp_path / "s" / "runs").stat().st_mtime_ns, sorted((tmp_path / "s" / "runs").iterdir())
        proc = run_cli("history", "add", str(tmp_path / "s"), str(d))
        assert proc.returncode == 0, proc.stderr
        assert "is in the history already: nothing added" in proc.stdout
        assert sorted((tmp_path / "s" / "runs").iterdir()) == before[1]

    def test_add_is_all_or_nothing(self, tmp_path):
        """`history add STORE good bad` adds nothing and exits 2 (it added the good run); the
        retry with the typo fixed adds both (it failed: "already in history")."""
        good = _night(tmp_path, 0, [_case("eo", 400, 5000)], commit="c0")
        fixed = _night(tmp_path, 1, [_case("eo", 400, 5000)], commit="c1")
        proc = run_cli("history", "add", str(tmp_path / "s"), str(good), str(tmp_path / "typo"))
        assert proc.returncode == 2 and "no summary.json there; nothing was added" in proc.stderr
        assert not (tmp_path / "s" / "runs").exists() or not list((tmp_path / "s" / "runs").iterdir())
        proc = run_cli("history", "add", str(tmp_path / "s"), str(good), str(fixed))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("added run") == 2 and len(Store(tmp_path / "s").entries()) == 2

    def test_a_write_that_fails_leaves_none_of_the_runs(self, tmp_path, monkeypatch):
        import os

        runs = [_night(tmp_path, k, [_case("eo", 400, 5000)], commit=f"c{k}") for k in range(3)]
        calls = []

        def replace(src, dst):
            calls.append(dst)
            if len(calls) == 2:
                raise OSError(28, "No space left on device")
            return real(src, dst)

        real = os.replace
        monkeypatch.setattr("harness.history.store.os.replace", replace)
        with pytest.raises(OSError):
            Store(tmp_path / "s").add(*runs)
        assert not list((tmp_path / "s" / "runs").iterdir())

    def test_a_series_is_one_machine(self, tmp_path):
        """A run of another hash, pinned to fewer CPUs or on another CPU model starts a series
        of its own for the figures that are times and rates; every machine's nights of a case
        are one series for the figures that travel and for correctness."""
        store = Store(tmp_path / "s")
        store.add(_night(tmp_path, 0, [_case("eo", 400, 5000)], commit="c0"))
        store.add(_night(tmp_path, 1, [_case("eo", 400, 5000)], commit="c1", h="def456"))
        store.add(_night(tmp_path, 2, [_case("eo", 400, 5000)], commit="c2", cpus=1))
        store.add(_night(tmp_path, 3, [_case("eo", 250, 8000)], commit="c3", cpu_model=EPYC))
        one = sorted((s.scenario_hash, s.machine.cpu_model, s.machine.cpus_usable, len(s.nights))
                     for s in store.series() if s.machine)
        assert one == [("abc123", EPYC, 2, 1), ("abc123", XEON, 1, 1), ("abc123", XEON, 2, 1),
                       ("def456", XEON, 2, 1)]
        every = sorted((s.scenario_hash, len(s.nights)) for s in store.series() if s.machine is None)
        assert every == [("abc123", 3), ("def456", 1)]

    def test_every_figure_of_the_registry_is_kept(self, tmp_path):
        from harness.results import figures

        store = Store(tmp_path / "s")
        (added,) = store.add(_night(tmp_path, 0, [_case("eo", 400, 5000)], commit="c0"))
        (entry,) = added.entries
        assert set(entry.figures) == {f.name for f in figures.FIGURES}
        assert entry.figures["throughput"] == 400 and entry.versions["spark"] == "4.2.0"
        assert entry.verdict["status"] == "PASS"

    def test_an_empty_store_exits_2(self, tmp_path):
        """history.json and no runs: nothing to judge is no "no change found" (it exited 0)."""
        (tmp_path / "s").mkdir()
        (tmp_path / "s" / "history.json").write_text('{"format": 1}')
        proc = run_cli("history", "check", str(tmp_path / "s"))
        assert proc.returncode == 2 and "the history has no runs" in proc.stderr

    def test_the_directory_above_a_store_names_the_store(self, tmp_path):
        """`history check results/history` (the docs' old path): the fix names the store inside,
        not a command that would start a second, empty store."""
        shutil.copytree(COMMITTED, tmp_path / "history" / "store")
        with pytest.raises(HarnessError) as info:
            Store(tmp_path / "history").require()
        assert info.value.fix == f"give the store itself: {tmp_path / 'history' / 'store'}"


@pytest.mark.unit
class TestSpeed:
    def test_a_5_percent_step_in_throughput_is_found_within_3_nights(self, tmp_path):
        """30 nights at 400 events/s, then 380 (-5%): the third night after, check alarms, and
        places the change at the step, with the commits from the last night before it."""
        store = _history(tmp_path, [400.0] * 30 + [380.0] * 3)
        checked = check.check(store)
        (alarm,) = [c for c in checked.alarms if isinstance(c, changes.Change)]
        assert alarm.figure == "throughput" and alarm.night == 30 and alarm.worse
        assert -0.07 < alarm.size < -0.03 and alarm.between() == "commits c029..c030"
        text = check.render(checked)
        assert text.splitlines()[0].startswith("ALARM: 1 change(s) for the worse in speed")
        assert f"ALARM worse: bench (quick) eo on {XEON}, 2 CPUs, 24 GiB: processed -" in text
        proc = run_cli("history", "check", str(store.path), "--json", str(tmp_path / "c.json"))
        assert proc.returncode == 1, proc.stdout + proc.stderr
        data = json.loads((tmp_path / "c.json").read_text())
        (speed,) = [c for c in data["speed"] if c["alarm"]]
        assert speed["after_commit"] == "c030" and speed["before_commit"] == "c029"

    def test_a_change_sits_at_the_first_night_at_the_new_level_and_waits_for_a_second(self, tmp_path):
        """A step in the newest night: one night at the new level is pending, not an alarm (it
        alarmed, placed on the night before, a clean A/A night, blaming "the same commit"); the
        next night it alarms, placed at its first night, blaming the commits into it."""
        values = [400.0] * 20 + [330.0]
        checked = check.check(_history(tmp_path, values, aa_every=2))
        assert not checked.alarms, check.render(checked)
        assert "pending (1 of 2 nights at the new level)" in check.render(checked)
        (tmp_path / "two").mkdir()
        checked = check.check(_history(tmp_path / "two", [*values, 330.0], aa_every=2))
        (alarm,) = checked.alarms
        assert alarm.night == 20 and alarm.between() == "commits c018..c020"   # night 19 reran c018

    def test_a_steady_history_of_a_a_nights_raises_no_alarm(self, tmp_path):
        """Steady nights of 1% gaussian noise: an alarm on the last night is a false one, and
        comes in a few histories of twenty at most."""
        alarmed = []
        for seed in range(1, 21):
            (tmp_path / f"s{seed}").mkdir()
            store = _history(tmp_path / f"s{seed}", [400.0] * 40, aa_every=2, seed=seed)
            checked = check.check(store)
            alarmed += [check.render(checked)] if checked.alarms else []
        assert len(alarmed) <= 2, "\n\n".join(alarmed)
        (series,) = [s for s in checked.series if s.machine]
        told = checked.noise_of(series)["throughput"]
        assert noise.AA in told.source and 0.004 < told.sd < 0.02
        proc = run_cli("history", "check", str(store.path))
        assert proc.returncode == 0 and "smallest change told from it" in proc.stdout

    def test_single_runs_without_a_a_nights_are_judged_by_their_night_to_night_noise(self, tmp_path):
        """Twenty single-run nights, each on its own commit (no A/A, no repeats) and a 10% step
        in throughput in the last three: the noise comes from the nights themselves and the
        step alarms (every figure was "noise unknown" and the check could not fail)."""
        checked = check.check(_history(tmp_path, [400.0] * 17 + [360.0] * 3, aa_every=0))
        (alarm,) = checked.alarms
        assert alarm.figure == "throughput" and alarm.night == 17
        assert alarm.noise.source == noise.NIGHTS
        assert "night-to-night differences" in check.render(checked)

    def test_the_real_history_of_a_a_nights_raises_no_alarm(self):
        """results/history: ten real quick benches on three commits, none of which changed the
        bench's speed."""
        checked = check.check(Store(COMMITTED))
        assert max(len(s.nights) for s in checked.series) == 7
        assert not checked.alarms, check.render(checked)

    def test_the_real_history_and_one_night_on_another_machine_raise_no_alarm(self, tmp_path):
        """A quick bench of a later commit run on EPYC, added to the committed history of Xeon
        nights: it raised 13 alarms, blaming night 7 (a clean A/A night, "the same commit").
        Now it starts its machine's series, whose first nights are not judged on speed."""
        store = _with_night_from(tmp_path, EPYC)
        proc = run_cli("history", "check", str(store.path))
        assert proc.returncode == 0, proc.stdout
        first = proc.stdout.splitlines()[0]
        assert first.startswith("OK: no FAIL and no change for the worse") and "speed not judged yet" in first
        assert f"on {EPYC}, 2 CPUs, 24 GiB: 1 night (speed is judged from {changes.MIN_NIGHTS})" in first

    def test_a_new_machine_s_first_nights_never_alarm_on_speed(self, tmp_path):
        """Twelve nights on Xeon, then five on a machine 1.6 times slower: no speed alarm."""
        values = [400.0] * 12 + [250.0] * 5
        checked = check.check(_history(tmp_path, values, machine=lambda k: XEON if k < 12 else EPYC))
        assert not checked.alarms, check.render(checked)

    def test_a_version_change_stays_in_the_series_and_is_named(self, tmp_path):
        """A Spark upgrade that slows the pipeline is what a nightly exists to catch."""
        values = [400.0] * 20 + [370.0] * 3
        checked = check.check(_history(tmp_path, values, spark=lambda k: "4.2.0" if k < 20 else "4.2.1"))
        (alarm,) = checked.alarms
        assert "spark 4.2.0 -> 4.2.1" in alarm.between()

    def test_a_ratio_that_travels_is_judged_across_machines(self, tmp_path):
        """Processed/s over Spark's ceiling on the same machine, runners switching between two
        CPUs (one 1.6 times slower) every four nights: the machines' own series see no change;
        a 10% drop of the ratio alarms on its series on every machine."""
        def slow(k):
            return (k // 4) % 2 == 1
        values = [(250.0 if slow(k) else 400.0) * (0.9 if k >= 20 else 1.0) for k in range(23)]
        checked = check.check(_history(tmp_path, values, aa_every=0,
                                       machine=lambda k: EPYC if slow(k) else XEON,
                                       ceiling=lambda k: 625.0 if slow(k) else 1000.0))
        ratio = [a for a in checked.alarms if a.figure == "throughput_of_ceiling"]
        assert ratio and ratio[0].series.machine is None and ratio[0].night == 20, check.render(checked)
        assert "machine: CPU model" in ratio[0].between() or ratio[0].between().startswith("commits")

    def test_the_noise_says_what_it_can_tell(self):
        """At 1.2% noise (the quick bench's throughput) a 5% step is caught within 3 nights; at
        9.3% (its p99, under faults) only one of about 30%."""
        assert changes.detectable(0.012) < 0.05
        assert 0.25 < changes.detectable(0.093) < 0.35
        assert changes.detectable(None) is None

    def test_few_nights_are_cautious(self):
        """An sd measured on three A/A pairs is raised more than one measured on thirty."""
        assert noise.upper(0.01, 3) > noise.upper(0.01, 30) > 0.01


@pytest.mark.unit
class TestCorrectness:
    def test_a_fail_on_the_first_night_of_a_series_alarms(self, tmp_path):
        """A FAILed exactly-once run (603 duplicated), the first night of its series: exit 1,
        FAIL on the first line (it said "no change for the worse", exit 0)."""
        store = Store(tmp_path / "s")
        store.add(_night(tmp_path, 0, [_case("eo", 400, 5000, holds=False, duplicated=603,
                                             observed="at-least-once")], commit="c0"))
        proc = run_cli("history", "check", str(store.path))
        assert proc.returncode == 1, proc.stdout
        first, second = proc.stdout.splitlines()[:2]
        assert first.startswith("ALARM: 1 FAIL(s)")
        assert second.startswith("ALARM FAIL: bench (quick) eo on every machine: verdict first night of the "
                                 "series -> FAIL (603 duplicated)")

    def test_a_night_whose_run_ended_early_is_unknown_not_a_pass(self, tmp_path):
        """The run crashed after its first case (status error, exit 3): the case it finished
        passed, the others never ran. `check` read OK; now the night is UNKNOWN (exit 4), naming
        the run's end."""
        store = Store(tmp_path / "s")
        d = _night(tmp_path, 0, [_case("eo", 400, 5000)], commit="c0")
        summary = json.loads((d / "summary.json").read_text())
        (d / "summary.json").write_text(json.dumps({**summary, "status": "error"}))
        store.add(d)
        proc = run_cli("history", "check", str(store.path))
        assert proc.returncode == 4, proc.stdout
        assert "ended error before all its cases had run" in proc.stdout, proc.stdout

    def test_a_fail_on_a_night_from_another_machine_alarms(self, tmp_path):
        store = _with_night_from(tmp_path, EPYC, **{"exactly-once-postgres": {
            "verdict": {"holds": False, "status": "FAIL", "observed": "at-least-once",
                        "detail": "FAILED: exactly-once did not hold"},
            "events": {"duplicated": 603}}})
        proc = run_cli("history", "check", str(store.path))
        assert proc.returncode == 1, proc.stdout
        assert "ALARM FAIL: bench (quick) exactly-once-postgres on every machine" in proc.stdout

    def test_an_unknown_night_cannot_be_judged(self, tmp_path):
        """A night whose verdict is UNKNOWN (a noop sink, a fault missed at the cap): never a
        pass; exit 4, as `run` exits, and said on the first line."""
        store = _history(tmp_path, [400.0] * 6, status=lambda k: "UNKNOWN" if k == 5 else "PASS")
        checked = check.check(store)
        assert checked.exit_code == 4 and not checked.alarms
        assert check.render(checked).startswith("CANNOT JUDGE: 1 night(s) with an UNKNOWN verdict")

    def test_a_fail_among_the_newest_nights_alarms_until_it_is_older(self, tmp_path):
        store = _history(tmp_path, [400.0] * 12, holds=lambda k: k != 10)
        checked = check.check(store)
        fails = [f for f in checked.alarms if isinstance(f, correctness.Flip)]
        assert [(f.what, f.night, f.fail) for f in fails] == [("verdict", 10, True)]
        (tmp_path / "later").mkdir()
        assert not check.check(_history(tmp_path / "later", [400.0] * 14, holds=lambda k: k != 10)).alarms

    def test_a_fail_leaves_the_window_only_through_a_newer_night_of_its_case(self, tmp_path):
        """eo FAILs on night 1; the next three runs of the scenario ran `other` alone (`run --case
        other`; an aborted run that never reached eo is the same). The FAIL alarms still (it left
        the newest three runs, and `check` said OK, exit 0); once eo has run again and passed,
        and three runs are newer than the FAIL, it leaves."""
        store = Store(tmp_path / "s")
        fail = _case("eo", 400, 5000, holds=False, duplicated=603, observed="at-least-once")
        nights = [[_case("eo", 400, 5000), _case("other", 400, 5000)], [fail, _case("other", 400, 5000)],
                  *([[_case("other", 400, 5000)]] * 3)]
        for k, cases in enumerate(nights):
            store.add(_night(tmp_path, k, cases, commit=f"c{k}"))
        checked = check.check(store)
        assert checked.exit_code == 1, check.render(checked)
        assert [(f.series.case, f.night, f.fail) for f in checked.failures] == [("eo", 1, True)]
        assert check.render(checked).startswith("ALARM: 1 FAIL(s)")
        store.add(_night(tmp_path, 5, [_case("eo", 400, 5000), _case("other", 400, 5000)], commit="c5"))
        checked = check.check(store)
        assert not checked.failures and checked.exit_code == 0, check.render(checked)

    def test_counts_the_guarantee_forbids_alarm_whatever_the_verdict_says(self, tmp_path):
        """37 duplicated under exactly-once, in a summary whose verdict says it held: reported
        and alarmed once, as a verdict with counts its guarantee forbids."""
        store = _history(tmp_path, [400.0] * 8, duplicated=lambda k: 37 if k == 7 else 0)
        (every,) = [s for s in store.series() if s.machine is None]
        flips = correctness.flips(every)
        assert [(f.what, f.night) for f in flips] == [("verdict", 7)]
        assert flips[0].after == "PASS (37 duplicated), counts its guarantee forbids"
        assert flips[0] in check.check(store).alarms

    def test_a_fault_no_longer_seen_and_an_old_flip_that_does_not_page(self, tmp_path):
        store = _history(tmp_path, [400.0] * 10, seen=lambda k: k != 3)
        checked = check.check(store)
        assert [(f.what, f.night) for f in checked.flips] == [("faults seen", 3)]
        assert not checked.alarms   # night 4 of 10: not among the newest


@pytest.mark.unit
class TestTrend:
    def test_the_top_answers_what_regressed(self, tmp_path):
        """Before any chart: the answer, each case's newest night with its verdict, then each
        alarm with its figure, size, night and commits, linking to its chart."""
        store = _history(tmp_path, [400.0] * 30 + [380.0] * 3)
        page = trend.write(store, tmp_path / "trend.html").read_text()
        top = page[:page.index("<h2>Series</h2>")]
        assert "<title>bench (quick): nightly history</title>" in page
        assert 'class="answer ALARM"' in top and '<table class="newest">' in top
        (link,) = [x for x in top.split('<li class="worse">')[1:]]
        anchor = link.split('href="#')[1].split('"')[0]
        assert f'id="{anchor}"' in page and "processed (events/s) -" in link and "commits c029..c030" in link

    def test_fails_come_first(self, tmp_path):
        store = Store(tmp_path / "s")
        failing = _case("zz", 400, 5000, holds=False, duplicated=3, observed="at-least-once")
        store.add(_night(tmp_path, 0, [_case("aa", 400, 5000), failing], commit="c0"))
        page = trend.write(store, tmp_path / "trend.html").read_text()
        newest = page[page.index('<table class="newest">'):]
        assert newest.index('<tr class="FAIL">') < newest.index('<tr class="PASS">')
        assert page.index("ALARM") < page.index("<h2>Series</h2>")

    def test_the_charts_say_units_once_colour_the_direction_and_label_the_newest_night(self, tmp_path):
        store = _history(tmp_path, [400.0] * 12 + [440.0] * 10 + [380.0] * 3,
                         spark=lambda k: "4.2.0" if k < 20 else "4.2.1")
        page = trend.write(store, tmp_path / "trend.html").read_text()
        assert "processed (events/s)" in page
        assert "(events/s) (events/s)" not in page and "ms (ms)" not in page
        assert 'class="better"' in page and 'class="worse"' in page and 'class="version"' in page
        newest = store.series()[0].nights[-1].date
        chart = page[page.index("processed (events/s)"):]
        chart = chart[:chart.index("</svg>")]
        assert f">{newest}</text>" in chart
        xs = {float(x) for x in __import__("re").findall(r'<circle class="night" cx="([\d.]+)"', chart)}
        line = __import__("re").search(r'<line class="better" x1="([\d.]+)"', chart)
        assert line and float(line.group(1)) in xs   # through its night, not between two

    def test_an_all_zero_figure_is_said_not_drawn_with_half_events(self, tmp_path):
        from harness.report import svg

        assert svg.nice_ticks(0.0, 1.0, 4, integer=True) == [0.0, 1.0]
        assert ">0.5</text>" not in svg.nights_chart("max lag (records)", [0, 0, 1], labels=["a", "b", "c"],
                                                     integer=True)
        store = _history(tmp_path, [400.0] * 6, max_lag=lambda k: 0)
        page = trend.write(store, tmp_path / "t.html").read_text()
        assert ">0.5</text>" not in page and "0 every night: max lag" in page


_PROBE = """<script>
addEventListener("load", () => {
  const drawn = [...document.querySelectorAll("svg.chart")]
    .filter(s => s.getBoundingClientRect().width > 100);
  document.body.setAttribute("data-probe", JSON.stringify({charts: drawn.length,
    nights: document.querySelectorAll("svg.chart circle.night").length,
    rows: document.querySelectorAll("table.correctness tr").length,
    answerTop: document.querySelector(".answer").getBoundingClientRect().top}));
});
</script></body>"""


@pytest.mark.integration   # needs Debian's chromium, as report.html's own check does
def test_the_trend_page_renders_in_headless_chromium(tmp_path):
    """Chromium lays the trend page out: every chart at its size, a point a night in each, the
    correctness table's rows, and the answer within the first screen."""
    import re
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
    assert laid_out["nights"] == 15 * page.count('class="chart"') and laid_out["answerTop"] < 300
