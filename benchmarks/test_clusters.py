"""Clusters the harness did not start: a Spark standalone cluster and a 3-broker Kafka started
apart (as an operator would run them) and handed to a scenario as existing ones.

Faults that need processes of the harness's own are refused before anything starts: the
scenario's [services] alone decide it, so those tests name clusters nobody runs and take no
time, in every bench. The run on real clusters: a registry of this test's own starts Spark's
Master and two Workers from pyspark's jars and a Kafka cluster of 3 KRaft brokers; PostgreSQL
is the session's. A case runs under faults that go through an API (kill-executor via Spark's
API, kafka-partitions; fail-batch and the driver's restarts are the same code as on
local-cluster, run in tests/test_faults_e2e.py), its verdict holds, and the run leaves nothing
of its own. That run took 88 s of the quick bench's 330 (20 s to start the clusters, 61 s to
run, 7 s to stop them), so it runs in the full bench (tox -e bench without --quick, the
nightly's default), not with --quick; its 75 s had gone from tox -e test to the bench before."""

import json

import pytest

from harness.errors import ScenarioError
from harness.scenario import load
from tests.helpers import assert_nothing_left, run_cli

pytestmark = pytest.mark.integration

SCENARIO = """
name = "existing"
drain_timeout = "240s"

[services.kafka]
bootstrap_servers = "{bootstrap}"

[services.spark]
master = "{master}"
conf = {{ "spark.cores.max" = "2", "spark.executor.cores" = "1", "spark.executor.memory" = "768m" }}

[services.postgres]
url = "{postgres}"

[workload]
partitions = 2
duration = "18s"
seed = 9

[workload.rate]
eps = 200

[pipeline]
window = "2s"
watermark = "1s"

[[cases]]
name = "eo"
guarantee = "exactly-once"
"""

API_FAULTS = """
[[faults]]
kind = "kill-executor"
at = "2s"
target = "executor:0"
via = "spark-api"

[[faults]]
kind = "kafka-partitions"
at = "5s"
count = 1

"""


# clusters the refusals name: no process answers there, and none needs to
ELSEWHERE = {"bootstrap": "broker1:9092,broker2:9092,broker3:9092", "master": "spark://spark-master:7077",
             "postgres": "postgresql://harness@db:5432/bench"}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory, postgres):
    from harness.services.base import Registry
    from harness.services.kafka import KafkaCluster
    from harness.services.spark_cluster import SparkStandalone

    root = tmp_path_factory.mktemp("operator")
    with Registry() as registry:
        kafka = KafkaCluster(root / "kafka", registry, brokers=3).start()
        spark = SparkStandalone(root / "spark", registry, workers=2, cores=2, memory="1g").start()
        # PostgreSQL is the session's: a server apart from the run either way
        yield {"bootstrap": kafka.bootstrap_servers, "master": spark.url, "postgres": postgres.url}


def _scenario(tmp_path, clusters, faults: str):
    path = tmp_path / "existing.toml"
    path.write_text(SCENARIO.format(**clusters) + faults)
    return path


@pytest.mark.parametrize("fault, need", [
    ('kind = "pause"\nat = "2s"\ntarget = "broker"\nduration = "1s"', "own-kafka"),
    ('kind = "kill-executor"\nat = "2s"\ntarget = "executor:0"', "own-executors"),
    ('kind = "kill-worker"\nat = "2s"\ntarget = "worker:0"', "own-standalone"),
    ('kind = "network"\nat = "2s"\ntarget = "kafka"\nlatency = "100ms"\nduration = "1s"', "own-kafka"),
])
def test_a_fault_that_needs_the_harness_s_own_processes_is_refused_with_the_reason(tmp_path, fault, need):
    with pytest.raises(ScenarioError, match=need):
        load(_scenario(tmp_path, ELSEWHERE, "\n[[faults]]\n" + fault + "\n"))


@pytest.mark.e2e_variation   # 88 s: the full bench runs it, not --quick
def test_a_case_runs_on_them_under_the_faults_that_go_through_an_api(tmp_path, clusters):
    run_dir = tmp_path / "run"
    proc = run_cli("run", str(_scenario(tmp_path, clusters, API_FAULTS)), "--out", str(run_dir))
    summary = json.loads((run_dir / "summary.json").read_text())
    (case,) = summary["cases"]
    missed = [f"{f['kind']}: {f.get('landed_detail') or f['detail']}" for f in case["faults"]
              if not (f["observed"] and f["landed"])]
    assert not missed, missed
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert case["verdict"]["holds"] and case["verdict"]["observed"] == "exactly-once", case["verdict"]
    assert summary["environment"]["spark_master"] == clusters["master"]
    # the run started its driver and nothing else (its executors are the cluster's workers'): how
    # many pids its process tree had when recorded varies (2 or 3 here), so at least one, and
    # every one of them gone
    pids = json.loads((run_dir / "pids.json").read_text())
    assert pids and all(name.startswith("spark-driver") for name in pids), pids
    assert_nothing_left(run_dir, at_least=1)   # of the run's own: the clusters are this test's
