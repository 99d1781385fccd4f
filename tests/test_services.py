"""Services against the real processes: Kafka broker, PostgreSQL, Spark driver.

Setup: the session's broker and server (conftest.py); each test that must kill or
pause starts a service of its own so the shared ones stay healthy.
"""

import os
import signal

import psutil
import pytest

from harness import procs
from harness.services.base import Registry, reap_leftovers
from harness.services.kafka import KafkaBroker, cluster_answers
from harness.services.postgres import PostgresServer, server_answers
from harness.services.spark import SparkDriver, spark_home
from tests.helpers import driver_config
from workloads.wait import wait_until

pytestmark = pytest.mark.integration


def _all_dead(pids):
    return not [p for p in pids if procs.alive(p)]


def _statuses(pids):
    return {psutil.Process(p).status() for p in pids if procs.alive(p)}


class TestKafkaBroker:
    def test_the_broker_answers_metadata_requests(self, kafka):
        """Ready means a metadata request to bootstrap_servers succeeds."""
        assert cluster_answers(kafka.bootstrap_servers)

    def test_pause_freezes_the_jvm_and_resume_thaws_it(self, tmp_path):
        """SIGSTOP leaves every process of the broker stopped; SIGCONT makes it answer again."""
        with Registry() as reg:
            broker = KafkaBroker(tmp_path, reg).start().wait_ready()
            broker.pause()
            wait_until(lambda: _statuses(broker.pids()) == {psutil.STATUS_STOPPED}, 5)
            broker.resume()
            wait_until(lambda: cluster_answers(broker.bootstrap_servers), 30)

    def test_kill_leaves_no_process(self, tmp_path):
        """SIGKILL takes the broker down at once; none of its pids survives."""
        broker = KafkaBroker(tmp_path).start().wait_ready()
        pids = broker.snapshot_pids()
        broker.kill()
        assert _all_dead(pids), f"alive after kill: {pids}"


class TestPostgresServer:
    def test_the_server_answers_queries(self, postgres):
        """Ready means a connection runs SELECT 1."""
        assert server_answers(postgres.url)

    def test_stop_ends_every_backend_process(self, tmp_path):
        """The postmaster and its children (checkpointer, walwriter, ...) all exit."""
        server = PostgresServer(tmp_path).start().wait_ready()
        pids = server.snapshot_pids()
        assert len(pids) > 1, "postgres forks its auxiliary processes"
        server.stop()
        assert _all_dead(pids)


@pytest.fixture(scope="module")
def driver(kafka, postgres, tmp_path_factory):
    """One Spark driver (the windowed count, on an empty topic of its own) shared by the
    driver tests, which run in order: kill an executor, pause, then stop."""
    from workloads.generator import create_topic

    tmp_path = tmp_path_factory.mktemp("driver")
    topic = f"svc-{os.getpid()}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    config = driver_config(kafka, postgres, topic, tmp_path / "checkpoint")
    with Registry() as reg:
        yield SparkDriver(tmp_path, config, reg).start().wait_ready()


class TestPostgresFromADeepDirectory:
    def test_a_server_whose_workdir_is_deep_starts(self, tmp_path):
        """A workdir 200 characters deep (a CI workspace): the Unix socket would not fit
        there (107 bytes), so it lives in a short private directory, removed at stop."""
        workdir = tmp_path / ("ci-workspace-" * 12) / "postgres"
        with Registry() as reg:
            server = PostgresServer(workdir, reg).start().wait_ready()
            assert server_answers(server.url) and len(str(server.socketdir)) < 40
            socketdir = server.socketdir
        assert not socketdir.exists()


@pytest.mark.minutes(0.7)
class TestSparkDriver:
    def test_executors_are_separate_processes_that_can_be_killed(self, driver):
        """local-cluster[2,...] runs two executor JVMs; a killed one dies and Spark replaces it."""
        executors = wait_until(lambda: len(driver.executor_pids()) == 2 and driver.executor_pids(), 60)
        assert driver.pid not in executors
        os.kill(executors[0], signal.SIGKILL)
        wait_until(lambda: not procs.alive(executors[0]), 10)
        replaced = wait_until(lambda: set(driver.executor_pids()) - set(executors), 90,
                              err_msg="Spark did not launch a replacement executor")
        assert replaced and driver.running

    def test_pause_stops_driver_and_executors(self, driver):
        """Pausing the driver service freezes the Python driver, its JVM and the executors."""
        pids = driver.pids()
        driver.pause()
        wait_until(lambda: _statuses(pids) == {psutil.STATUS_STOPPED}, 5,
                   err_msg=lambda: f"not all stopped: {_statuses(pids)}")
        driver.resume()
        wait_until(lambda: psutil.STATUS_STOPPED not in _statuses(pids), 5)

    def test_request_stop_ends_the_whole_process_tree(self, driver):
        """The STOP file ends the query; no driver, JVM or executor process survives."""
        pids = driver.snapshot_pids()
        app = driver.app_id()
        # Spark's scratch (block managers, executors' directories) is in the harness's own
        # directory, not loose in /tmp, and goes with the driver
        scratch = driver.local_dirs
        assert [p.name for d in scratch for p in d.glob("blockmgr-*")], scratch
        assert [p.name for d in scratch for p in d.glob("spark-*/executor-*")], scratch
        # the executors' JVMs unpack their native libraries there too (java.io.tmpdir)
        for pid in driver.executor_pids():
            assert f"-Djava.io.tmpdir={scratch[0]}" in psutil.Process(pid).environ()["JAVA_TOOL_OPTIONS"]
        driver.request_stop()
        assert _all_dead(pids), f"alive: {[p for p in pids if procs.alive(p)]}"
        assert not [d for d in scratch if d.exists()]
        assert driver.status()["state"] == "stopped"
        # the executors' logs are the case's, not left in Spark's home among copied jars
        kept = driver.workdir / "executor-logs" / app
        assert {"0", "1"} <= {p.name for p in kept.iterdir()}, list(kept.iterdir())
        assert (kept / "0" / "stderr").stat().st_size > 0 and not list(kept.rglob("*.jar"))
        assert not (spark_home() / "work" / app).exists()


class TestReapLeftovers:
    def test_a_crashed_runs_services_are_reaped_by_the_next_run(self, tmp_path):
        """A service whose owner died without stopping it is killed by the next Registry."""
        import subprocess
        import sys
        import textwrap

        script = textwrap.dedent(f"""
            import os
            from pathlib import Path
            from harness.services.postgres import PostgresServer
            server = PostgresServer(Path({str(tmp_path)!r})).start().wait_ready()
            print(server.pid, flush=True)
            os._exit(0)  # a crash: no stop, no cleanup
        """)
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                             timeout=60, check=True)
        orphan = int(out.stdout.split()[-1])
        assert procs.alive(orphan), "the crashed run's server should still be running"
        assert "postgres" in [r["name"] for r in reap_leftovers()]
        wait_until(lambda: not procs.group_members(orphan), 10, err_msg="orphan survived reaping")


class TestWatchdog:
    def test_a_killed_harness_s_services_are_stopped_at_once(self, tmp_path):
        """The harness process is SIGKILLed with its PostgreSQL server running: its watchdog
        stops the server within seconds, with no next run to reap it. (A quick bench
        interrupted under tox left its broker, server and Spark processes running: tox's
        SIGTERM killed pytest, whose subprocess.run SIGKILLed the harness.) A harness that
        stops its services itself leaves no watchdog behind."""
        import subprocess
        import sys
        import textwrap

        script = textwrap.dedent(f"""
            import os, signal
            from pathlib import Path
            from harness.services.base import Registry
            from harness.services.postgres import PostgresServer
            with Registry() as reg:
                server = PostgresServer(Path({str(tmp_path)!r}), reg).start().wait_ready()
                print(server.pid, reg.watchdog.pid, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
        """)
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                             timeout=60)
        assert out.returncode == -signal.SIGKILL, out.stderr[-2000:]
        server, watchdog = map(int, out.stdout.split()[-2:])
        wait_until(lambda: not procs.group_members(server) and not procs.alive(server), 20,
                   err_msg="the killed harness's server survived its watchdog")
        wait_until(lambda: not procs.alive(watchdog), 10, err_msg="the watchdog did not exit")

        with Registry() as reg:
            watchdog = reg.watchdog.pid
        assert not procs.alive(watchdog)


class TestSparkDriverFailure:
    def test_a_driver_that_fails_before_the_first_poll_names_its_error(self, tmp_path):
        """The driver wrote status 'failed' and exited at once: wait_ready reports its error,
        not only an exit code (the race the e2e failing-run test can land on either side of)."""
        import sys

        from harness.errors import ServiceError

        class FailingDriver(SparkDriver):
            def command(self):
                script = ("import json, sys; json.dump({'state': 'failed', 'error': 'sink unreachable'}, "
                          f"open({str(self.status_path)!r}, 'w')); sys.exit(1)")
                return [sys.executable, "-c", script]

        fake = type("Kafka", (), {"bootstrap_servers": "127.0.0.1:1"})()
        with Registry() as reg:   # which reaps it, and its scratch with it
            driver = FailingDriver(tmp_path, driver_config(fake, None, "t", tmp_path / "cp"), reg).start()
            driver.process.wait(30)
            with pytest.raises(ServiceError, match="Spark driver failed: sink unreachable"):
                driver.wait_ready(10)
        assert not [d for d in driver.local_dirs if d.exists()]
