"""The REST admin API on a 3-broker cluster: every view works from any broker, each
asking the broker that can answer (ListOffsets on each partition's leader, a
group's offsets on its coordinator, ListGroups on every broker), and a topic
created over HTTP on a broker that is not the controller is a replicated topic of
the cluster. A share group's depth is the same from every broker; each partition's
records by state only from its leader."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from compat_tests.cluster_harness import WeirCluster
from compat_tests.harness import WeirProcess, unique_topic_name

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 3
RECORDS_PER_PARTITION = (3, 5, 8)
GROUPS = 6
COMMITTED_OFFSET = 2
CLIENT_WAIT_S = 30.0


def client(broker: WeirProcess) -> httpx.Client:
    auth = None if broker.http_credentials is None else httpx.BasicAuth(*broker.http_credentials)
    limits = httpx.Limits(max_keepalive_connections=0)
    return httpx.Client(base_url=broker.http_url, auth=auth, timeout=30, limits=limits)


def get(broker: WeirProcess, path: str) -> Any:
    with client(broker) as http:
        response = http.get(path)
    assert response.status_code == 200, f"{broker.http_url}{path}: {response.text}"
    return response.json()


@pytest.fixture(scope="module")
def cluster_path(cluster: WeirCluster) -> str:
    return f"/v3/clusters/{get(cluster.brokers[1], '/v3/clusters')['data'][0]['cluster_id']}"


@pytest.fixture(scope="module")
def created_topic(cluster: WeirCluster, cluster_path: str) -> str:
    """A topic created over HTTP on a broker that is not the controller, with records."""
    controller = cluster.controller_id()
    non_controller = next(b for n, b in cluster.brokers.items() if n != controller)
    name = unique_topic_name("rest-cluster")
    body = {
        "topic_name": name,
        "partitions_count": PARTITIONS,
        "replication_factor": 3,
        "configs": [{"name": "retention.ms", "value": "7200000"}],
    }
    with client(non_controller) as http:
        response = http.post(f"{cluster_path}/topics", json=body)
    assert response.status_code == 201, response.text
    assert (response.json()["partitions_count"], response.json()["replication_factor"]) == (3, 3)
    cluster.wait_full_isr(name)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for partition, count in enumerate(RECORDS_PER_PARTITION):
        for _ in range(count):
            producer.produce(name, b"v", partition=partition)
    assert producer.flush(CLIENT_WAIT_S) == 0
    return name


def test_every_broker_shows_the_clusters_three_brokers_and_its_controller(
    cluster: WeirCluster, cluster_path: str
) -> None:
    controller = cluster.controller_id()
    for broker in cluster.brokers.values():
        (described,) = get(broker, "/v3/clusters")["data"]
        assert described["controller"]["related"].endswith(f"/brokers/{controller}")
        brokers = get(broker, f"{cluster_path}/brokers")["data"]
        assert sorted(b["broker_id"] for b in brokers) == [1, 2, 3]


def test_a_topic_created_on_a_non_controller_is_seen_alike_from_every_broker(
    cluster: WeirCluster, cluster_path: str, created_topic: str
) -> None:
    views = [
        get(broker, f"{cluster_path}/topics/{created_topic}/partitions")["data"]
        for broker in cluster.brokers.values()
    ]
    leaders = set()
    for partitions in views:
        assert [p["partition_id"] for p in partitions] == list(range(PARTITIONS))
        for partition, count in zip(partitions, RECORDS_PER_PARTITION, strict=True):
            assert sorted(partition["replica_ids"]) == [1, 2, 3]
            assert sorted(partition["isr"]) == [1, 2, 3]
            # Asked of the leader, wherever it is: the same from every broker.
            assert partition["high_watermark"] == partition["last_stable_offset"] == count
            assert partition["log_start_offset"] == 0
        leaders |= {p["leader_id"] for p in partitions}
    assert [[p["leader_id"] for p in v] for v in views] == [[p["leader_id"] for p in views[0]]] * 3
    assert len(leaders) > 1, "every partition has the same leader: the forwarding was not shown"
    for broker in cluster.brokers.values():
        configs = get(broker, f"{cluster_path}/topics/{created_topic}/configs/retention.ms")
        assert (configs["value"], configs["source"]) == ("7200000", "DYNAMIC_TOPIC_CONFIG")


def commit_retrying(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    """Commit, retrying while the group's coordinator is still being set up."""
    deadline = time.monotonic() + CLIENT_WAIT_S
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_every_broker_lists_every_group_and_its_lag_wherever_it_is_coordinated(
    cluster: WeirCluster, cluster_path: str, created_topic: str
) -> None:
    groups = [f"{created_topic}-g{i}" for i in range(GROUPS)]
    for group in groups:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
        try:
            offsets = [
                TopicPartition(created_topic, p, COMMITTED_OFFSET) for p in range(PARTITIONS)
            ]
            commit_retrying(consumer, offsets)
        finally:
            consumer.close()
    coordinators = set()
    for broker in cluster.brokers.values():
        listed = get(broker, f"{cluster_path}/consumer-groups")
        assert listed["brokers_not_answering"] == []
        by_id = {g["consumer_group_id"]: g for g in listed["data"]}
        assert set(groups) <= set(by_id)
        coordinators |= {by_id[g]["coordinator"]["related"] for g in groups}
        for group in groups:
            summary = get(broker, f"{cluster_path}/consumer-groups/{group}/lag-summary")
            wanted = sum(count - COMMITTED_OFFSET for count in RECORDS_PER_PARTITION)
            assert summary["total_lag"] == wanted, (broker.http_url, group, summary)
    assert len(coordinators) > 1, "every group has the same coordinator: nothing was shown"


def test_every_broker_shows_a_share_groups_depth_and_its_leader_the_records_by_state(
    cluster: WeirCluster, cluster_path: str, created_topic: str
) -> None:
    group = f"{created_topic}-share"
    earliest = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    admin = cluster.admin()
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[earliest])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=CLIENT_WAIT_S)
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    consumer.subscribe([created_topic])
    accepted = 0
    deadline = time.monotonic() + 60
    try:
        while accepted < sum(RECORDS_PER_PARTITION):
            assert time.monotonic() < deadline, f"accepted {accepted}"
            try:
                accepted += sum(m.error() is None for m in consumer.poll(1.0))
            except KafkaException:
                continue
            consumer.commit_sync(10.0)
    finally:
        consumer.close()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for partition in range(PARTITIONS):
        producer.produce(created_topic, b"late", partition=partition)
    assert producer.flush(CLIENT_WAIT_S) == 0
    leaders = {p: cluster.leader_of(created_topic, p) for p in range(PARTITIONS)}
    path = f"{cluster_path}/share-groups/{group}"
    # The share state is written as the acknowledgements arrive: wait until every
    # partition's is, as every broker sees it.
    cluster.wait_until(
        lambda: all(get(b, path)["queue_depth"] == PARTITIONS for b in cluster.brokers.values()),
        30,
        "every broker shows the share group's depth",
    )
    for node_id, broker in cluster.brokers.items():
        described = get(broker, path)
        assert [r["queue_depth"] for r in described["partitions"]] == [1] * PARTITIONS
        for row in described["partitions"]:
            led_here = leaders[row["partition_id"]] == node_id
            assert (row["records"] is not None) == led_here, (node_id, row)
            if led_here:
                assert row["records"]["available"] == 1


def hold_all_but_the_first_rejected(cluster: WeirCluster, topic: str, group: str) -> ShareConsumer:
    """A share consumer (still open) that rejected the first record it got and holds
    the others acquired."""
    consumer = ShareConsumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "the share consumer got no records"
        try:
            messages = [m for m in consumer.poll(1.0) if m.error() is None]
        except KafkaException:
            continue
        if messages:
            consumer.acknowledge(messages[0], AcknowledgeType.REJECT)
            consumer.commit_sync(10.0)
            return consumer


def test_a_share_partition_led_elsewhere_shows_its_stored_delivery_counts_from_any_broker(
    cluster: WeirCluster, cluster_path: str
) -> None:
    topic = unique_topic_name("rest-cluster-stored")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    cluster.wait_full_isr(topic)
    group = f"{topic}-share"
    earliest = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[earliest])
    admin = cluster.admin()  # alive until the futures resolve
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=CLIENT_WAIT_S)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(6):
        producer.produce(topic, f"job-{i}".encode(), partition=0)
    assert producer.flush(CLIENT_WAIT_S) == 0
    consumer = hold_all_but_the_first_rejected(cluster, topic, group)
    try:
        leader = cluster.leader_of(topic, 0)
        path = f"{cluster_path}/share-groups/{group}"
        (led,) = get(cluster.brokers[leader], path)["partitions"]
        live = led["records"]
        assert led["leader"] == leader and led["stored_records"] is None
        assert live["acquired"] > 0 and live["archived"] + live["acknowledged"] == 0
        for node_id, broker in cluster.brokers.items():
            if node_id == leader:
                continue
            (row,) = get(broker, path)["partitions"]
            assert (row["leader"], row["records"]) == (leader, None), row
            stored = row["stored_records"]
            # The leader's live view and the coordinator's stored one agree: the held
            # records delivered once, the rest never; the rejected one is done.
            assert stored["delivery_counts"] == live["delivery_counts"], (node_id, row)
            assert stored["not_finished"] == live["available"] + live["acquired"] == 5
            assert stored["delayed"] == 0
    finally:
        consumer.close()
