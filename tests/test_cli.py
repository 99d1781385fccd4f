"""The CLI: bad input exits 2 with a message naming the field and starts nothing; `run --case`."""

import pytest

from tests.helpers import MINIMAL_SCENARIO as GOOD
from tests.helpers import REPO, run_cli


def _bad(tmp_path, old: str, new: str):
    assert old in GOOD
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace(old, new))
    return path


BAD = {
    "unknown key": ('eps = 10', 'eps = 10\nrat_eps = 3', "workload.rate.rat_eps"),
    "negative rate": ('eps = 10', 'eps = -5', "workload.rate.eps"),
    "window shorter than slide": ('window = "5s"', 'window = "2s"\nslide = "5s"', "pipeline.window"),
    "unknown guarantee": ('"exactly-once"', '"exactly-twice"', "cases"),
}


class TestBadScenarios:
    @pytest.mark.parametrize("what", BAD)
    def test_a_bad_scenario_exits_2_naming_the_field_and_starts_nothing(self, what, tmp_path):
        """Validation happens before any service starts; no run directory is made."""
        old, new, field = BAD[what]
        out = tmp_path / "run"
        proc = run_cli("run", str(_bad(tmp_path, old, new)), "--out", str(out), timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert field in proc.stderr and "error:" in proc.stderr
        assert not out.exists()  # the run directory comes before any service

    def test_a_missing_scenario_file_exits_2_naming_the_path(self, tmp_path):
        """A typo in the path is a user error with the path in the message."""
        proc = run_cli("run", str(tmp_path / "nope.toml"), timeout=60)
        assert proc.returncode == 2 and "nope.toml" in proc.stderr

    def test_an_unknown_guarantee_lists_the_three_known_ones(self, tmp_path):
        """The fix for a misspelt guarantee is one of three words: the message gives them."""
        proc = run_cli("run", str(_bad(tmp_path, '"exactly-once"', '"exactly-twice"')), timeout=60)
        assert all(g in proc.stderr for g in ("at-most-once", "at-least-once", "exactly-once"))


class TestHelp:
    def test_help_is_fast_and_names_the_commands(self):
        """`--help` imports neither pyspark nor a Kafka client, and lists run and fetch-jvm."""
        proc = run_cli("--help", timeout=30)
        assert proc.returncode == 0 and "run" in proc.stdout and "fetch-jvm" in proc.stdout


class TestBrokenEnvironment:
    def test_a_missing_java_exits_2_naming_the_fix_and_writes_nothing(self, tmp_path):
        """Without java on PATH the run stops before any service or run directory exists."""
        out = tmp_path / "run"
        proc = run_cli("run", "workloads/scenarios/smoke.toml", "--out", str(out),
                       env={"PATH": str(tmp_path)}, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "`java` was not found" in proc.stderr and "JDK" in proc.stderr
        assert not out.exists()


class TestBadOut:
    def test_an_out_that_is_a_file_exits_2_with_a_message(self, tmp_path):
        """--out naming an existing file: exit 2 and a sentence, not a traceback."""
        taken = tmp_path / "taken"
        taken.write_text("x")
        proc = run_cli("run", "harness/scenario/scenarios/smoke.toml", "--out", str(taken), timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "is a file" in proc.stderr and "Traceback" not in proc.stderr

    def test_an_out_below_a_file_exits_2_with_a_message(self, tmp_path):
        """--out that cannot be created (a file in its path): exit 2 naming the directory."""
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "run"
        proc = run_cli("run", "harness/scenario/scenarios/smoke.toml", "--out", str(out), timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "cannot create the run directory" in proc.stderr and "Traceback" not in proc.stderr


class TestSustain:
    @pytest.mark.parametrize("args, words", [
        (["--case", "nope"], "--case nope"),
        (["--min-eps", "500", "--max-eps", "100"], "the range is empty"),
        (["--p99", "5"], "--p99"),
    ])
    def test_bad_search_arguments_exit_2_and_start_nothing(self, tmp_path, args, words):
        out = tmp_path / "run"
        proc = run_cli("sustain", "harness/scenario/scenarios/smoke.toml", "--out", str(out), *args,
                       timeout=60)
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr
        assert not out.exists()


class TestFullDisk:
    def test_a_full_disk_exits_2_naming_the_file_and_the_fix(self, tmp_path, monkeypatch, capsys):
        """ENOSPC mid-run is the machine, not a bug: exit 2 (not 3's "internal error" and a
        traceback), naming the file it could not write, what is free where the run writes,
        and what to do."""
        import argparse
        import errno

        from harness import cli

        def full(args):
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "truth.parquet"))

        monkeypatch.setattr(cli, "_run", full)
        rc = cli._command(argparse.Namespace(command="run", out=tmp_path / "run" / "deep"))
        err = capsys.readouterr().err
        assert rc == 2, err
        assert "no space left" in err and "truth.parquet" in err and "GiB free under" in err
        assert "fix:" in err and "Traceback" not in err and "internal error" not in err

    def test_any_other_os_error_is_still_an_internal_error(self, monkeypatch, capsys):
        import argparse
        import errno

        from harness import cli

        def broken(args):
            raise OSError(errno.EBADF, "Bad file descriptor")

        monkeypatch.setattr(cli, "_run", broken)
        assert cli._command(argparse.Namespace(command="run", out=None)) == 3
        assert "internal error" in capsys.readouterr().err


BENCH = "harness/scenario/scenarios/bench.toml"


class TestRunCase:
    """`python -m harness run --case NAME` (may be given again), as hunt and sustain take it:
    one Nexmark query without copying the scenario."""

    def test_the_named_cases_are_kept_in_the_scenario_s_order(self):
        from harness import scenario
        from harness.api import only_cases

        loaded = scenario.load(REPO / BENCH)
        narrowed = only_cases(loaded, ["at-most-once-postgres", "exactly-once-postgres"])
        assert [c.name for c in narrowed.cases] == ["exactly-once-postgres", "at-most-once-postgres"]
        assert narrowed.repeated(2).cases[1].name == "at-most-once-postgres-r1"

    def test_an_unknown_case_names_the_cases_there_are_and_the_closest(self):
        from harness import scenario
        from harness.api import only_cases
        from harness.errors import ScenarioError

        with pytest.raises(ScenarioError) as info:
            only_cases(scenario.load(REPO / BENCH), ["exactly-once-postgre"], "--case")
        assert "--case 'exactly-once-postgre'" in str(info.value)
        assert "at-least-once-postgres" in str(info.value)
        assert "did you mean 'exactly-once-postgres'?" in info.value.fix

    def test_the_cli_exits_2_on_an_unknown_case_and_starts_nothing(self, tmp_path):
        out = tmp_path / "run"
        proc = run_cli("run", BENCH, "--case", "exactly-once-postgres", "--case", "q5", "--out", str(out),
                       timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "--case 'q5'" in proc.stderr and "exactly-once-postgres, at-least-once-postgres" in proc.stderr
        assert not out.exists()
