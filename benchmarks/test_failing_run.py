"""A run whose sink cannot be reached fails cleanly: exit 2 naming the driver's failure, the
run's status `error`, nothing left running. In the full tox -e bench, not with --quick (its 16 s
left tox -e test, whose ten minutes went to the Nexmark and storage faults' end-to-end tests;
the quick bench is the headline scenario and the micro-benchmarks, 300 s at most, issue 48).

Setup: nothing; the run starts its own Kafka broker and Spark driver, with a PostgreSQL URL
that nothing answers.
"""

import json

import pytest

from tests.helpers import REPO, assert_nothing_left, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.e2e_variation]

SMOKE = REPO / "harness" / "scenario" / "scenarios" / "smoke.toml"
_assert_nothing_left = assert_nothing_left


class TestFailingRun:
    def test_a_sink_that_cannot_be_reached_fails_cleanly(self, tmp_path):
        """A Postgres URL with nothing behind it: exit 2 naming the driver failure, nothing left."""
        scenario = tmp_path / "broken.toml"
        unreachable = '[services.postgres]\nurl = "postgresql://harness@127.0.0.1:1/postgres"\n\n'
        text = SMOKE.read_text()
        assert "\n[workload]\n" in text
        scenario.write_text(text.replace("\n[workload]\n", "\n" + unreachable + "[workload]\n", 1))
        run_dir = tmp_path / "run"
        proc = run_cli("run", str(scenario), "--quick", "--out", str(run_dir), timeout=300)
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert "Spark driver failed" in proc.stderr
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "error"
        _assert_nothing_left(run_dir)
