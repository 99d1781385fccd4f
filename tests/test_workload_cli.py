"""`python -m workloads generate` as a user runs it: options, errors, preview and sending."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from tests.helpers import REPO
from workloads.generator import cli, spec


def _generate(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "workloads", "generate", *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=timeout)


class TestHelp:
    def test_every_scenario_key_has_an_option_with_a_unit_or_choices(self):
        """The CLI and the [workload] table expose the same knobs, each documented."""
        table_keys = set(spec.TOP_KEYS) - {"rate", "keys", "delay", "time", "payload", "duplicates"}
        table_keys |= {f"rate.{k}" for k in spec._ALL_RATE_KEYS}
        table_keys |= {f"delay.{k}" for k in spec._ALL_DELAY_KEYS}
        table_keys |= {f"keys.{k}" for k in ("distribution", "count", "zipf_s", "hot_share", "hot_keys")}
        table_keys |= {f"time.{k}" for k in ("dilation", "clock_skew", "idle")}
        table_keys |= {f"payload.{k}" for k in ("format", "fields", "size", "users", "items")}
        table_keys |= {f"duplicates.{k}" for k in ("share", "after")}
        assert table_keys == {path for path, *_ in cli.KNOBS}
        text = _generate("--help").stdout
        for path, *_ in cli.KNOBS:
            assert cli.option(path) in text, path

    def test_help_is_fast_and_exits_0(self):
        """--help needs no Kafka and succeeds."""
        assert _generate("--help").returncode == 0


class TestBadOptions:
    @pytest.mark.parametrize("args, named", [
        (["--duration", "2s", "--rate-eps", "-5"], "--rate-eps"),
        (["--duration", "2s", "--keys-count", "many"], "--keys-count"),
        (["--duration", "2s", "--rate-eps", "10", "--delay-distribution", "weibull"], "--delay-distribution"),
        (["--duration", "2s", "--rate-period", "5s"], "--rate-period"),
        (["--duration", "2s", "--time-idle", "one:2s:1s"], "--time-idle"),
        (["--duration", "2s", "--rate-eps", "10", "--delay-distribution", "uniform"], "--delay-max"),
        (["--duration", "5", "--rate-eps", "10"], "--duration"),
        (["--rate-eps", "10"], "--duration"),
        (["--duration", "2s", "--rate-eps", "2000000"], "1,000,000"),
        (["--duration", "2s", "--rate-eps", "10", "--payload-fields", "user,colour"], "--payload-fields"),
        (["--duration", "2s"], "--rate-eps"),
    ])
    def test_a_bad_option_exits_2_naming_it(self, args, named, tmp_path):
        """The message names the option (not the TOML path) and writes nothing."""
        out = tmp_path / "x.parquet"
        proc = _generate(*args, "--output", str(out))
        assert proc.returncode == 2, proc.stderr
        assert named in proc.stderr and "workload." not in proc.stderr, proc.stderr
        assert not out.exists()

    def test_no_destination_is_an_error(self):
        """Neither Kafka nor a file: the fix names both options."""
        proc = _generate("--duration", "1s")
        assert proc.returncode == 2 and "--bootstrap-servers" in proc.stderr and "--output" in proc.stderr


class TestPreview:
    def test_the_same_seed_and_start_write_the_same_events(self, tmp_path):
        """--output --no-pace with a fixed --start-ms is reproducible, with JSON values."""
        args = ["--duration", "2s", "--rate-eps", "500", "--start-ms", "1000000", "--no-pace",
                "--delay-distribution", "lognormal", "--delay-median", "200ms", "--partitions", "3"]
        a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
        assert _generate(*args, "--output", str(a)).returncode == 0
        assert _generate(*args, "--output", str(b)).returncode == 0
        da, db = pd.read_parquet(a), pd.read_parquet(b)
        assert len(da) == 1000 and da.drop(columns="sent_ms").equals(db.drop(columns="sent_ms"))
        first = json.loads(da["value"][0])
        assert first["event_id"] == 0 and first["key"] == da["key"][0]

    def test_a_scenario_workload_can_be_previewed_with_overrides(self, tmp_path):
        """--scenario takes [workload] from a scenario file; options override its keys."""
        out = tmp_path / "s.parquet"
        smoke = REPO / "harness/scenario/scenarios/smoke.toml"
        proc = _generate("--scenario", str(smoke), "--duration", "1s",
                         "--no-pace", "--output", str(out))
        assert proc.returncode == 0, proc.stderr
        assert len(pd.read_parquet(out)) == 500


    def test_progress_into_a_pipe_is_whole_lines(self, tmp_path):
        """stderr is not a terminal: progress comes as whole lines, never carriage returns."""
        proc = _generate("--duration", "20s", "--rate-eps", "20000", "--no-pace",
                         "--output", str(tmp_path / "p.parquet"))
        assert proc.returncode == 0, proc.stderr
        assert "\r" not in proc.stderr and "written" in proc.stderr, proc.stderr[-500:]


class TestSend:
    def test_sending_writes_truth_and_a_report(self, kafka, tmp_path):
        """With --create-topic the CLI sends, prints rates and slip, and leaves report.json."""
        proc = _generate("--bootstrap-servers", kafka.bootstrap_servers, "--create-topic",
                         "--topic", "cli-send", "--duration", "2s", "--rate-eps", "1000",
                         "--truth-dir", str(tmp_path))
        assert proc.returncode == 0, proc.stderr
        assert "achieved" in proc.stdout and "slip" in proc.stdout and "to the last ack" in proc.stdout
        report = json.loads((tmp_path / "report.json").read_text())
        assert report["events"] == 2000 and report["failed"] == 0
        assert 0 < report["acked_s"] and report["acked_eps"] == report["events"] / report["acked_s"]
        assert len(pd.read_parquet(tmp_path / "truth")) == 2000
