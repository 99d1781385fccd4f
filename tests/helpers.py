"""Running the CLI as a user does, and proving that it left nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# the smallest valid scenario; tests edit one line of it to make each mistake
MINIMAL_SCENARIO = """
name = "t"

[workload]
duration = "1s"

[workload.rate]
eps = 10

[pipeline]
window = "5s"
watermark = "1s"

[[cases]]
name = "c"
guarantee = "exactly-once"

[quick.rate]
eps = 5
"""


def harness_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness", *args]


def run_cli(*args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m harness ARGS`; `env` entries override the inherited environment."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(harness_cmd(*args), capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=timeout)


def run_scenario(tmp_path: Path, name: str) -> tuple[Path, dict, str]:
    """`python -m harness run tests/scenarios/<name>.toml` into `tmp_path/<name>`: the run
    directory, its summary.json and the end of what the run printed (for a failing assertion)."""
    run_dir = tmp_path / name
    proc = run_cli("run", str(REPO / "tests" / "scenarios" / f"{name}.toml"), "--out", str(run_dir))
    output = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (run_dir / "summary.json").exists(), output
    return run_dir, json.loads((run_dir / "summary.json").read_text()), output


def processes_of_run(run_id: str) -> list[str]:
    """Live processes carrying the run's HARNESS_RUN_ID in their environment: every
    process the run started inherits it, however deep in the tree."""
    from harness import procs

    return [procs.describe(p) for p in procs.of_run(run_id)]


def assert_nothing_left(run_dir: Path, at_least: int = 3) -> None:
    """No pid the run recorded is alive, none is stopped, and no process carries the run's id.
    `at_least`: the pids the run must have recorded (its broker, server and driver: 3; a run on
    existing clusters starts its driver only)."""
    import json

    pids = json.loads((run_dir / "pids.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    ended = _epoch(summary.get("ended_at"))
    alive = {name: [p for p in ps if _left_by_run(p, ended)] for name, ps in pids.items()}
    assert not any(alive.values()), f"still alive by pid: {alive}"
    assert sum(map(len, pids.values())) >= at_least, f"too few pids recorded: {pids}"
    left = processes_of_run(summary["run_id"])
    assert not left, "still alive by process tree:\n" + "\n".join(left)


def _left_by_run(pid: int, ended: float | None) -> bool:
    """Whether `pid` is alive and may be the run's: a process that started after the run had
    ended has the pid of one of its own again (another test's, on a busy machine), not its."""
    import psutil

    from harness import procs

    if not procs.alive(pid):
        return False
    try:
        started = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return False
    return ended is None or started < ended + 1   # ended_at is to the second


def _epoch(stamp) -> float | None:
    """summary.json's ended_at (ISO 8601) as seconds since the epoch; None when absent."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(stamp).timestamp() if stamp else None
    except (TypeError, ValueError):
        return None


def _environ(pid: int) -> str:
    return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").replace("\0", "\n")


def driver_config(kafka, postgres, topic: str, checkpoint: Path, table: str = "svc_sink"):
    """A DriverConfig for the tumbling count into Postgres, exactly-once."""
    from harness import jvm
    from workloads.pipelines import tumbling_count
    from workloads.pipelines.config import DriverConfig
    from workloads.sinks import SinkContext

    return DriverConfig(
        app_name="test-services", master="local-cluster[2,1,1024]",
        jars=[str(p) for p in jvm.spark_connector_jars()], bootstrap_servers=kafka.bootstrap_servers,
        topic=topic, checkpoint=str(checkpoint), pipeline="tumbling_count",
        build="workloads.pipelines.tumbling_count:build",
        params={"window_ms": 5000, "slide_ms": 5000, "watermark_ms": 1000}, trigger_ms=1000,
        sink="postgres", sink_context=SinkContext(
            name=table, guarantee="exactly-once", columns=dict(tumbling_count.COLUMNS),
            workdir=str(checkpoint.parent), postgres_url=postgres.url if postgres else None))


def html_table(page: str, table_id: str) -> list[dict[str, str]]:
    """The rows of report.html's table `table_id`, each a dict of its header -> the cell's text
    (tags stripped, entities kept as the page has them): a test reads a cell by its column."""
    import re

    start = page.index(f'<table id="{table_id}">')
    body = page[start:page.index("</table>", start)]
    headers = [re.sub("<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", body)]
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body)[1:]:
        cells = [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        rows.append(dict(zip(headers, cells, strict=True)))
    return rows
