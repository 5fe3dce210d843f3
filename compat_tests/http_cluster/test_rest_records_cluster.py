"""The records API on a 3-broker cluster: any broker takes a produce for any
partition and sends it to the partition's leader (through the Kafka gateway), and
any broker reads and follows partitions led elsewhere. A Kafka consumer checks
what was written; a Kafka producer writes what REST reads."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.cluster_harness import WeirCluster
from compat_tests.harness import WeirProcess, unique_topic_name
from weir.format.partitioner import partition_for_key

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 6
CLIENT_WAIT_S = 20.0


@pytest.fixture(scope="module")
def topic(cluster: WeirCluster) -> str:
    name = unique_topic_name("rest-cluster")
    cluster.create_topic(name, partitions=PARTITIONS, replication_factor=3)
    cluster.wait_full_isr(name)
    return name


@pytest.fixture(scope="module")
def cluster_id(cluster: WeirCluster) -> str:
    return str(cluster.admin().list_topics(timeout=10).cluster_id)


def bootstrap(cluster: WeirCluster) -> str:
    return ",".join(b.bootstrap for b in cluster.running())


def records_url(broker: WeirProcess, cluster_id: str, topic: str) -> str:
    return f"{broker.http_url}/v3/clusters/{cluster_id}/topics/{topic}"


def consume_all(cluster: WeirCluster, topic: str, counts: dict[int, int]) -> dict[int, list[Any]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap(cluster), "group.id": unique_topic_name("g"),
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in counts])
    got: dict[int, list[Any]] = {p: [] for p in counts}
    deadline = time.monotonic() + CLIENT_WAIT_S
    try:
        while any(len(got[p]) < n for p, n in counts.items()) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got[message.partition()].append(message)
    finally:
        consumer.close()
    assert {p: len(m) for p, m in got.items()} == counts
    return got


def test_each_broker_produces_to_partitions_led_by_the_others(
    cluster: WeirCluster, topic: str, cluster_id: str
) -> None:
    leaders = {p: cluster.leader_of(topic, p) for p in range(PARTITIONS)}
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    remote = 0
    for node_id, broker in cluster.brokers.items():
        with httpx.Client(timeout=15.0) as http:
            for partition in range(PARTITIONS):
                value = f"via-{node_id}-to-{partition}"
                answer = http.post(
                    records_url(broker, cluster_id, topic) + "/records",
                    json={"partition_id": partition, "value": {"type": "STRING", "data": value}},
                )
                assert answer.status_code == 200, answer.text
                report = answer.json()
                assert (report["error_code"], report["partition_id"]) == (200, partition)
                assert report["offset"] == len(sent[partition])
                sent[partition].append(value.encode())
                remote += leaders[partition] != node_id
    assert remote >= PARTITIONS, "no partition was led away from the broker asked"
    got = consume_all(cluster, topic, {p: len(v) for p, v in sent.items()})
    assert {p: [m.value() for m in got[p]] for p in got} == sent


def test_a_keyed_stream_through_one_broker_reaches_every_leader_in_order(
    cluster: WeirCluster, cluster_id: str
) -> None:
    topic = unique_topic_name("rest-cluster-stream")
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    cluster.wait_full_isr(topic)
    broker = cluster.brokers[1]
    keys = [f"key-{i % 9}" for i in range(60)]
    body = "".join(
        json.dumps(
            {"key": {"type": "STRING", "data": k}, "value": {"type": "STRING", "data": str(i)}}
        )
        for i, k in enumerate(keys)
    )

    def chunks() -> Iterator[bytes]:  # a generator body: httpx sends it chunked
        encoded = body.encode()
        for start in range(0, len(encoded), 700):
            yield encoded[start : start + 700]

    with httpx.Client(timeout=15.0) as http:
        answer = http.post(
            records_url(broker, cluster_id, topic) + "/records",
            content=chunks(),
            headers={"Content-Type": "application/json"},
        )
    assert answer.status_code == 200
    reports = [json.loads(line) for line in answer.text.splitlines()]
    assert [r["error_code"] for r in reports] == [200] * len(keys)
    assert [r["partition_id"] for r in reports] == [
        partition_for_key(k.encode(), PARTITIONS) for k in keys
    ]
    expected: dict[int, list[bytes]] = {}
    for i, key in enumerate(keys):
        expected.setdefault(partition_for_key(key.encode(), PARTITIONS), []).append(str(i).encode())
    got = consume_all(cluster, topic, {p: len(v) for p, v in expected.items()})
    assert {p: [m.value() for m in got[p]] for p in got} == expected


def test_any_broker_reads_and_follows_partitions_led_elsewhere(
    cluster: WeirCluster, cluster_id: str
) -> None:
    topic = unique_topic_name("rest-cluster-read")
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    cluster.wait_full_isr(topic)
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    for partition in range(PARTITIONS):
        producer.produce(topic, value=f"kafka-{partition}".encode(), partition=partition)
    assert producer.flush(CLIENT_WAIT_S) == 0
    leaders = {p: cluster.leader_of(topic, p) for p in range(PARTITIONS)}
    for node_id, broker in cluster.brokers.items():
        base = records_url(broker, cluster_id, topic)
        with httpx.Client(timeout=15.0) as http:
            elsewhere = next(p for p in range(PARTITIONS) if leaders[p] != node_id)
            page = http.get(f"{base}/partitions/{elsewhere}/records").json()
            assert [r["value"]["data"] for r in page["records"]] == [f"kafka-{elsewhere}"]
            seen: set[str] = set()
            with http.stream("GET", f"{base}/records/stream", params={"from": "beginning"}) as sse:
                for line in sse.iter_lines():
                    if line.startswith("data: "):
                        seen.add(json.loads(line[6:])["value"]["data"])
                        if len(seen) == PARTITIONS:
                            break
            assert seen == {f"kafka-{p}" for p in range(PARTITIONS)}
