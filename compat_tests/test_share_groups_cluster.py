"""Share groups (KIP-932) on a three-broker Weir cluster over a real etcd, with
confluent-kafka's `ShareConsumer`, under broker kills.

A share partition's state is kept by the data partition's leader and stored by the
share coordinator of its key, the leader of the key's `__share_group_state`
partition: usually another broker (ReadShareGroupState / WriteShareGroupState between
them). Each test produces to a fresh topic (replication factor 3, six partitions,
min.insync.replicas 2) while two share consumers accept every record, and records a
history: every delivery (with its delivery count) and every acceptance with what
`commit_sync` answered for it. The checks (`check_history`):

- every acknowledged produced record was delivered and accepted (none lost);
- no record was delivered again after an acceptance that was answered without error
  (an accepted record is never redelivered);
- no delivery count of a record was seen twice (counts only grow, across failovers);
- at the end a fresh consumer of the group gets nothing more (every record is
  acknowledged in the share coordinator's state).

Dead letters: a share partition led away from its dead-letter partition's leader
writes its dead letters there over the brokers' own connections, each once.

Faults: the leader of a data partition SIGKILLed mid-consumption (its share partitions
move to the new leader, which loads their state from the coordinator). The broker
leading a key's state partition SIGKILLed (the coordinator moves and loads the
partition, the data leader finds it again) is compat_tests/test_queue_faults.py's
coordinator kill, checked there by the queue history checker.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from compat_tests.cluster_harness import TEST_CLUSTER_SETTINGS, WeirCluster, running_cluster
from compat_tests.harness import run_cli
from weir.broker.coordinators.share_state_service import ShareKey, share_state_partition
from weir.controller.controller import SHARE_GROUP_STATE_TOPIC_NAME
from weir.sharecoord.dead_letter_records import parse_dead_letter
from weir.sharecoord.share_partition import ArchiveReason

pytestmark = pytest.mark.timeout(150)

SETTINGS = (
    TEST_CLUSTER_SETTINGS
    + """\
group_share_min_record_lock_duration_ms = 1000
group_share_min_session_timeout_ms = 6000
group_share_min_heartbeat_interval_ms = 500
"""
)
PARTITIONS = 6
STATE_PARTITIONS = 50  # the broker's default __share_group_state partition count
LOCK_DURATION_MS = 4000
GROUP_CONFIGS = {
    "share.auto.offset.reset": "earliest",
    "share.record.lock.duration.ms": str(LOCK_DURATION_MS),
    "share.session.timeout.ms": "6000",
    "share.heartbeat.interval.ms": "500",
}
CONSUMERS = 2
PRODUCE_RATE_PER_S = 60
CONSUMED_S = 60.0  # every record accepted within this
QUIET_S = 2.0
DRAIN_S = LOCK_DURATION_MS / 1000 + 4.0
COMMIT_TIMEOUT_S = 15.0
FAILOVER_S = 30.0

Record = tuple[int, int]  # (partition, offset)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirCluster]:
    with running_cluster(tmp_path_factory.mktemp("share-cluster"), settings=SETTINGS) as weir:
        create_state_topic(weir)
        yield weir


def create_state_topic(cluster: WeirCluster) -> None:
    """A first share fetch creates __share_group_state, so that every test's
    `fresh_topic` can pick a group whose state lives away from a data leader (the
    placement is known only once the state topic has leaders)."""
    topic = f"warm-up-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 1, 3)
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{topic}-g"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    try:
        while not cluster.partitions(SHARE_GROUP_STATE_TOPIC_NAME):
            assert time.monotonic() < deadline, f"no {SHARE_GROUP_STATE_TOPIC_NAME} after 60 s"
            consumer.poll(0.5)
    finally:
        consumer.close()
    wait_state_topic(cluster)


@pytest.fixture
def healed(cluster: WeirCluster) -> Iterator[WeirCluster]:
    """The cluster; after the test, every broker running again with full ISRs."""
    yield cluster
    for broker in cluster.brokers.values():
        if not broker.is_running():
            broker.start(ready_timeout_s=60)
    cluster.wait_full_isr(SHARE_GROUP_STATE_TOPIC_NAME, timeout_s=60)


# -- the history ----------------------------------------------------------------------


@dataclass
class History:
    """What the producer was told and what the consumers saw, from every thread."""

    produced: dict[Record, str] = field(default_factory=dict)
    # (record, value, delivery count, consumer)
    deliveries: list[tuple[Record, str, int, str]] = field(default_factory=list)
    # (record, delivery count, consumer, answered without error)
    accepts: list[tuple[Record, int, str, bool]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_event: float = field(default_factory=time.monotonic)

    def accepted(self) -> set[Record]:
        with self.lock:
            return {record for record, *_ in self.accepts}


def check_history(history: History) -> list[str]:
    """The anomalies (empty: none), as the module's docstring lists them."""
    problems: list[str] = []
    counts: dict[Record, list[int]] = {}
    for record, value, count, _ in history.deliveries:
        counts.setdefault(record, []).append(count)
        expected = history.produced.get(record)
        if expected is not None and value != expected:
            problems.append(f"{record}: delivered {value!r}, produced {expected!r}")
    accepted = {record for record, *_ in history.accepts}
    lost = sorted(set(history.produced) - accepted)
    if lost:
        problems.append(f"{len(lost)} produced records never accepted, first {lost[:5]}")
    for record, seen in counts.items():
        if len(seen) != len(set(seen)):
            problems.append(f"{record}: a delivery count seen twice: {sorted(seen)}")
    for record, count, consumer, ok in history.accepts:
        if ok and _delivered_again(history, record, count, consumer):
            problems.append(f"{record}: accepted at count {count}, delivered again")
    return problems


def _delivered_again(history: History, record: Record, count: int, consumer: str) -> bool:
    """A delivery of `record` after the one of `count` that `consumer` accepted. Not
    one: the next delivery to the same consumer, whose own acceptance failed (its
    earlier acceptance reached the leader after it had acquired the record again
    for that consumer, so it applied to that acquisition, as in Kafka)."""
    for later_record, _, later_count, later_consumer in history.deliveries:
        if later_record != record or later_count <= count:
            continue
        same_acquisition = later_consumer == consumer and later_count == count + 1
        if not same_acquisition or (record, later_count, later_consumer, True) in history.accepts:
            return True
    return False


# -- the clients ----------------------------------------------------------------------


def set_group_configs(cluster: WeirCluster, group: str) -> None:
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in GROUP_CONFIGS.items()
        ],
    )
    admin = cluster.admin()
    admin.incremental_alter_configs([resource])[resource].result(timeout=20)


class Consumers:
    """Share consumers on threads, each accepting every record it gets and committing
    the acknowledgements after every poll (the answer recorded per record)."""

    def __init__(self, bootstrap: str, group: str, topic: str, history: History) -> None:
        self.bootstrap, self.group, self.topic, self.history = bootstrap, group, topic, history
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        # A partition whose first records delivered are held unacknowledged (by the
        # consumer that got them) until `release` is set; `holding` says it happened.
        self.hold_partition: int | None = None
        self.holding = threading.Event()
        self.release = threading.Event()

    def start(self, count: int) -> None:
        for index in range(count):
            thread = threading.Thread(target=self._run, args=(f"c{index}",), daemon=True)
            thread.start()
            self.threads.append(thread)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)
        assert not any(t.is_alive() for t in self.threads), "a consumer did not close"

    def _run(self, name: str) -> None:
        consumer = ShareConsumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "client.id": name,
                "share.acknowledgement.mode": "explicit",
                "max.poll.records": 50,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                try:
                    messages = list(consumer.poll(0.5))
                except KafkaException as exc:
                    self._error(f"{name} poll: {exc}")
                    continue
                self._handle(consumer, name, messages)
        finally:
            try:
                consumer.close()
            except KafkaException as exc:
                self._error(f"{name} close: {exc}")

    def _handle(self, consumer: ShareConsumer, name: str, messages: list[Any]) -> None:
        delivered: list[tuple[Record, int]] = []
        for message in messages:
            if message.error() is not None:
                self._error(f"{name} poll: {message.error()}")
                continue
            record = (message.partition(), message.offset())
            count = message.delivery_count()
            value = (message.value() or b"").decode()
            with self.history.lock:
                self.history.deliveries.append((record, value, count, name))
                self.history.last_event = time.monotonic()
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            delivered.append((record, count))
        if not delivered:
            return
        held = self._hold(delivered)
        if held:
            self.release.wait(FAILOVER_S)
        try:
            results = consumer.commit_sync(COMMIT_TIMEOUT_S)
            failed = {tp.partition for tp, exc in results.items() if exc is not None}
        except KafkaException as exc:
            self._error(f"{name} commit: {exc}")
            failed = {record[0] for record, _ in delivered}
        with self.history.lock:
            for record, count in delivered:
                # A held batch's answer is not trusted either way: its acceptance
                # crossed a failover on purpose.
                ok = not held and record[0] not in failed
                self.history.accepts.append((record, count, name, ok))
            self.history.last_event = time.monotonic()

    def _hold(self, delivered: list[tuple[Record, int]]) -> bool:
        with self.history.lock:
            if self.holding.is_set() or self.hold_partition is None:
                return False
            if not any(record[0] == self.hold_partition for record, _ in delivered):
                return False
            self.holding.set()
            return True

    def _error(self, text: str) -> None:
        with self.history.lock:
            self.history.errors.append(text)


class ProduceLoad:
    """An idempotent acks=all producer writing unique values round-robin over the
    partitions at a steady rate on a thread; `produced` holds the acknowledged ones."""

    def __init__(self, bootstrap: str, topic: str, history: History) -> None:
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        self.topic, self.history = topic, history
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            with self.history.lock:
                self.history.produced[(message.partition(), message.offset())] = (
                    message.value().decode()
                )

    def _run(self) -> None:
        while not self.stop.is_set():
            value = f"v-{self.sent}"
            self.producer.produce(
                self.topic, value.encode(), partition=self.sent % PARTITIONS,
                on_delivery=self._delivered,
            )  # fmt: skip
            self.sent += 1
            self.producer.poll(0)
            time.sleep(1 / PRODUCE_RATE_PER_S)  # the load's pace: nothing to wait on
        self.producer.flush(30)

    def run_for(self, seconds: float) -> None:
        self.thread.start()
        time.sleep(seconds)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=40)
        assert not self.thread.is_alive(), "the producer did not flush"


# -- placement --------------------------------------------------------------------------


def topic_id(cluster: WeirCluster, topic: str) -> uuid.UUID:
    admin = cluster.admin()
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=10)
    raw = described.topic_id
    high = raw.get_most_significant_bits() & (2**64 - 1)
    low = raw.get_least_significant_bits() & (2**64 - 1)
    return uuid.UUID(int=(high << 64) | low)


def coordinator_of(cluster: WeirCluster, group: str, topic: str, partition: int) -> int:
    """The broker leading the share partition's state partition (Kafka's placement)."""
    key = ShareKey(group, topic_id(cluster, topic), partition)
    return cluster.leader_of(
        SHARE_GROUP_STATE_TOPIC_NAME, share_state_partition(key, STATE_PARTITIONS)
    )


def split_partitions(cluster: WeirCluster, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """Per partition whose data leader is not its key's coordinator: (leader,
    coordinator). Asserts there is one (else nothing would cross brokers)."""
    placement = {
        partition: (
            cluster.leader_of(topic, partition),
            coordinator_of(cluster, group, topic, partition),
        )
        for partition in range(PARTITIONS)
    }
    split = {p: pair for p, pair in placement.items() if pair[0] != pair[1]}
    assert split, f"every partition's state is on its own leader: {placement}"
    return split


# -- the runs ---------------------------------------------------------------------------


def fresh_topic(cluster: WeirCluster, name: str) -> tuple[str, str]:
    """A new topic, and a group for it whose state lives away from some partition's
    leader (when __share_group_state exists already; else placement decides)."""
    topic = f"{name}-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    cluster.wait_full_isr(topic)
    group = f"{topic}-g"
    if cluster.partitions(SHARE_GROUP_STATE_TOPIC_NAME):
        group = next(
            (g for g in (f"{topic}-g{i}" for i in range(20)) if has_split(cluster, g, topic)),
            group,
        )
    set_group_configs(cluster, group)
    return topic, group


def has_split(cluster: WeirCluster, group: str, topic: str) -> bool:
    return any(
        cluster.leader_of(topic, p) != coordinator_of(cluster, group, topic, p)
        for p in range(PARTITIONS)
    )


def wait_state_topic(cluster: WeirCluster) -> None:
    """The first share fetch creates __share_group_state: wait for its leaders."""
    cluster.wait_full_isr(SHARE_GROUP_STATE_TOPIC_NAME, timeout_s=60)


def wait_consumed(cluster: WeirCluster, history: History, timeout_s: float) -> None:
    def done() -> bool:
        with history.lock:
            quiet = time.monotonic() - history.last_event >= QUIET_S
            produced = set(history.produced)
        return quiet and produced <= history.accepted()

    cluster.wait_until(done, timeout_s, "every produced record accepted")


def drain(bootstrap: str, group: str, topic: str, history: History) -> None:
    """A fresh consumer of the group, for longer than a lock: what it gets joins the
    history (and must be nothing, by the checks)."""
    consumers = Consumers(bootstrap, group, topic, history)
    before = len(history.deliveries)
    consumers.start(1)
    time.sleep(DRAIN_S)
    consumers.close()
    with history.lock:
        late = history.deliveries[before:]
    assert not late, f"delivered after every record was accepted: {late[:5]}"


def assert_no_anomaly(history: History) -> None:
    problems = check_history(history)
    summary = (
        f"{len(history.produced)} produced, {len(history.deliveries)} deliveries, "
        f"{len(history.accepts)} acceptances "
        f"({sum(1 for *_, ok in history.accepts if not ok)} with an error or held)"
    )
    print(summary)  # with -s
    assert not problems, f"{summary}; anomalies: {problems[:10]}; errors: {history.errors[:5]}"
    assert history.produced, summary


def redelivered(history: History, partition: int) -> bool:
    with history.lock:
        return any(r[0] == partition and count >= 2 for r, _, count, _ in history.deliveries)


def running_bootstrap(cluster: WeirCluster) -> str:
    return ",".join(b.bootstrap for b in cluster.running())


# -- the tests ---------------------------------------------------------------------------


def test_records_are_accepted_once_across_partitions_whose_state_is_on_other_brokers(
    cluster: WeirCluster,
) -> None:
    topic, group = fresh_topic(cluster, "share-spread")
    history = History()
    producer = ProduceLoad(cluster.bootstrap, topic, history)
    consumers = Consumers(cluster.bootstrap, group, topic, history)
    consumers.start(CONSUMERS)
    producer.run_for(4.0)
    producer.finish()
    wait_state_topic(cluster)
    split = split_partitions(cluster, group, topic)
    wait_consumed(cluster, history, CONSUMED_S)
    consumers.close()
    drain(cluster.bootstrap, group, topic, history)
    assert_no_anomaly(history)
    accepted_split = {r for r, _, _, ok in history.accepts if ok and r[0] in split}
    assert accepted_split, "no record of a partition led away from its state was accepted"
    # DescribeShareGroupOffsets with no topics (what `weir queue describe` and Kafka's
    # kafka-share-groups.sh send) lists every partition, its state on whichever broker
    described = run_cli("--bootstrap", cluster.bootstrap, "--format", "json",
                        "queue", "describe", "--group", group)  # fmt: skip
    assert described.returncode == 0, described.stderr
    listed = {
        (row["topic"], row["partition"]) for row in json.loads(described.stdout)["partitions"]
    }
    assert listed == {(topic, p) for p in range(PARTITIONS)}, described.stdout


def test_a_data_partition_leader_killed_mid_consumption_loses_no_acceptance(
    healed: WeirCluster,
) -> None:
    cluster = healed
    topic, group = fresh_topic(cluster, "share-leader-kill")
    history = History()
    producer = ProduceLoad(cluster.bootstrap, topic, history)
    consumers = Consumers(cluster.bootstrap, group, topic, history)
    consumers.start(CONSUMERS)
    producer.run_for(3.0)
    wait_state_topic(cluster)
    cluster.wait_until(lambda: len(history.accepted()) >= 60, 30, "consumption under way")
    split = split_partitions(cluster, group, topic)
    partition, (victim, coordinator) = next(iter(split.items()))
    consumers.hold_partition = partition
    cluster.wait_until(consumers.holding.is_set, 30, f"records of {topic}-{partition} held")
    print(f"killing broker {victim}, leader of {topic}-{partition} (coordinator {coordinator})")
    cluster.brokers[victim].kill()
    cluster.wait_until(
        lambda: cluster.leader_of(topic, partition) not in (victim, -1),
        FAILOVER_S,
        f"{topic}-{partition} has a new leader",
    )
    consumers.release.set()  # their acceptance reaches a leader that did not deliver them
    # The held records come back from the new leader (its state, read from the
    # coordinator, says delivered once): with count 2.
    cluster.wait_until(
        lambda: redelivered(history, partition), FAILOVER_S, "the held records redelivered"
    )
    producer.finish()
    wait_consumed(cluster, history, CONSUMED_S)
    consumers.close()
    drain(running_bootstrap(cluster), group, topic, history)
    assert_no_anomaly(history)


def test_dead_letters_are_written_once_when_the_dead_letter_partition_is_led_elsewhere(
    cluster: WeirCluster,
) -> None:
    topic, group = fresh_topic(cluster, "share-dlq")
    dlq = f"dlq.{topic}"
    cluster.create_topic(dlq, 1, 3, **{"errors.deadletterqueue.group.enable": "true"})
    cluster.wait_full_isr(dlq)
    dlq_leader = cluster.leader_of(dlq, 0)
    away = [p for p in range(PARTITIONS) if cluster.leader_of(topic, p) != dlq_leader]
    assert away, f"every partition of {topic} is led by {dlq_leader}, as {dlq}-0"
    alter_group_configs(
        cluster,
        group,
        {
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.copy.record.enable": "true",
        },
    )
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for index in range(REJECTED_RECORDS):
        producer.produce(topic, f"r{index}".encode(), partition=index % PARTITIONS)
    assert producer.flush(30) == 0

    rejected = reject_all(cluster.bootstrap, group, topic, REJECTED_RECORDS)
    letters = read_dead_letters(cluster.bootstrap, dlq, REJECTED_RECORDS)

    sources = [parse_dead_letter(headers) for _, headers in letters]
    written = sorted((d.partition, d.offset) for d in sources if d is not None)
    assert written == sorted(rejected), (written, rejected)  # each once, none missing
    assert {value for value, _ in letters} == {f"r{i}".encode() for i in range(REJECTED_RECORDS)}
    assert {d.reason for d in sources if d is not None} == {ArchiveReason.REJECTED}
    assert any(partition in away for partition, _ in written)


REJECTED_RECORDS = 30


def alter_group_configs(cluster: WeirCluster, group: str, configs: dict[str, str]) -> None:
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = cluster.admin()  # kept alive until the result is in
    admin.incremental_alter_configs([resource])[resource].result(timeout=20)


def reject_all(bootstrap: str, group: str, topic: str, count: int) -> list[Record]:
    """REJECT every delivery until `count` records were seen; returns them."""
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    seen: list[Record] = []
    deadline = time.monotonic() + CONSUMED_S
    try:
        while len(seen) < count and time.monotonic() < deadline:
            try:
                messages = list(consumer.poll(0.5))
            except KafkaException:
                continue
            for message in messages:
                if message.error() is None:
                    seen.append((message.partition(), message.offset()))
                    consumer.acknowledge(message, AcknowledgeType.REJECT)
            if messages:
                consumer.commit_sync(COMMIT_TIMEOUT_S)
    finally:
        consumer.close()
    assert len(seen) == count, f"saw {len(seen)} of {count}"
    return seen


def read_dead_letters(
    bootstrap: str, topic: str, count: int
) -> list[tuple[bytes | None, list[tuple[str, bytes | None]]]]:
    """(value, headers) of partition 0's records, once `count` are there and a little
    longer (to see any extra)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    letters: list[tuple[bytes | None, list[tuple[str, bytes | None]]]] = []
    deadline = time.monotonic() + CONSUMED_S
    settle_until: float | None = None
    try:
        while time.monotonic() < (settle_until or deadline):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                letters.append((message.value(), list(message.headers() or [])))
            elif len(letters) >= count and settle_until is None:
                settle_until = time.monotonic() + 2
    finally:
        consumer.close()
    return letters
