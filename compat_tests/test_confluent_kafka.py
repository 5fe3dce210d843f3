"""confluent-kafka (librdkafka) against the real `weir serve` process.

Consumer groups are not implemented yet: consumers use assign() with explicit
start offsets and never commit or subscribe (librdkafka still insists on a group.id).
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from compat_tests.harness import WeirProcess

TIMEOUT_S = 15.0
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def admin(broker: WeirProcess) -> AdminClient:
    return AdminClient(
        {"bootstrap.servers": broker.bootstrap, "client.id": "compat-confluent-admin"}
    )


def create(admin: AdminClient, name: str, partitions: int = 1, **config: str) -> None:
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)],
        request_timeout=TIMEOUT_S,
    )
    assert futures[name].result(timeout=TIMEOUT_S) is None


def error_code_of(future: Any) -> int:
    """Run a failing admin future and return the KafkaError code it failed with."""
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT_S)
    error = raised.value.args[0]
    assert isinstance(error, KafkaError), repr(error)
    return error.code()


class DeliveryLog:
    """Collects delivery reports: (error, partition, offset, key, value)."""

    def __init__(self) -> None:
        self.reports: list[tuple[KafkaError | None, int, int, bytes | None, bytes | None]] = []

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        self.reports.append((err, msg.partition(), msg.offset(), msg.key(), msg.value()))

    def errors(self) -> list[KafkaError]:
        return [err for err, *_ in self.reports if err is not None]


def make_producer(broker: WeirProcess, **config: Any) -> Producer:
    settings: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap,
        "client.id": "compat-confluent-producer",
        "acks": "all",
        "linger.ms": 20,
        "message.timeout.ms": 20_000,
    }
    settings.update(config)
    return Producer(settings)


def make_consumer(broker: WeirProcess, **config: Any) -> Consumer:
    settings: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap,
        "client.id": "compat-confluent-consumer",
        "group.id": f"compat-unused-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
    }
    settings.update(config)
    return Consumer(settings)


def consume(consumer: Consumer, count: int, timeout_s: float = 20.0) -> list[Message]:
    """Poll until `count` messages arrived; any consumer error fails the test."""
    messages: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(messages) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.25)
        if msg is None:
            continue
        if msg.error() is not None:
            pytest.fail(f"consumer error after {len(messages)} messages: {msg.error()!r}")
        messages.append(msg)
    return messages


def read_partition(
    broker: WeirProcess, topic: str, partition: int, start: int, count: int
) -> list[Message]:
    consumer = make_consumer(broker)
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        return consume(consumer, count)
    finally:
        consumer.close()


def produce_and_flush(producer: Producer, log: DeliveryLog, expected: int) -> None:
    remaining = producer.flush(TIMEOUT_S)
    assert remaining == 0, f"{remaining} messages still undelivered after {TIMEOUT_S}s"
    assert len(log.reports) == expected
    assert log.errors() == []


# -- admin -----------------------------------------------------------------------------------


def test_create_topics_validate_only_creates_nothing(admin: AdminClient, topic: str) -> None:
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=2, replication_factor=1)],
        validate_only=True,
        request_timeout=TIMEOUT_S,
    )
    assert futures[topic].result(timeout=TIMEOUT_S) is None
    assert topic not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_create_topics_validate_only_rejects_invalid_config(admin: AdminClient, topic: str) -> None:
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1, config={"retention.ms": "soon"})],
        validate_only=True,
        request_timeout=TIMEOUT_S,
    )
    assert error_code_of(futures[topic]) == KafkaError.INVALID_CONFIG  # 40


def test_create_list_describe_delete_topics(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic, partitions=3)

    metadata = admin.list_topics(timeout=TIMEOUT_S)
    assert topic in metadata.topics
    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2]
    for partition in metadata.topics[topic].partitions.values():
        assert (partition.leader, partition.replicas, partition.isrs) == (1, [1], [1])
        assert partition.error is None
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == {
        1: ("127.0.0.1", broker.kafka_port)
    }

    description = admin.describe_topics(TopicCollection([topic]), request_timeout=TIMEOUT_S)[
        topic
    ].result(timeout=TIMEOUT_S)
    assert description.name == topic
    assert description.is_internal is False
    assert [p.id for p in description.partitions] == [0, 1, 2]
    for partition in description.partitions:
        assert partition.leader.id == 1
        assert [n.id for n in partition.replicas] == [1]
        assert [n.id for n in partition.isr] == [1]

    assert (
        admin.delete_topics([topic], request_timeout=TIMEOUT_S)[topic].result(timeout=TIMEOUT_S)
        is None
    )
    deadline = time.monotonic() + 5
    while topic in admin.list_topics(timeout=TIMEOUT_S).topics and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the real broker
    assert topic not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_create_existing_topic_fails_with_topic_already_exists(
    admin: AdminClient, topic: str
) -> None:
    create(admin, topic)
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    assert error_code_of(futures[topic]) == KafkaError.TOPIC_ALREADY_EXISTS  # 36


def test_create_topic_with_invalid_name_fails_with_invalid_topic(admin: AdminClient) -> None:
    name = "not a valid topic name!"
    futures = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    assert error_code_of(futures[name]) == KafkaError.TOPIC_EXCEPTION  # 17 INVALID_TOPIC_EXCEPTION


def test_create_partitions_grows_topic(admin: AdminClient, topic: str) -> None:
    create(admin, topic, partitions=1)
    futures = admin.create_partitions([NewPartitions(topic, 4)], request_timeout=TIMEOUT_S)
    assert futures[topic].result(timeout=TIMEOUT_S) is None
    assert sorted(admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions) == [
        0,
        1,
        2,
        3,
    ]
    futures = admin.create_partitions([NewPartitions(topic, 2)], request_timeout=TIMEOUT_S)
    assert error_code_of(futures[topic]) == KafkaError.INVALID_PARTITIONS  # 37


def describe_topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    futures = admin.describe_configs([resource], request_timeout=TIMEOUT_S)
    return futures[resource].result(timeout=TIMEOUT_S)


def test_describe_configs_reports_overrides_and_defaults(admin: AdminClient, topic: str) -> None:
    create(admin, topic, **{"retention.ms": "3600000", "max.message.bytes": "65536"})
    configs = describe_topic_configs(admin, topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].is_default is False
    assert configs["max.message.bytes"].value == "65536"
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].is_default is True


def test_incremental_alter_configs_sets_and_deletes_overrides(
    admin: AdminClient, topic: str
) -> None:
    create(admin, topic)
    default_retention_ms = describe_topic_configs(admin, topic)["retention.ms"].value
    assert default_retention_ms == "604800000"

    def alter(*entries: ConfigEntry) -> None:
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=list(entries))
        futures = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)
        futures[resource].result(timeout=TIMEOUT_S)

    alter(
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
    )
    configs = describe_topic_configs(admin, topic)
    assert configs["retention.ms"].value == "7200000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].value == "1048576"

    alter(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    configs = describe_topic_configs(admin, topic)
    assert configs["retention.ms"].value == default_retention_ms
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.bytes"].value == "1048576"  # untouched by the second alter


def test_incremental_alter_configs_rejects_unknown_config(admin: AdminClient, topic: str) -> None:
    create(admin, topic)
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    futures = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)
    assert error_code_of(futures[resource]) == KafkaError.INVALID_CONFIG  # 40


def test_describe_cluster_lists_this_broker_as_controller(
    admin: AdminClient, broker: WeirProcess
) -> None:
    cluster = admin.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert isinstance(cluster.cluster_id, str) and cluster.cluster_id
    assert cluster.controller is not None
    assert cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "127.0.0.1", broker.kafka_port)]


def produce_values(
    broker: WeirProcess,
    topic: str,
    values: list[bytes],
    timestamps_ms: list[int] | None = None,
    *,
    one_batch_each: bool = True,
) -> list[int]:
    """Produce to partition 0; returns the acknowledged offsets."""
    log = DeliveryLog()
    producer = make_producer(broker, **({"linger.ms": 500} if not one_batch_each else {}))
    for i, value in enumerate(values):
        kwargs: dict[str, Any] = {}
        if timestamps_ms is not None:
            kwargs["timestamp"] = timestamps_ms[i]
        producer.produce(topic, value=value, key=b"k", partition=0, on_delivery=log, **kwargs)
        if one_batch_each:
            producer.flush(TIMEOUT_S)
    produce_and_flush(producer, log, len(values))
    return [offset for _, _, offset, _, _ in log.reports]


def list_offsets(admin: AdminClient, topic: str, spec: OffsetSpec) -> tuple[int, int]:
    tp = TopicPartition(topic, 0)
    result = admin.list_offsets({tp: spec}, request_timeout=TIMEOUT_S)[tp].result(timeout=TIMEOUT_S)
    return result.offset, result.timestamp


def test_list_offsets_earliest_latest_max_timestamp_and_timestamp(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic)
    base_ms = int(time.time() * 1000) - 60_000
    timestamps = [base_ms, base_ms + 1000, base_ms + 10_000, base_ms + 3000, base_ms + 4000]
    offsets = produce_values(broker, topic, [f"v{i}".encode() for i in range(5)], timestamps)
    assert offsets == [0, 1, 2, 3, 4]

    assert list_offsets(admin, topic, OffsetSpec.earliest())[0] == 0
    assert list_offsets(admin, topic, OffsetSpec.latest())[0] == 5
    assert list_offsets(admin, topic, OffsetSpec.max_timestamp()) == (2, base_ms + 10_000)
    assert list_offsets(admin, topic, OffsetSpec.for_timestamp(base_ms + 500)) == (
        1,
        base_ms + 1000,
    )
    assert list_offsets(admin, topic, OffsetSpec.for_timestamp(base_ms + 3500)) == (
        2,
        base_ms + 10_000,
    )
    assert list_offsets(admin, topic, OffsetSpec.for_timestamp(base_ms + 20_000))[0] == -1


def test_list_offsets_for_timestamp_finds_record_inside_a_batch(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic)
    base_ms = int(time.time() * 1000) - 60_000
    timestamps = [base_ms + i * 1000 for i in range(5)]
    offsets = produce_values(
        broker, topic, [f"v{i}".encode() for i in range(5)], timestamps, one_batch_each=False
    )
    assert offsets == [0, 1, 2, 3, 4]
    assert list_offsets(admin, topic, OffsetSpec.for_timestamp(base_ms + 2500)) == (
        3,
        base_ms + 3000,
    )
    assert list_offsets(admin, topic, OffsetSpec.max_timestamp()) == (4, base_ms + 4000)


def test_delete_records_advances_earliest_offset(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic)
    offsets = produce_values(broker, topic, [f"v{i}".encode() for i in range(10)])
    assert offsets == list(range(10))

    tp = TopicPartition(topic, 0, 6)
    futures = admin.delete_records([tp], request_timeout=TIMEOUT_S)
    deleted = futures[tp].result(timeout=TIMEOUT_S)
    assert deleted.low_watermark == 6
    assert list_offsets(admin, topic, OffsetSpec.earliest())[0] == 6
    assert list_offsets(admin, topic, OffsetSpec.latest())[0] == 10

    messages = read_partition(broker, topic, 0, OFFSET_BEGINNING, 4)
    assert [(m.offset(), m.value()) for m in messages] == [
        (i, f"v{i}".encode()) for i in range(6, 10)
    ]


def test_unknown_topic_admin_operations_fail_with_unknown_topic_or_partition(
    admin: AdminClient, topic: str
) -> None:
    assert (
        error_code_of(admin.describe_topics(TopicCollection([topic]))[topic])
        == KafkaError.UNKNOWN_TOPIC_OR_PART
    )
    assert error_code_of(admin.delete_topics([topic])[topic]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert (
        error_code_of(admin.create_partitions([NewPartitions(topic, 2)])[topic])
        == KafkaError.UNKNOWN_TOPIC_OR_PART
    )
    resource = ConfigResource(ResourceType.TOPIC, topic)
    assert (
        error_code_of(admin.describe_configs([resource])[resource])
        == KafkaError.UNKNOWN_TOPIC_OR_PART
    )


# -- produce and consume -----------------------------------------------------------------------


def keyed_messages(codec: str, count: int) -> list[tuple[bytes | None, bytes | None, list]]:
    messages: list[tuple[bytes | None, bytes | None, list]] = []
    for i in range(count):
        key: bytes | None = f"key-{i % 7}".encode()
        value: bytes | None = (f"{codec}:{i}:" + "x" * (i * 13 % 300)).encode()
        headers = [
            ("index", str(i).encode()),
            ("codec", codec.encode()),
            ("dup", b"a"),
            ("dup", b"b"),
        ]
        if i == 5:
            key = None
        if i == 6:
            value = None
        messages.append((key, value, headers))
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_produce_with_compression_headers_and_keys_round_trips(
    admin: AdminClient, broker: WeirProcess, topic: str, codec: str
) -> None:
    create(admin, topic)
    messages = keyed_messages(codec, 200)
    log = DeliveryLog()
    producer = make_producer(broker, **{"compression.type": codec, "linger.ms": 50})
    for key, value, headers in messages:
        producer.produce(topic, value=value, key=key, headers=headers, partition=0, on_delivery=log)
    produce_and_flush(producer, log, len(messages))
    assert sorted(offset for _, _, offset, _, _ in log.reports) == list(range(200))
    delivered = {offset: (key, value) for _, _, offset, key, value in log.reports}
    assert delivered == {i: (key, value) for i, (key, value, _) in enumerate(messages)}

    received = read_partition(broker, topic, 0, OFFSET_BEGINNING, 200)
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in received] == [
        (i, key, value, headers) for i, (key, value, headers) in enumerate(messages)
    ]


def test_keyed_messages_land_on_one_partition_per_key(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic, partitions=3)
    log = DeliveryLog()
    producer = make_producer(broker)
    for i in range(60):
        producer.produce(
            topic, key=f"user-{i % 10}".encode(), value=str(i).encode(), on_delivery=log
        )
    produce_and_flush(producer, log, 60)

    partition_of_key: dict[bytes, set[int]] = {}
    per_partition: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {0: [], 1: [], 2: []}
    for _, partition, offset, key, value in log.reports:
        assert key is not None
        partition_of_key.setdefault(key, set()).add(partition)
        per_partition[partition].append((offset, key, value))
    assert all(len(parts) == 1 for parts in partition_of_key.values())

    for partition, delivered in per_partition.items():
        delivered.sort()
        assert [offset for offset, _, _ in delivered] == list(range(len(delivered)))
        received = read_partition(broker, topic, partition, OFFSET_BEGINNING, len(delivered))
        assert [(m.offset(), m.key(), m.value()) for m in received] == delivered


def test_assign_at_offset_end_reads_only_new_messages(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic)
    assert produce_values(broker, topic, [b"old-0", b"old-1", b"old-2"]) == [0, 1, 2]
    consumer = make_consumer(broker)
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        early = consume(consumer, 1, timeout_s=3.0)  # resolves the end offset; nothing to read
        assert early == []
        assert produce_values(broker, topic, [b"new-0", b"new-1"]) == [3, 4]
        messages = consume(consumer, 2)
    finally:
        consumer.close()
    assert [(m.offset(), m.value()) for m in messages] == [(3, b"new-0"), (4, b"new-1")]


def test_assign_at_specific_offset_starts_there(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic)
    produce_values(broker, topic, [f"v{i}".encode() for i in range(10)], one_batch_each=False)
    messages = read_partition(broker, topic, 0, 7, 3)
    assert [(m.offset(), m.value()) for m in messages] == [(7, b"v7"), (8, b"v8"), (9, b"v9")]


def test_assign_beyond_log_end_reports_offset_out_of_range(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic)
    produce_values(broker, topic, [b"a", b"b"])
    consumer = make_consumer(broker)  # auto.offset.reset=error surfaces the broker's answer
    try:
        consumer.assign([TopicPartition(topic, 0, 50)])
        deadline = time.monotonic() + 10
        error = None
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.25)
            if msg is not None:
                assert msg.error() is not None, f"unexpected message at offset {msg.offset()}"
                error = msg.error()
    finally:
        consumer.close()
    assert error is not None, "no error reported for an offset past the log end"
    assert error.code() == KafkaError._AUTO_OFFSET_RESET
    assert "out of range" in error.str().lower()


def test_message_larger_than_max_message_bytes_fails_with_message_too_large(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic, **{"max.message.bytes": "2048"})
    log = DeliveryLog()
    producer = make_producer(broker, **{"compression.type": "none"})
    producer.produce(topic, value=b"x" * 10_000, key=b"big", partition=0, on_delivery=log)
    producer.flush(TIMEOUT_S)
    assert len(log.reports) == 1
    err = log.reports[0][0]
    assert err is not None, "a 10 kB record was accepted by a topic with max.message.bytes=2048"
    assert err.code() == KafkaError.MSG_SIZE_TOO_LARGE  # 10 MESSAGE_TOO_LARGE

    # The topic still works, and nothing of the rejected batch was stored.
    assert produce_values(broker, topic, [b"small"]) == [0]
    assert list_offsets(admin, topic, OffsetSpec.latest())[0] == 1


def test_producer_to_missing_topic_without_auto_create_fails_with_unknown_topic(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    log = DeliveryLog()
    producer = make_producer(
        broker,
        **{"allow.auto.create.topics": False, "topic.metadata.propagation.max.ms": 1000},
    )
    producer.produce(topic, value=b"nobody home", on_delivery=log)
    producer.flush(TIMEOUT_S)
    # librdkafka 2.16 passes the broker's UNKNOWN_TOPIC_OR_PARTITION (3) through; older
    # releases map it to the local _UNKNOWN_TOPIC. Either names the missing topic.
    codes = [err.code() if err else None for err, *_ in log.reports]
    assert codes in ([KafkaError._UNKNOWN_TOPIC], [KafkaError.UNKNOWN_TOPIC_OR_PART])
    assert topic not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_producer_to_missing_topic_auto_creates_it_with_one_partition(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    log = DeliveryLog()
    producer = make_producer(broker)
    producer.produce(topic, key=b"k", value=b"first", on_delivery=log)
    produce_and_flush(producer, log, 1)
    assert [(p, o) for _, p, o, _, _ in log.reports] == [(0, 0)]
    assert sorted(admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions) == [0]


def test_consumer_subscribed_to_missing_topic_reports_unknown_topic(
    broker: WeirProcess, topic: str
) -> None:
    """librdkafka reports a missing subscribed topic as a consumer error from poll(), and
    only after topic.metadata.propagation.max.ms (30 s by default, since topic creation
    propagates asynchronously in a Kafka cluster): the test shortens that wait."""
    consumer = make_consumer(broker, **{"topic.metadata.propagation.max.ms": 1000})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 10
        error = None
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.25)
            if msg is not None:
                assert msg.error() is not None, "got a message from a topic that does not exist"
                error = msg.error()
    finally:
        consumer.close()
    assert error is not None, "no error reported for a topic that does not exist"
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, repr(error)


def test_consumer_assigned_to_missing_topic_reports_it_to_error_cb_and_reads_it_once_created(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    """What librdkafka does against Kafka when assign()ed to a missing topic: Metadata
    answers UNKNOWN_TOPIC_OR_PARTITION for it (consumers ask with auto-creation off), so
    there is no leader and no Fetch or ListOffsets is sent. After
    topic.metadata.propagation.max.ms the topic is marked non-existent and the broker's
    error goes to error_cb, never to poll(): rd_kafka_topic_set_notexists() ->
    rd_kafka_topic_propagate_notexists() -> rd_kafka_toppar_enq_error() enqueues an
    RD_KAFKA_OP_ERR, which rd_kafka_poll_cb() hands to error_cb (librdkafka
    src/rdkafka_topic.c, src/rdkafka.c; confluentinc/librdkafka#1755 reports the same
    against Apache Kafka 1.0.1). The consumer keeps refreshing metadata, so it reads the
    topic as soon as someone creates it."""
    errors: list[KafkaError] = []
    consumer = make_consumer(
        broker, error_cb=errors.append, **{"topic.metadata.propagation.max.ms": 1000}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            assert consumer.poll(0.25) is None, "poll() returned something for a missing topic"
        assert [e.code() for e in errors[:1]] == [KafkaError.UNKNOWN_TOPIC_OR_PART], errors
        assert "topic does not exist" in errors[0].str()
        create(admin, topic)
        log = DeliveryLog()
        producer = make_producer(broker)
        producer.produce(topic, value=b"late arrival", partition=0, on_delivery=log)
        produce_and_flush(producer, log, 1)
        assert [(m.offset(), m.value()) for m in consume(consumer, 1)] == [(0, b"late arrival")]
    finally:
        consumer.close()


def test_assign_inside_a_compressed_batch_starts_at_that_offset(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic)
    log = DeliveryLog()
    producer = make_producer(broker, **{"compression.type": "zstd", "linger.ms": 1000})
    for i in range(100):
        producer.produce(topic, value=f"z{i}".encode(), partition=0, on_delivery=log)
    produce_and_flush(producer, log, 100)
    messages = read_partition(broker, topic, 0, 60, 40)
    assert [(m.offset(), m.value()) for m in messages] == [
        (i, f"z{i}".encode()) for i in range(60, 100)
    ]


def test_large_message_near_the_default_limit_round_trips(
    admin: AdminClient, broker: WeirProcess, topic: str
) -> None:
    create(admin, topic)
    value = random.Random(3).randbytes(900_000)
    log = DeliveryLog()
    producer = make_producer(broker, **{"compression.type": "none"})
    producer.produce(topic, key=b"big", value=value, partition=0, on_delivery=log)
    produce_and_flush(producer, log, 1)
    [message] = read_partition(broker, topic, 0, OFFSET_BEGINNING, 1)
    assert (message.offset(), message.key(), len(message.value())) == (0, b"big", len(value))
    assert message.value() == value
