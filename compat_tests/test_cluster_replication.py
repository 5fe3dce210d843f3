"""A three-broker Weir cluster over a real etcd, driven by confluent-kafka:
replicated topics, acks=all through a leader's SIGKILL, and the replicas' bytes."""

from __future__ import annotations

import base64
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicCollection, TopicPartition

from compat_tests.cluster_harness import WeirCluster, running_cluster, shared_or_own_cluster
from compat_tests.harness import unique_topic_name
from compat_tests.history_checker import ConcurrentReader, ProduceLoad, check_history
from compat_tests.wire_client import connect, round_trip
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.wire.api_keys import ApiKey

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def _module_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirCluster]:
    with running_cluster(tmp_path_factory.mktemp("replication")) as weir:
        yield weir


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WeirCluster]:
    """The module's cluster; a test that leaves brokers dead or stops it has its own."""
    yield from shared_or_own_cluster(request, "_module_cluster", tmp_path)


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


@pytest.mark.own_cluster
def test_acknowledged_writes_survive_a_leader_killed_mid_produce(cluster: WeirCluster) -> None:
    topic = unique_topic_name("failover")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    victim = cluster.leader_of(topic, 0)
    with ConcurrentReader(cluster.bootstrap, topic, 3) as reader:
        with ProduceLoad(cluster.bootstrap, topic) as load:
            load.acked_since(500, timeout_s=30)
            killed_at_s = time.monotonic()
            cluster.brokers[victim].kill()
            # The partitions it followed go on within a second (its leaders see its
            # connections close); its own move once its lease ends.
            cluster.wait_until(
                lambda: cluster.leader_of(topic, 0) not in (victim, -1), 60, "a new leader"
            )
            load.acked_since(500, timeout_s=60)
            assert time.monotonic() - killed_at_s < 60
            # The killed broker returns as a follower, truncates what it alone had,
            # catches up and rejoins every ISR.
            cluster.brokers[victim].start()
            cluster.wait_full_isr(topic, timeout_s=40)
            load.acked_since(200, timeout_s=30)
        time.sleep(1)  # the reader reaches the end
    check_history(cluster, load, 3, reader)
    assert len(reader.reads) > 0
    cluster.stop()
    for partition in range(3):
        copies = {
            node_id: _log_bytes(broker.data_dir / f"{topic}-{partition}")
            for node_id, broker in cluster.brokers.items()
        }
        assert len(set(copies.values())) == 1, f"{topic}-{partition} replicas differ"


def _log_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


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


@pytest.mark.own_cluster
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
    with running_cluster(tmp_path, etcd_members=3) as cluster:
        topic = unique_topic_name("etcd-loss")
        cluster.create_topic(topic, 3, 3)
        cluster.wait_full_isr(topic)
        leaders_before = {p: cluster.leader_of(topic, p) for p in range(3)}
        with ProduceLoad(cluster.bootstrap, topic) as load:
            load.acked_since(200, timeout_s=30)
            cluster.etcd.leader().kill()
            load.acked_since(300, timeout_s=30)
            # The remaining two members elect a leader; every broker's lease survives.
            cluster.wait_until(lambda: len(cluster.admin().list_topics(timeout=5).brokers) == 3,
                               20, "three brokers registered")  # fmt: skip
            load.acked_since(200, timeout_s=30)
        assert {p: cluster.leader_of(topic, p) for p in range(3)} == leaders_before
        check_history(cluster, load, 3)


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


@pytest.mark.own_cluster
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


def test_a_produce_to_a_follower_names_the_leader(cluster: WeirCluster) -> None:
    """KIP-951 (Produce v10+): NOT_LEADER_OR_FOLLOWER carries the current leader and
    its endpoint, so the client need not refresh metadata first."""
    topic = unique_topic_name("hint")
    cluster.create_topic(topic, 1, 3)
    cluster.wait_full_isr(topic)
    leader = cluster.partitions(topic)[0]
    follower = next(b for n, b in cluster.brokers.items() if n != leader.leader)
    request = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v", [])])}],
            }
        ],
    }
    with connect(follower) as sock:
        response = round_trip(sock, ApiKey.PRODUCE, 11, request)
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (
        leader.leader,
        0,
    )
    leader_broker = cluster.brokers[leader.leader]
    assert [(e.node_id, f"{e.host}:{e.port}") for e in response.node_endpoints] == [
        (leader.leader, leader_broker.bootstrap)
    ]


def _fetch_request(topic_id: object, partition: int) -> dict[str, object]:
    return {
        "replica_state": {"replica_id": -1, "replica_epoch": -1},
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }  # fmt: skip
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def test_a_fetch_from_a_follower_names_the_leader_and_topics_go_by_id(
    cluster: WeirCluster,
) -> None:
    """Fetch v16 (KIP-951): NOT_LEADER_OR_FOLLOWER with CurrentLeader and the
    leader's endpoint; v13+ names topics by id, an unknown id is UNKNOWN_TOPIC_ID."""
    topic = unique_topic_name("fetch-hint")
    cluster.create_topic(topic, 1, 3)
    cluster.wait_full_isr(topic)
    admin = cluster.admin()
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=10)
    # Kafka prints a topic id as URL-safe base64 of its 16 bytes.
    topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(str(described.topic_id) + "=="))
    leader_id = cluster.partitions(topic)[0].leader
    follower = next(b for n, b in cluster.brokers.items() if n != leader_id)
    with connect(follower) as sock:
        response = round_trip(sock, ApiKey.FETCH, 16, _fetch_request(topic_id, 0))
        unknown = round_trip(sock, ApiKey.FETCH, 16, _fetch_request(uuid.uuid4(), 0))
    answer = response.responses[0]
    assert answer.topic_id == topic_id
    partition = answer.partitions[0]
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition.current_leader.leader_id == leader_id
    assert [(e.node_id, f"{e.host}:{e.port}") for e in response.node_endpoints] == [
        (leader_id, cluster.brokers[leader_id].bootstrap)
    ]
    assert unknown.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    with connect(cluster.brokers[leader_id]) as sock:
        served = round_trip(sock, ApiKey.FETCH, 16, _fetch_request(topic_id, 0))
    assert served.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert served.node_endpoints == []
