"""kafka-python (pure-Python client) against the real `weir serve` process."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kafka.errors as kafka_errors
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from compat_tests.harness import WeirProcess

CLIENT_TIMEOUT_MS = 15_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def admin(broker: WeirProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap,
        client_id="compat-kafka-python-admin",
        request_timeout_ms=CLIENT_TIMEOUT_MS,
    )
    try:
        yield client
    finally:
        client.close()


def make_producer(broker: WeirProcess, **config: Any) -> KafkaProducer:
    settings: dict[str, Any] = {
        "bootstrap_servers": broker.bootstrap,
        "client_id": "compat-kafka-python-producer",
        "enable_idempotence": False,
        "linger_ms": 20,
        "request_timeout_ms": CLIENT_TIMEOUT_MS,
    }
    settings.update(config)
    return KafkaProducer(**settings)


def make_consumer(broker: WeirProcess) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        client_id="compat-kafka-python-consumer",
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=CLIENT_TIMEOUT_MS + 5_000,
    )


def poll_records(consumer: KafkaConsumer, tp: TopicPartition, count: int, timeout_s: float = 20.0):
    """Poll until `count` records of `tp` arrived (or the deadline passed); returns them."""
    records: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=250)
        records.extend(batch.get(tp, []))
    return records


def read_partition(
    broker: WeirProcess, tp: TopicPartition, count: int, *, start: int | None = None
) -> list[Any]:
    consumer = make_consumer(broker)
    try:
        consumer.assign([tp])
        if start is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
        return poll_records(consumer, tp, count)
    finally:
        consumer.close()


def wait_until(predicate, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)  # polling the real broker
    return predicate()


# -- admin -----------------------------------------------------------------------------------


def test_admin_creates_lists_describes_and_deletes_topics(
    admin: KafkaAdminClient, topic: str
) -> None:
    created = admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}})
    assert [(t["name"], t["error_code"]) for t in created["topics"]] == [(topic, 0)]

    assert topic in admin.list_topics()

    [described] = admin.describe_topics([topic])
    assert described["name"] == topic
    assert described["error_code"] == 0
    assert described["is_internal"] is False
    partitions = sorted(described["partitions"], key=lambda p: p["partition_index"])
    assert [p["partition_index"] for p in partitions] == [0, 1, 2]
    for partition in partitions:
        assert partition["error_code"] == 0
        assert partition["leader_id"] == 1
        assert partition["replica_nodes"] == [1]
        assert partition["isr_nodes"] == [1]

    deleted = admin.delete_topics([topic])
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [(topic, 0)]
    assert wait_until(lambda: topic not in admin.list_topics()), "deleted topic still listed"


def test_admin_create_existing_topic_reports_topic_already_exists(
    admin: KafkaAdminClient, topic: str
) -> None:
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    again = admin.create_topics(
        {topic: {"num_partitions": 1, "replication_factor": 1}}, raise_errors=False
    )
    [result] = again["topics"]
    assert result["name"] == topic
    assert result["error_code"] == kafka_errors.TopicAlreadyExistsError.errno  # 36


def test_admin_delete_unknown_topic_reports_unknown_topic_or_partition(
    admin: KafkaAdminClient, topic: str
) -> None:
    result = admin.delete_topics([topic], raise_errors=False)
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [
        (topic, kafka_errors.UnknownTopicOrPartitionError.errno)  # 3
    ]


def test_admin_create_partitions_grows_topic(admin: KafkaAdminClient, topic: str) -> None:
    admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}})
    response = admin.create_partitions({topic: 5})
    assert [(r.name, r.error_code) for r in response.results] == [(topic, 0)]
    [described] = admin.describe_topics([topic])
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2, 3, 4]

    # Shrinking is not allowed: INVALID_PARTITIONS (37).
    shrink = admin.create_partitions({topic: 3}, raise_errors=False)
    assert [(r.name, r.error_code) for r in shrink.results] == [
        (topic, kafka_errors.InvalidPartitionsError.errno)
    ]


def test_admin_describe_configs_shows_overrides_and_defaults(
    admin: KafkaAdminClient, topic: str
) -> None:
    admin.create_topics(
        {
            topic: {
                "num_partitions": 1,
                "replication_factor": 1,
                "configs": {"retention.ms": "3600000"},
            }
        }
    )
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert set(modified["topic"][topic]) == {"retention.ms"}
    entry = modified["topic"][topic]["retention.ms"]
    assert entry["value"] == "3600000"
    assert entry["config_source"] == "DYNAMIC_TOPIC_CONFIG"

    everything = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
    )
    configs = everything["topic"][topic]
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["max.message.bytes"]["value"] == "1048588"
    assert configs["retention.ms"]["value"] == "3600000"


def test_admin_alter_configs_changes_topic_config(admin: KafkaAdminClient, topic: str) -> None:
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    result = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "7200000"})]
    )
    assert result == {"topic": {topic: "OK"}}
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert described["topic"][topic]["retention.ms"]["value"] == "7200000"


def test_admin_alter_configs_non_incremental_replaces_topic_config(
    admin: KafkaAdminClient, topic: str
) -> None:
    admin.create_topics(
        {
            topic: {
                "num_partitions": 1,
                "replication_factor": 1,
                "configs": {"retention.ms": "3600000"},
            }
        }
    )
    result = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, {"segment.ms": "600000"})],
        incremental=False,
    )
    assert result == {"topic": {topic: "OK"}}
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    # kafka-python re-sends the existing overrides with a non-incremental alter.
    values = {name: entry["value"] for name, entry in described["topic"][topic].items()}
    assert values == {"retention.ms": "3600000", "segment.ms": "600000"}


def test_admin_delete_records_moves_log_start_offset(
    broker: WeirProcess, admin: KafkaAdminClient, topic: str
) -> None:
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    producer = make_producer(broker, acks="all")
    offsets = [producer.send(topic, f"v{i}".encode()).get(timeout=15).offset for i in range(10)]
    producer.close()
    assert offsets == list(range(10))

    tp = TopicPartition(topic, 0)
    result = admin.delete_records({tp: 6})
    assert result[tp]["low_watermark"] == 6
    assert result[tp]["error_code"] == 0

    consumer = make_consumer(broker)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 6}
        assert consumer.end_offsets([tp]) == {tp: 10}
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = poll_records(consumer, tp, 4)
    finally:
        consumer.close()
    assert [(r.offset, r.value) for r in records] == [(i, f"v{i}".encode()) for i in range(6, 10)]


# -- produce and consume -----------------------------------------------------------------------


def expected_messages(codec: str, count: int) -> list[tuple[bytes | None, bytes | None, list]]:
    messages: list[tuple[bytes | None, bytes | None, list]] = []
    for i in range(count):
        key: bytes | None = f"key-{i}".encode()
        value: bytes | None = f"{codec} value {i} ".encode() * (1 + i % 7)
        headers = [("index", str(i).encode()), ("codec", codec.encode()), ("empty", b"")]
        if i == 3:
            key = None  # a record without key
        if i == 4:
            value = None  # a tombstone
        messages.append((key, value, headers))
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_keyed_produce_with_headers_round_trips_exactly_per_codec(
    broker: WeirProcess, admin: KafkaAdminClient, topic: str, codec: str
) -> None:
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    messages = expected_messages(codec, 50)
    producer = make_producer(
        broker, acks="all", compression_type=None if codec == "none" else codec
    )
    futures = [
        producer.send(topic, key=key, value=value, headers=headers, partition=0)
        for key, value, headers in messages
    ]
    producer.flush(timeout=20)
    acked = [f.get(timeout=15) for f in futures]
    producer.close()
    assert [(m.partition, m.offset) for m in acked] == [(0, i) for i in range(50)]

    records = read_partition(broker, TopicPartition(topic, 0), 50)
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
        (i, key, value, headers) for i, (key, value, headers) in enumerate(messages)
    ]
    assert [r.timestamp for r in records] == [m.timestamp for m in acked]


def test_consume_from_earliest_reads_every_partition_in_order(
    broker: WeirProcess, admin: KafkaAdminClient, topic: str
) -> None:
    admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}})
    producer = make_producer(broker, acks="all")
    for partition in range(3):
        for i in range(5):
            producer.send(topic, key=b"k", value=f"p{partition}-{i}".encode(), partition=partition)
    producer.flush(timeout=20)
    producer.close()

    consumer = make_consumer(broker)
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(3)}
        deadline = time.monotonic() + 20
        while sum(map(len, got.values())) < 15 and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=250).items():
                got[tp.partition].extend((r.offset, r.value) for r in records)
    finally:
        consumer.close()
    assert got == {p: [(i, f"p{p}-{i}".encode()) for i in range(5)] for p in range(3)}


def test_consume_from_latest_reads_only_new_messages(
    broker: WeirProcess, admin: KafkaAdminClient, topic: str
) -> None:
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    tp = TopicPartition(topic, 0)
    producer = make_producer(broker, acks="all")
    for i in range(3):
        producer.send(topic, f"old-{i}".encode()).get(timeout=15)

    consumer = make_consumer(broker)
    try:
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 3
        for i in range(2):
            producer.send(topic, f"new-{i}".encode()).get(timeout=15)
        records = poll_records(consumer, tp, 2)
    finally:
        consumer.close()
        producer.close()
    assert [(r.offset, r.value) for r in records] == [(3, b"new-0"), (4, b"new-1")]


def test_consume_from_specific_offset_starts_there(
    broker: WeirProcess, admin: KafkaAdminClient, topic: str
) -> None:
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    producer = make_producer(broker, acks="all")
    for i in range(10):
        producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    producer.flush(timeout=20)
    producer.close()

    records = read_partition(broker, TopicPartition(topic, 0), 3, start=7)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (7, b"k7", b"v7"),
        (8, b"k8", b"v8"),
        (9, b"k9", b"v9"),
    ]


def test_offsets_for_times_finds_first_offset_at_or_after_timestamp(
    broker: WeirProcess, admin: KafkaAdminClient, topic: str
) -> None:
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    base_ms = int(time.time() * 1000) - 60_000
    producer = make_producer(broker, acks="all")
    for i in range(5):  # one batch per record
        producer.send(topic, f"v{i}".encode(), timestamp_ms=base_ms + i * 1000).get(timeout=15)
    producer.close()

    tp = TopicPartition(topic, 0)
    consumer = make_consumer(broker)
    try:
        found = consumer.offsets_for_times({tp: base_ms + 2500})
        assert (found[tp].offset, found[tp].timestamp) == (3, base_ms + 3000)
        found = consumer.offsets_for_times({tp: base_ms})
        assert (found[tp].offset, found[tp].timestamp) == (0, base_ms)
        found = consumer.offsets_for_times({tp: base_ms + 4000})
        assert (found[tp].offset, found[tp].timestamp) == (4, base_ms + 4000)
        assert consumer.offsets_for_times({tp: base_ms + 4001}) == {tp: None}
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 5}
    finally:
        consumer.close()


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_produce_with_acks_stores_every_message(
    broker: WeirProcess, admin: KafkaAdminClient, topic: str, acks: int | str
) -> None:
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    producer = make_producer(broker, acks=acks)
    futures = [producer.send(topic, key=b"k", value=f"acks-{acks}-{i}".encode()) for i in range(20)]
    producer.flush(timeout=20)
    acked = [f.get(timeout=15) for f in futures]
    producer.close()
    if acks != 0:  # with acks=0 there is no response, and kafka-python makes offsets up
        assert [m.offset for m in acked] == list(range(20))

    records = read_partition(broker, TopicPartition(topic, 0), 20)
    assert [(r.offset, r.value) for r in records] == [
        (i, f"acks-{acks}-{i}".encode()) for i in range(20)
    ]


def test_default_producer_config_round_trips(
    broker: WeirProcess, admin: KafkaAdminClient, topic: str
) -> None:
    """kafka-python's defaults (idempotence on unless the broker looks too old) must work."""
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS
    )
    offsets = [producer.send(topic, f"d{i}".encode()).get(timeout=15).offset for i in range(3)]
    producer.close()
    assert offsets == [0, 1, 2]
    records = read_partition(broker, TopicPartition(topic, 0), 3)
    assert [(r.offset, r.value) for r in records] == [(0, b"d0"), (1, b"d1"), (2, b"d2")]


def test_consume_from_offset_inside_a_compressed_batch(
    broker: WeirProcess, admin: KafkaAdminClient, topic: str
) -> None:
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    producer = make_producer(broker, acks="all", compression_type="gzip", linger_ms=1000)
    futures = [producer.send(topic, f"batched-{i}".encode(), partition=0) for i in range(50)]
    producer.flush(timeout=20)
    assert [f.get(timeout=15).offset for f in futures] == list(range(50))
    producer.close()

    records = read_partition(broker, TopicPartition(topic, 0), 25, start=25)
    assert [(r.offset, r.value) for r in records] == [
        (i, f"batched-{i}".encode()) for i in range(25, 50)
    ]
