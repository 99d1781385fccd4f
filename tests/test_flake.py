"""The flake lane's driver (benchmarks/flake.py, `tox -e flake`): each test's passes out of N,
a neighbour that never outlives the lane, and a selection run round after round."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from benchmarks import flake

pytestmark = pytest.mark.unit


def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.05)
    return False


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok" time="1"/>
<testcase classname="tests.test_a" name="test_flaky" time="1">{flaky}</testcase>
<testcase classname="tests.test_a" name="test_skipped" time="0"><skipped message="no"/></testcase>
</testsuite></testsuites>"""


class TestTally:
    def test_each_test_s_passes_out_of_the_rounds_the_least_passed_first(self, tmp_path):
        """Two rounds, one failing the flaky test: 2/2 and 1/2, the failure's round and first line."""
        tally = flake.Tally()
        for n, flaky in ((1, ""), (2, '<failure message="AssertionError: lost 3&#10;more">x</failure>')):
            path = tmp_path / f"r{n}.xml"
            path.write_text(JUNIT.format(flaky=flaky))
            tally.add(path, n)
        lines = tally.table()
        assert lines[0] == "  0/2   tests.test_a::test_skipped  (2 skipped)"
        assert lines[1] == "  1/2   tests.test_a::test_flaky"
        assert lines[2].strip() == "round 2: AssertionError: lost 3"
        assert lines[3] == "  2/2   tests.test_a::test_ok"
        assert tally.failures() == 1

    def test_an_error_counts_as_a_failure(self, tmp_path):
        path = tmp_path / "r.xml"
        path.write_text(JUNIT.format(flaky='<error message="fixture failed"/>'))
        tally = flake.Tally()
        tally.add(path, 1)
        assert tally.failed == {"tests.test_a::test_flaky": ["round 1: fixture failed"]}


class TestArguments:
    def test_no_selection_is_the_e2e_lane(self):
        args, selection = flake._parse([])
        assert (args.rounds, args.core, selection) == (3, 0, ["-m", "long_e2e", "tests"])

    def test_rounds_and_a_selection(self):
        args, selection = flake._parse(["--rounds", "2", "tests/test_x.py", "-k", "docs"])
        assert args.rounds == 2 and selection == ["tests/test_x.py", "-k", "docs"]

    @pytest.mark.parametrize("bad, said", [(["--rounds", "0"], "at least 1 round"),
                                           (["--core", "999"], "this machine has cores 0 to")])
    def test_bad_numbers_are_refused_with_the_fix(self, bad, said, capsys):
        with pytest.raises(SystemExit) as exc:
            flake._parse(bad)
        assert exc.value.code == 2 and said in capsys.readouterr().err


class TestNeighbour:
    def test_it_is_busy_on_its_core_and_gone_after_the_block(self):
        with flake.neighbour(0) as busy:
            proc = psutil.Process(busy.pid)
            assert proc.cpu_affinity() == [0]
            before = sum(proc.cpu_times()[:2])
            time.sleep(0.5)
            # it ran: on a loaded machine (two CI lanes side by side) it got 15 % of its core
            assert sum(proc.cpu_times()[:2]) > before
        assert _gone(busy.pid)

    def test_it_is_stopped_when_the_block_raises(self):
        with pytest.raises(RuntimeError), flake.neighbour(0) as busy:
            raise RuntimeError("a round crashed")
        assert _gone(busy.pid)

    def test_it_dies_with_a_lane_killed_outright(self, tmp_path):
        """SIGKILL to the lane runs no `finally`: the kernel ends the neighbour (PR_SET_PDEATHSIG)."""
        pid_file = tmp_path / "pid"
        lane = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            import time
            from pathlib import Path
            from benchmarks import flake
            with flake.neighbour(0) as busy:
                Path({str(pid_file)!r}).write_text(str(busy.pid))
                time.sleep(60)
            """)], cwd=flake.REPO)
        deadline = time.monotonic() + 10
        while not pid_file.exists():
            assert time.monotonic() < deadline and lane.poll() is None
            time.sleep(0.05)
        busy = int(pid_file.read_text())
        assert psutil.pid_exists(busy)
        lane.kill()
        lane.wait()
        assert _gone(busy), f"the neighbour (pid {busy}) outlived its lane"

    def test_ctrl_c_stops_the_lane_and_its_neighbour(self, tmp_path):
        """SIGINT to the lane's process group mid-round, as a terminal's Ctrl-C: exit 130, the
        neighbour gone; also when the lane was started with SIGINT ignored, as a script's
        background job is (two fresh-clone CI runs started so hung here before the lane
        installed its own handler)."""
        began = tmp_path / "began"
        (tmp_path / "test_slow.py").write_text(
            f"import time\nfrom pathlib import Path\n\ndef test_slow():\n"
            f"    Path({str(began)!r}).write_text('x')\n    time.sleep(60)\n")
        lane = subprocess.Popen([sys.executable, "-m", "benchmarks.flake", "--out", str(tmp_path / "out"),
                                 str(tmp_path / "test_slow.py")], cwd=flake.REPO, start_new_session=True,
                                stdout=subprocess.PIPE, text=True)
        line = ""
        while "neighbour: pid" not in line:
            line = lane.stdout.readline()
            assert line, "the lane ended before it started its neighbour"
        busy = int(line.split("pid ")[1].split()[0])
        # pytest is in its round once its test began (anchored to that, not to a sleep)
        deadline = time.monotonic() + 120
        while not began.exists():
            assert time.monotonic() < deadline and lane.poll() is None, "the round's test never began"
            time.sleep(0.1)
        os.killpg(lane.pid, signal.SIGINT)
        try:
            code = lane.wait(60)
        except subprocess.TimeoutExpired:
            tree = [(p.pid, p.name(), p.status()) for p in psutil.Process(lane.pid).children(recursive=True)]
            os.killpg(lane.pid, signal.SIGKILL)
            raise AssertionError(f"the lane outlived SIGINT by 60 s; its children: {tree}") from None
        assert code == 130
        assert _gone(busy)

    def test_a_lane_stopped_alone_stops_what_its_round_started(self, tmp_path):
        """SIGTERM to the lane alone (a CI job cancelled): pytest's whole group gets SIGINT, so a
        process a test started (here a sleeping Python, standing for a `harness run` and its services)
        stops too. Before, the lane killed pytest alone, and a test's `harness run` went on."""
        child = tmp_path / "child"
        (tmp_path / "test_child.py").write_text(
            "import subprocess, sys, time\nfrom pathlib import Path\n\ndef test_child():\n"
            "    proc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
            f"    Path({str(child)!r}).write_text(str(proc.pid))\n    time.sleep(300)\n")
        lane = subprocess.Popen([sys.executable, "-m", "benchmarks.flake", "--out", str(tmp_path / "out"),
                                 str(tmp_path / "test_child.py")], cwd=flake.REPO, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while not (child.exists() and child.read_text()):
            assert time.monotonic() < deadline and lane.poll() is None, (
                f"the round's test never began: {lane.stdout.read() if lane.poll() is not None else ''}")
            time.sleep(0.1)
        sleeper = int(child.read_text())
        lane.send_signal(signal.SIGTERM)
        try:
            assert lane.wait(60) == 130
            assert _gone(sleeper), f"the test's child (pid {sleeper}) outlived the lane"
        finally:   # what is left, once judged
            with contextlib.suppress(ProcessLookupError):
                os.killpg(lane.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(sleeper, signal.SIGKILL)


def test_a_selection_runs_round_after_round(tmp_path, capsys):
    """Two rounds of a file with a passing and a failing test: each one's passes out of 2, exit 1."""
    (tmp_path / "test_two.py").write_text("def test_passes():\n    pass\n\n\n"
                                          "def test_fails():\n    assert 1 == 2, 'planted'\n")
    code = flake.main(["--rounds", "2", "--out", str(tmp_path / "out"), str(tmp_path / "test_two.py")])
    out = capsys.readouterr().out
    assert code == 1, out
    # the junit id's dotted prefix is the file's path from pytest's rootdir: under a clone at
    # another depth than /tmp's it is another one (CI's fresh clone), so only its end is asserted
    assert re.search(r"^  2/2   \S*\btest_two::test_passes$", out, re.M), out
    assert re.search(r"^  0/2   \S*\btest_two::test_fails$", out, re.M), out
    assert "2 failure(s) in 2 round(s) of 2 test(s)" in out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["round-1.xml", "round-2.xml"]
