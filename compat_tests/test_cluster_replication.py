"""A three-broker Weir cluster over a real etcd, driven by confluent-kafka:
replicated topics, acks=all through a leader's SIGKILL, and the replicas' bytes."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from compat_tests.cluster_harness import WeirCluster
from compat_tests.etcd_harness import EtcdCluster
from compat_tests.harness import unique_topic_name
from compat_tests.wire_client import connect, round_trip
from weir.format.errors import ErrorCode
from weir.wire.api_keys import ApiKey

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[WeirCluster]:
    etcd = EtcdCluster.start(tmp_path / "etcd", 1)
    weir = WeirCluster(tmp_path / "weir", etcd, brokers_count=3)
    try:
        weir.start()
        yield weir
    finally:
        weir.stop()
        etcd.stop()


class AckLog:
    """Delivery reports of one producer: acknowledged values with their offsets."""

    def __init__(self) -> None:
        self.acked: dict[str, tuple[int, int]] = {}
        self.failed: dict[str, str] = {}
        self._lock = threading.Lock()

    def report(self, error: KafkaError | None, message: Message) -> None:
        value = message.value().decode()
        with self._lock:
            if error is None:
                self.acked[value] = (message.partition(), message.offset())
            else:
                self.failed[value] = error.str()


def read_everything(
    bootstrap: str, topic: str, partitions: int
) -> dict[int, list[tuple[int, str]]]:
    """Every record of every partition, from the beginning to the high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        ends = {}
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            (records[p][-1][0] + 1 if records[p] else 0) < ends[p] for p in range(partitions)
        ):
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            records[message.partition()].append((message.offset(), message.value().decode()))
        return records
    finally:
        consumer.close()


def test_replicated_topic_reports_three_replicas_in_sync(cluster: WeirCluster) -> None:
    topic = unique_topic_name("replicated")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    partitions = cluster.partitions(topic)
    assert sorted(partitions) == [0, 1, 2]
    for described in partitions.values():
        assert sorted(described.replicas) == [1, 2, 3]
    # Leaders are spread: each broker leads one of the three partitions.
    assert sorted(p.leader for p in partitions.values()) == [1, 2, 3]


def test_acknowledged_writes_survive_a_leader_killed_mid_produce(cluster: WeirCluster) -> None:
    topic = unique_topic_name("failover")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    victim = cluster.leader_of(topic, 0)
    acks = AckLog()
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
        }
    )
    writes_count = 4000
    killed_at_s = 0.0
    for seq in range(writes_count):
        producer.produce(topic, value=f"w-{seq}".encode(), on_delivery=acks.report)
        producer.poll(0)
        if seq % 100 == 0:
            time.sleep(0.01)
        if seq == writes_count // 2:
            cluster.brokers[victim].kill()
            killed_at_s = time.monotonic()
    assert producer.flush(90) == 0, "every write got a delivery report"
    assert not acks.failed, f"writes failed: {list(acks.failed.items())[:5]}"
    assert len(acks.acked) == writes_count
    failover_s = time.monotonic() - killed_at_s
    survivors = ",".join(b.bootstrap for b in cluster.running())
    records = read_everything(survivors, topic, 3)
    seen: dict[str, tuple[int, int]] = {}
    for partition, items in records.items():
        for offset, value in items:
            assert value not in seen, (
                f"{value} is duplicated: {seen[value]} and {(partition, offset)}"
            )
            seen[value] = (partition, offset)
    lost = [v for v in acks.acked if v not in seen]
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:5]}"
    moved = {v: (acks.acked[v], seen[v]) for v in acks.acked if acks.acked[v] != seen[v]}
    assert not moved, f"acknowledged offsets differ from the log: {list(moved.items())[:5]}"
    assert cluster.leader_of(topic, 0) != victim
    assert failover_s < 60

    # The killed broker returns as a follower, catches up and rejoins every ISR;
    # then the three replicas of each partition hold the same bytes.
    cluster.brokers[victim].start()
    cluster.wait_full_isr(topic, timeout_s=40)
    cluster.stop()
    for partition in range(3):
        copies = {
            node_id: _log_bytes(broker.data_dir / f"{topic}-{partition}")
            for node_id, broker in cluster.brokers.items()
        }
        assert len(set(copies.values())) == 1, f"{topic}-{partition} replicas differ"


def _log_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


class ProduceLoad:
    """acks=all idempotent writes of unique values at a steady pace, on a thread,
    until stopped; every delivery report is kept."""

    def __init__(self, bootstrap: str, topic: str, pause_s: float = 0.002) -> None:
        self.topic = topic
        self.acks = AckLog()
        self.sent = 0
        self._pause_s = pause_s
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 90_000,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ProduceLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._producer.produce(
                self.topic, value=f"w-{self.sent}".encode(), on_delivery=self.acks.report
            )
            self.sent += 1
            self._producer.poll(self._pause_s)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(10)
            remaining = self._producer.flush(120)
            assert remaining == 0, f"{remaining} writes got no delivery report"

    def acked_since(self, count: int, timeout_s: float) -> None:
        """Wait until `count` more writes are acknowledged (the load makes progress)."""
        target = len(self.acks.acked) + count
        deadline = time.monotonic() + timeout_s
        while len(self.acks.acked) < target:
            assert time.monotonic() < deadline, (
                f"{count} writes not acknowledged within {timeout_s:.0f} s "
                f"(failed so far: {list(self.acks.failed.items())[:3]})"
            )
            time.sleep(0.05)


def check_history(cluster: WeirCluster, load: ProduceLoad, partitions: int) -> None:
    """Every acknowledged write is in the log exactly once, at its acknowledged
    offset; nothing the producer never wrote is there."""
    assert not load.acks.failed, f"writes failed: {list(load.acks.failed.items())[:5]}"
    assert len(load.acks.acked) == load.sent
    bootstrap = ",".join(b.bootstrap for b in cluster.running())
    records = read_everything(bootstrap, load.topic, partitions)
    seen: dict[str, tuple[int, int]] = {}
    for partition, items in records.items():
        for offset, value in items:
            assert value not in seen, (
                f"{value} duplicated at {seen[value]} and {(partition, offset)}"
            )
            seen[value] = (partition, offset)
    acked = load.acks.acked
    lost = [v for v in acked if v not in seen]
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:5]}"
    moved = [(v, acked[v], seen[v]) for v in acked if acked[v] != seen[v]]
    assert not moved, f"acknowledged offsets differ from the log: {moved[:5]}"
    unexpected = [v for v in seen if v not in acked]
    assert not unexpected, f"values nobody acknowledged: {unexpected[:5]}"


def test_a_leader_paused_past_its_lease_loses_leadership_and_rejoins(
    cluster: WeirCluster,
) -> None:
    topic = unique_topic_name("paused")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    victim_id = cluster.leader_of(topic, 0)
    victim = cluster.brokers[victim_id]
    with ProduceLoad(cluster.bootstrap, topic) as load:
        load.acked_since(200, timeout_s=30)
        os.kill(victim.pid, signal.SIGSTOP)
        try:
            cluster.wait_until(
                lambda: cluster.leader_of(topic, 0) not in (victim_id, -1), 20, "a new leader"
            )
            load.acked_since(200, timeout_s=30)
        finally:
            os.kill(victim.pid, signal.SIGCONT)
        cluster.wait_full_isr(topic, timeout_s=40)
        load.acked_since(200, timeout_s=30)
    check_history(cluster, load, 3)


def test_killing_the_active_controller_elects_another_that_moves_leaders(
    cluster: WeirCluster,
) -> None:
    topic = unique_topic_name("controller")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    controller_id = cluster.controller_id()
    cluster.brokers[controller_id].kill()
    cluster.wait_until(
        lambda: cluster.controller_id() not in (controller_id, -1), 20, "a new controller"
    )
    with ProduceLoad(",".join(b.bootstrap for b in cluster.running()), topic) as load:
        load.acked_since(200, timeout_s=30)
        # The new controller moves the partitions the killed broker led.
        for partition in range(3):
            assert cluster.leader_of(topic, partition) != controller_id
        victim_id = cluster.leader_of(topic, 1)
        cluster.brokers[victim_id].kill()
        load.acked_since(200, timeout_s=40)
    check_history(cluster, load, 3)


def test_rolling_restart_under_load_loses_nothing(cluster: WeirCluster) -> None:
    topic = unique_topic_name("rolling")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    with ProduceLoad(cluster.bootstrap, topic) as load:
        for broker in cluster.brokers.values():
            load.acked_since(100, timeout_s=30)
            broker.stop()
            broker.start(ready_timeout_s=60)  # ready: its replicas caught up
        cluster.wait_full_isr(topic, timeout_s=40)
        load.acked_since(100, timeout_s=30)
    check_history(cluster, load, 3)


def test_losing_the_etcd_leader_member_interrupts_nothing(tmp_path: Path) -> None:
    etcd = EtcdCluster.start(tmp_path / "etcd", 3)
    cluster = WeirCluster(tmp_path / "weir", etcd, brokers_count=3)
    try:
        cluster.start()
        topic = unique_topic_name("etcd-loss")
        cluster.create_topic(topic, 3, 3)
        cluster.wait_full_isr(topic)
        leaders_before = {p: cluster.leader_of(topic, p) for p in range(3)}
        with ProduceLoad(cluster.bootstrap, topic) as load:
            load.acked_since(200, timeout_s=30)
            etcd.leader().kill()
            load.acked_since(300, timeout_s=30)
            # The remaining two members elect a leader; every broker's lease survives.
            cluster.wait_until(lambda: len(cluster.admin().list_topics(timeout=5).brokers) == 3,
                               20, "three brokers registered")  # fmt: skip
            load.acked_since(200, timeout_s=30)
        assert {p: cluster.leader_of(topic, p) for p in range(3)} == leaders_before
        check_history(cluster, load, 3)
    finally:
        cluster.stop()
        etcd.stop()


def _group_consumer(bootstrap: str, group_id: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def _consume(consumer: Consumer, count: int, timeout_s: float) -> list[Message]:
    taken: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(taken) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            taken.append(message)
    return taken


def test_committed_offsets_survive_the_loss_of_the_groups_coordinator(
    cluster: WeirCluster,
) -> None:
    topic = unique_topic_name("group-failover")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for seq in range(300):
        producer.produce(topic, value=f"m-{seq}".encode(), partition=seq % 3)
    assert producer.flush(30) == 0
    group_id = unique_topic_name("group")
    first = _group_consumer(cluster.bootstrap, group_id)
    first.subscribe([topic])
    consumed = _consume(first, 150, timeout_s=60)
    assert len(consumed) == 150
    first.commit(asynchronous=False)
    committed = {
        tp.partition: tp.offset
        for tp in first.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    }
    first.close()
    admin = cluster.admin()
    described = admin.describe_consumer_groups([group_id])[group_id].result(timeout=20)
    coordinator_id = described.coordinator.id
    cluster.brokers[coordinator_id].kill()

    survivors = ",".join(b.bootstrap for b in cluster.running())
    second = _group_consumer(survivors, group_id)
    second.subscribe([topic])
    rest = _consume(second, 150, timeout_s=90)
    second.close()
    assert len(rest) == 150
    for message in rest:
        assert message.offset() >= committed[message.partition()], "re-read below the commit"
    values = {m.value() for m in consumed} | {m.value() for m in rest}
    assert len(values) == 300


def test_a_client_claiming_a_brokers_replica_id_is_refused(cluster: WeirCluster) -> None:
    """CVE-2018-1288's class: without the follower's replication token, a Fetch with
    a replica id reads nothing above the high watermark and moves no ISR."""
    topic = unique_topic_name("replica-claim")
    cluster.create_topic(topic, 1, 3)
    cluster.wait_full_isr(topic)
    leader = cluster.brokers[cluster.leader_of(topic, 0)]
    follower_id = next(n for n in cluster.brokers if n != cluster.leader_of(topic, 0))
    request = {
        "replica_id": follower_id,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": 0,
                        "partition_max_bytes": 1 << 20,
                    }  # fmt: skip
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    with connect(leader) as sock:
        response = round_trip(sock, ApiKey.FETCH, 12, request)
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert response.responses == []
    cluster.wait_full_isr(topic, timeout_s=5)
