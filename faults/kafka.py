"""Faults on the topic, through Kafka's admin API: partitions added mid-run, and records
deleted before the query read them (what retention does to a job that fell behind)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from faults.base import Details, Fault, Observation
from faults.driver import sentence
from faults.kinds import FaultKind, Key, Preparation
from faults.spec import FaultSpec
from workloads import delta_source
from workloads.kafka_admin import admin_client, answers
from workloads.pipelines.control import PAUSE_BATCH, held_files, held_since, request, withdraw
from workloads.wait import WaitTimeout

# the generator spreads events over new partitions from this long after the fault's `at`, so
# that they exist by then (the kind's `prepare` tells the run: harness/run/stages.py)
SPREAD_LEAD_S = 1.0
# how long kafka-retention keeps the batch held after the deletion: a hundred times the
# executors' eviction interval of fetched data (KAFKA_RETENTION_FAULT's driver_conf), so that no
# record fetched before the deletion is left to serve the batch
EVICTED_AFTER_S = 1.0
# the file in a broker's log directory that holds its partitions' start offsets across a restart
START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"


@dataclass
class PartitionsAdded(Details):
    """The partitions kafka-partitions added, by number."""

    partitions_added: list[int] = field(default_factory=list)


@dataclass
class Deleted(Details):
    """The ranges kafka-retention deleted: [{"partition", "from", "to"}], `to` exclusive."""

    deleted: list[dict] = field(default_factory=list)

    def deleted_ranges(self) -> list[dict]:
        return list(self.deleted)


def _spread(spec: FaultSpec) -> Preparation:
    """The generator sends to the added partitions too, from SPREAD_LEAD_S after the fault."""
    return Preparation(partition_steps=((spec.at_s + SPREAD_LEAD_S, int(spec.get("count", 1))),))


def planned_offsets(checkpoint: Path, topic: str, batch: int | None = None) -> dict[int, int]:
    """Partition -> the end offset of batch `batch` (default: the newest) in the checkpoint's
    offset log: what the query has read, or is reading, up to then."""
    logs = {int(p.name): p for p in (Path(checkpoint) / "offsets").glob("*") if p.name.isdigit()}
    if not logs:
        return {}
    n = max(logs) if batch is None else batch
    if n not in logs:
        return {}
    ends: dict[int, int] = {}
    for line in logs[n].read_text().splitlines()[2:]:
        if line.startswith("{"):   # a Delta source's offsets: the topic's it has read through
            ends.update(delta_source.topic_offsets(json.loads(line), topic, Path(checkpoint).parent))
    return ends


def _end_offsets(admin, topic: str, partitions: list[int], which: str = "LATEST") -> dict[int, int]:
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    spec = getattr(OffsetSpec, which)
    found = admin.list_partition_offsets({TopicPartition(topic, p): spec for p in partitions})
    return {tp.partition: int(o.offset) for tp, o in found.items()}


def checkpointed_starts(log_dir: Path, topic: str) -> dict[int, int]:
    """Partition -> the start offset the broker of `log_dir` has written to disk for each of
    `topic`'s partitions it holds a replica of: where that replica starts after a crash. A
    replica not in log-start-offset-checkpoint starts at its first segment's base offset (the
    name of its oldest .log file)."""
    held: dict[int, int] = {}
    for replica in Path(log_dir).glob(f"{topic}-*"):
        name, _, number = replica.name.rpartition("-")
        if replica.is_dir() and name == topic and number.isdigit():
            bases = [int(f.stem) for f in replica.glob("*.log") if f.stem.isdigit()]
            held[int(number)] = min(bases, default=0)
    written: dict[int, int] = {}
    try:
        lines = (Path(log_dir) / START_OFFSET_CHECKPOINT).read_text().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines[2:]:   # the format's version, the count, then "topic partition offset"
        fields = line.split()
        if len(fields) == 3 and fields[0] == topic:
            written[int(fields[1])] = int(fields[2])
    # a restart starts a replica at the larger of the two (an entry below its first segment is stale)
    return {p: max(written.get(p, base), base) for p, base in held.items()}


def deletion_durable(admin, topic: str, moved: dict[int, int], log_dirs: dict[int, Path] | None) -> bool:
    """One look at whether delete-records' new start offsets (`moved`: partition -> offset)
    will outlive a crash. A broker keeps a partition's start offset in memory and writes it to
    log-start-offset-checkpoint only from time to time: one killed before that starts the
    partition where its checkpoint says, and serves the deleted records again (a CI run's
    restart-broker crashed the lone broker 6 s after kafka-retention, and the query read the
    records the checker counted as deleted). True once the broker whose log directory
    `log_dirs` gives for each partition (its leader's; none on a Kafka of the user's) has
    written a start offset at or past `moved`; False while `log_dirs` is None (not known now).
    A start offset found back before `moved` (a broker restarted before it wrote it) is
    deleted again."""
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    try:
        starts = _end_offsets(admin, topic, list(moved), "EARLIEST")
        undone = {TopicPartition(topic, p): o for p, o in moved.items() if starts[p] < o}
        if undone:
            admin.delete_records(undone)
            return False
    except KafkaError:   # a broker restarting: look again
        return False
    if log_dirs is None:
        return False
    for p, log_dir in log_dirs.items():
        written = checkpointed_starts(log_dir, topic)
        if written.get(p, -1) < moved[p]:
            return False
    return True


def _partitions(admin, topic: str) -> int:
    (described,) = admin.describe_topics([topic])
    return len(described["partitions"])


def broker_answering(fault: Fault) -> None:
    """Wait, as long as a restart may take, for the topic's broker to answer: another fault may
    have it down (a flake-lane round pinned to one core: restart-broker's broker took 40 s to come
    back, and a kafka-retention that came due meanwhile failed: "Unable to bootstrap")."""
    servers = fault.targets.bootstrap_servers
    fault.targets.wait(lambda: answers(servers), "restart", f"the broker ({servers}) did not answer")


class KafkaPartitions(Fault):
    """Add `count` partitions to the case's topic; the generator sends to them too, and the
    query must find them (its checkpoint holds their offsets) and deliver their events."""

    before = total = 0

    def _inject(self) -> None:
        topic = self.targets.topic
        broker_answering(self)
        with admin_client(self.targets.bootstrap_servers) as admin:
            self.before = _partitions(admin, topic)
            self.total = self.before + int(self.spec.get("count", 1))
            admin.create_partitions({topic: self.total})
        self.target = f"topic {topic} ({self.before} partitions)"

    def observe(self) -> Observation:
        new = range(self.before, self.total)

        def reading_them():
            ends = planned_offsets(self.targets.checkpoint(), self.targets.topic)
            return ends if all(p in ends for p in new) and any(ends[p] > 0 for p in new) else None

        try:
            ends = self.targets.wait(reading_them, "batch", f"{self.target}: {len(new)} partitions were "
                                                            "added, but no batch read events from them", 0.5)
        except WaitTimeout as exc:
            return Observation(False, str(exc))
        read = {p: ends[p] for p in new}
        return Observation(True, f"{self.target}: {len(new)} partitions added ({self.total} now); the "
                                 f"query's checkpoint reads them, up to offsets {read}",
                           {"partitions": self.total}, details=PartitionsAdded(list(new)))


class KafkaRetention(Fault):
    """Delete `records` records of each partition (or of `partition`) from the start of the next
    batch, with the admin API's delete-records, while the commit gate holds that batch before
    anything runs its plan: its offsets are logged and its input not yet read, so the query
    has not read them, and will find them gone. Spark's default failOnDataLoss
    fails the query (outcome refused); failOnDataLoss = false skips them, and the checker
    counts them as deleted_before_read."""

    deleted: list[dict] = []
    batch: int = -1          # the held batch whose input was deleted
    planned: int = -1        # the records its offsets span, deleted ones included

    def _inject(self) -> None:
        from kafka import TopicPartition

        topic, wanted = self.targets.topic, self.spec.get("partition")
        records, control = int(self.spec.get("records", 100)), self.targets.control_dir
        mark = held_files(control)
        request(control, PAUSE_BATCH)
        try:
            self.targets.wait(lambda: held_since(control, PAUSE_BATCH, mark), "batch",
                              "no batch with rows reached foreachBatch")
            batch = self.batch = held_since(control, PAUSE_BATCH, mark)[0]["batch_id"]
            starts = planned_offsets(self.targets.checkpoint(), topic, batch - 1)
            broker_answering(self)
            with admin_client(self.targets.bootstrap_servers) as admin:
                partitions = [wanted] if wanted is not None else list(range(_partitions(admin, topic)))
                ends = _end_offsets(admin, topic, partitions)
                cut = {p: min(ends[p], starts.get(p, 0) + records) for p in partitions}
                doomed = {TopicPartition(topic, p): cut[p] for p in partitions if cut[p] > starts.get(p, 0)}
                if doomed:
                    admin.delete_records(doomed)
                    starts_now = _end_offsets(admin, topic, partitions, "EARLIEST")
                    short = {p: starts_now[p] for p in partitions if starts_now[p] < cut[p]}
                    if short:
                        raise RuntimeError(f"delete-records left partitions {short} starting before {cut}")
                    moved = {tp.partition: offset for tp, offset in doomed.items()}
                    self.targets.wait(lambda: deletion_durable(admin, topic, moved,
                                                               self._leader_dirs(admin, moved)),
                                      "batch", f"the partitions' leaders did not write their new start "
                                               f"offsets {moved} to disk (log-start-offset-checkpoint)")
                    time.sleep(EVICTED_AFTER_S)
            planned = planned_offsets(self.targets.checkpoint(), topic, batch)
            self.planned = sum(max(0, planned.get(p, 0) - starts.get(p, 0)) for p in planned)
        finally:
            withdraw(control, PAUSE_BATCH)
        self.deleted = [{"partition": p, "from": starts.get(p, 0), "to": cut[p]} for p in partitions
                        if cut[p] > starts.get(p, 0)]
        listed = ", ".join(map(str, partitions))
        self.target = f"topic {topic}, partition{'s' if wanted is None else ''} {listed} (batch {batch})"
        if not self.deleted:
            raise RuntimeError(f"{self.target}: nothing to delete from the batch's start offsets {starts} "
                               f"(end offsets {ends})")

    def _leader_dirs(self, admin, moved: dict[int, int]) -> dict[int, Path] | None:
        """Partition -> the log directory of its leader, for the partitions in `moved` that the
        run's own brokers lead (none on a Kafka of the user's); None when the leaders are not
        known now (a broker restarting). A follower that crashes takes its start offset from the
        leader again, and one that is paused or stopped is out of the way: only the leader's
        file decides what a crash leaves. Asked through the fault's open `admin` client: a probe
        every 0.2 s opened a client of its own each time."""
        from kafka.errors import KafkaError

        from workloads import kafka_admin

        nodes = self.targets.brokers()
        if not nodes:
            return {}
        try:
            leaders = kafka_admin.leaders_by(admin, self.targets.topic)
        except KafkaError:
            return None
        if any(leaders.get(p, -1) not in nodes for p in moved):
            return None   # a partition without a leader of the run's (an election under way)
        return {p: nodes[leaders[p]].log_dir for p in moved}

    def observe(self) -> Observation:
        deleted = sum(d["to"] - d["from"] for d in self.deleted)
        ranges = ", ".join(f"partition {d['partition']} offsets {d['from']:,}-{d['to'] - 1:,}"
                           for d in self.deleted)

        seen = deletion_seen(
            self.targets, self.batch, deleted, Deleted(list(self.deleted)),
            seen=f"{deleted:,} records the query had not read were deleted ({ranges})",
            accepted="Spark skipped the deleted records (failOnDataLoss = false) and read on",
            proof=(f"every deleted offset was in or beyond the held batch, which had not read its input "
                   f"yet ({ranges})"))
        return self._read_anyway(seen, deleted)

    def _read_anyway(self, seen: Observation, deleted: int) -> Observation:
        """The observation, unless the held batch read every record its offsets span, the deleted
        ones too (an executor served them from what it had fetched before the deletion): then no
        record was deleted before the query read it, and the record says so. The checker must not
        count as unread, and their outputs as unexpected, records the sink holds."""
        if seen.outcome != "accepted" or self.planned <= 0:
            return seen
        mine = [p for p in self.targets.progress() if p.get("batchId") == self.batch]
        read = int(mine[-1].get("numInputRows", -1)) if mine else -1
        if read < self.planned:
            return seen
        seen.detail += (f"; but batch {self.batch} read all {read:,} records its offsets span, the deleted "
                        f"ones too (fetched before the deletion): none was deleted before the query read it")
        seen.details = Deleted([])
        return seen


def deletion_seen(targets, batch: int, count: int, details: Details, *, seen: str, accepted: str,
                  proof: str) -> Observation:
    """What Spark did with input deleted under batch `batch`, which the commit gate held before it
    read any: it failed the query (refused), or read on (accepted: only the held batch's commit
    says that Spark read past what was deleted)."""
    def outcome():
        driver = targets.driver()
        if not driver.running:
            return "refused", sentence(driver.status().get("error") or driver.how_it_ended())
        if (Path(targets.checkpoint()) / "commits" / str(batch)).exists():
            return "accepted", accepted
        return None

    try:
        kind, why = targets.wait(outcome, "batch", f"{seen}, but the query neither failed nor read past them",
                                 0.5)
    except WaitTimeout as exc:
        return Observation(False, str(exc), details=details)
    return Observation(True, f"{seen}; {why if kind == 'accepted' else 'Spark failed the query: ' + why}",
                       {"records_deleted": count}, landed=True, proof=proof, outcome=kind,
                       outcome_detail=why, details=details)


KAFKA_PARTITIONS_FAULT = FaultKind(
    "kafka-partitions", KafkaPartitions,
    about="add `count` partitions to the case's topic mid-run (the admin API); the generator spreads new "
          f"events over them too from {SPREAD_LEAD_S:g} s later; the query's checkpoint must hold offsets "
          "for the new partitions, and their events must be delivered",
    models="a topic scaled out while a job reads it",
    keys=(Key("count", "integer", "partitions to add", default=1, ge=1),),
    targets=("topic",), default_target="topic",
    recovery_keys=("partitions",), details=PartitionsAdded, prepare=_spread, by_progress=False,
    why_not_by_progress="the generator plans which partition each event goes to before it sends, so the "
                        "partitions must be added at a time it knows: write `at` in seconds")

KAFKA_RETENTION_FAULT = FaultKind(
    "kafka-retention", KafkaRetention,
    about="delete `records` records of each partition (or of `partition`) that the query has not read "
          "yet (from the start of the next batch, which the commit gate holds meanwhile), with the "
          "admin API's delete-records; with Spark's default `failOnDataLoss` the query fails "
          "(outcome `refused`); with `[pipeline] fail_on_data_loss = false` Spark skips them and the checker "
          "counts them as `deleted_before_read`, not lost",
    models="retention deleting a lagging job's input, or a topic purged by hand",
    keys=(Key("partition", "integer", "the partition (default: all)", default=None, ge=0),
          Key("records", "integer", "how many records, from the batch's start offsets", default=100,
              ge=1)),
    targets=("topic",), default_target="topic", needs_commit_gate=True, source="kafka",
    recovery_keys=("records_deleted",), details=Deleted,
    # the executors keep what a fetch returned beyond the batch it was for (Spark's fetched-data
    # pool, and the pooled Kafka consumer's own prefetch) and serve the next batch from it:
    # records deleted after that fetch would still be read. Idle ones are evicted within 10 ms
    # here, so a held batch reads from the broker
    driver_conf={"spark.kafka.consumer.fetchedData.cache.timeout": "1ms",
                 "spark.kafka.consumer.fetchedData.cache.evictorThreadRunInterval": "10ms",
                 "spark.kafka.consumer.cache.timeout": "1ms",
                 "spark.kafka.consumer.cache.evictorThreadRunInterval": "10ms"})
