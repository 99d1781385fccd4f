"""kafka-retention's deletion outlives a crash of the broker (a CI run's every_fault.toml: its
restart-broker SIGKILLed the lone broker 6 s after kafka-retention's delete-records, the broker
came back from its last log-start-offset-checkpoint, and the query read the records the checker
counted as deleted, which it then called unexpected).

Setup: a broker of the test's own (it is killed), one topic of 100 records in partition 0."""

import time

import pytest

from faults.kafka import START_OFFSET_CHECKPOINT, checkpointed_starts, deletion_durable
from harness.services.base import Registry
from harness.services.kafka import KafkaBroker
from workloads.generator.run import create_topic
from workloads.kafka_admin import admin_client


def _earliest(bootstrap: str, topic: str) -> int:
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    with admin_client(bootstrap) as admin:
        found = admin.list_partition_offsets({TopicPartition(topic, 0): OffsetSpec.EARLIEST})
    return int(next(iter(found.values())).offset)


@pytest.mark.integration
@pytest.mark.minutes(0.8)
def test_records_deleted_and_written_down_stay_deleted_after_a_crash(tmp_path):
    from kafka import KafkaProducer, TopicPartition

    with Registry() as registry:
        broker = KafkaBroker(tmp_path / "kafka", registry).start().wait_ready()
        create_topic(broker.bootstrap_servers, "t", 1)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        for i in range(100):
            producer.send("t", str(i).encode(), partition=0)
        producer.flush()
        producer.close()

        with admin_client(broker.bootstrap_servers) as admin:
            admin.delete_records({TopicPartition("t", 0): 60})
            deadline = time.monotonic() + 30
            while not deletion_durable(admin, "t", {0: 60}, {0: broker.log_dir}):
                assert time.monotonic() < deadline, "the broker never wrote its start offset down"
                time.sleep(0.1)
        assert checkpointed_starts(broker.log_dir, "t") == {0: 60}, \
            (broker.log_dir / START_OFFSET_CHECKPOINT).read_text()

        broker.kill()                       # a crash: no controlled shutdown writes anything
        broker.start().wait_ready()
        earliest = _earliest(broker.bootstrap_servers, "t")
        assert earliest == 60, f"after the crash partition 0 starts at offset {earliest}, not 60"


@pytest.mark.unit
def test_a_replica_not_written_down_starts_at_its_first_segment(tmp_path):
    """Read from the files as Kafka 4.3 writes them: a replica the checkpoint does not list (its
    start offset is its first segment's) starts at that segment's base offset, and so does one
    whose listed offset is below it; one of another topic, or another topic's whose name this
    one ends, is not ours."""
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "00000000000000000040.log").write_text("")
    (tmp_path / "t-1").mkdir()
    (tmp_path / "t-1" / "00000000000000000000.log").write_text("")
    (tmp_path / "my-t-0").mkdir()
    (tmp_path / START_OFFSET_CHECKPOINT).write_text("0\n3\nt 1 25\nmy-t 0 7\nt 0 12\n")
    assert checkpointed_starts(tmp_path, "t") == {0: 40, 1: 25}   # t-0's 12 is below its first segment
    assert checkpointed_starts(tmp_path / "absent", "t") == {}
