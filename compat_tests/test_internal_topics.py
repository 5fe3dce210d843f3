"""Internal topics are the broker's, seen by real clients against the real `weir serve`.

`__consumer_offsets` and `__transaction_state` cannot be created (also with
validate_only), reconfigured, extended, deleted, truncated (DeleteRecords) or produced
to; committed offsets survive every such attempt and a restart; a batch of a producer
id the broker never issued is refused; a client-made
`__consumer_offsets` left in a data dir by an older Weir is made the broker's at start
without losing a committed offset.

confluent-kafka cannot choose its producer id, so those batches are built by
kafka-python's record codec and sent in a Produce v3 request encoded by hand, as
test_hostile_input.py does (transactional batches: test_transaction_hostile_input.py).
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from compat_tests.harness import SETTINGS_FILE_NAME, WeirProcess, create_topic
from compat_tests.test_hostile_input import connect, frame, recv_frame, request_header

# Legacy AlterConfigs is one of the ways a client could reconfigure an internal topic.
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = [OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC]
CLIENT_CONFIGS = {"cleanup.policy": "delete", "retention.ms": "3000"}
TIMEOUT_S = 20.0
PRODUCE = 0
INIT_PRODUCER_ID = 22
# Kafka error codes, as on the wire.
NONE = 0
INVALID_TOPIC_EXCEPTION = 17
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
UNKNOWN_PRODUCER_ID = 59


# -- clients -------------------------------------------------------------------------------


def admin_of(broker: WeirProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def error_of(future: Any) -> KafkaError | None:
    """The KafkaError a confluent-kafka admin future failed with, None if it succeeded."""
    try:
        future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0]
        assert isinstance(error, KafkaError)
        return error
    return None


def codes_of(futures: dict[Any, Any]) -> dict[Any, int]:
    errors = {key: error_of(future) for key, future in futures.items()}
    return {key: error.code() if error else KafkaError.NO_ERROR for key, error in errors.items()}


def consumer_of(broker: WeirProcess, group_id: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group_id,
            "enable.auto.commit": False,
        }
    )


def commit(broker: WeirProcess, group_id: str, topic: str, offsets: list[int]) -> None:
    consumer = consumer_of(broker, group_id)
    try:
        wanted = [TopicPartition(topic, p, o) for p, o in enumerate(offsets)]
        for result in consumer.commit(offsets=wanted, asynchronous=False):
            assert result.error is None
    finally:
        consumer.close()


def committed(broker: WeirProcess, group_id: str, topic: str, partitions: int) -> list[int]:
    consumer = consumer_of(broker, group_id)
    try:
        asked = [TopicPartition(topic, p) for p in range(partitions)]
        return [tp.offset for tp in consumer.committed(asked, timeout=TIMEOUT_S)]
    finally:
        consumer.close()


def end_offset(broker: WeirProcess, topic: str) -> int:
    consumer = consumer_of(broker, "watermarks")
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
        return int(high)
    finally:
        consumer.close()


# -- raw requests (encoded by hand, checked against Kafka's protocol) -----------------------


def init_producer_id(sock: socket.socket) -> int:
    """InitProducerId v0 without a transactional id; returns the issued producer id."""
    body = struct.pack(">hi", -1, 60_000)  # transactional_id null, transaction_timeout_ms
    sock.sendall(frame(request_header(INIT_PRODUCER_ID, 0, 1, flexible=False) + body))
    correlation_id, _throttle_ms, error, producer_id, epoch = struct.unpack(
        ">iihqh", recv_frame(sock)
    )
    assert (correlation_id, error, epoch) == (1, NONE, 0)
    return producer_id


def record_batch(producer_id: int, *, transactional: bool) -> bytes:
    """One record in a RecordBatch v2 built by kafka-python's codec."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=0, base_sequence=0, batch_size=1 << 20,
    )  # fmt: skip
    builder.append(0, timestamp=int(time.time() * 1000), key=b"k", value=b"v", headers=[])
    return bytes(builder.build())


def produce_v3(sock: socket.socket, topic: str, batch: bytes, correlation_id: int = 2) -> int:
    """Produce v3 (no transactional id, acks=all) of `batch` to partition 0; returns the
    partition's error code."""
    name = topic.encode()
    body = struct.pack(">hhi", -1, -1, 10_000)  # transactional_id null, acks, timeout_ms
    body += struct.pack(">ih", 1, len(name)) + name
    body += struct.pack(">iii", 1, 0, len(batch)) + batch
    sock.sendall(frame(request_header(PRODUCE, 3, correlation_id, flexible=False) + body))
    response = recv_frame(sock)
    answered_id, topics = struct.unpack_from(">ii", response, 0)
    (name_length,) = struct.unpack_from(">h", response, 8)
    partitions, index, error = struct.unpack_from(">iih", response, 10 + name_length)
    assert (answered_id, topics, partitions, index) == (correlation_id, 1, 1, 0)
    return int(error)


# -- what clients may not do ---------------------------------------------------------------


@pytest.fixture
def broker(module_broker: WeirProcess) -> WeirProcess:
    """One broker for this module whose offsets topic exists (a group committed)."""
    topic = "internal-topics-committed"
    if committed(module_broker, "internal-g", topic, 1) != [5]:
        create_topic(module_broker.bootstrap, topic)
        commit(module_broker, "internal-g", topic, [5])
    return module_broker


@pytest.mark.parametrize("validate_only", [False, True])
def test_creating_internal_topics_is_refused(broker: WeirProcess, validate_only: bool) -> None:
    topics = [NewTopic(name, 1, 1, config=CLIENT_CONFIGS) for name in INTERNAL_TOPICS]
    admin = admin_of(broker)  # alive until its futures are done
    futures = admin.create_topics(topics, validate_only=validate_only)
    assert codes_of(futures) == {name: KafkaError.INVALID_REQUEST for name in INTERNAL_TOPICS}
    listed = admin.list_topics(timeout=TIMEOUT_S).topics
    assert TRANSACTION_STATE_TOPIC not in listed
    assert len(listed[OFFSETS_TOPIC].partitions) == 50


@pytest.mark.parametrize("validate_only", [False, True])
def test_altering_internal_topic_configs_is_refused(
    broker: WeirProcess, validate_only: bool
) -> None:
    admin = admin_of(broker)
    legacy = [
        ConfigResource(ResourceType.TOPIC, n, set_config=CLIENT_CONFIGS) for n in INTERNAL_TOPICS
    ]
    set_retention = ConfigEntry("retention.ms", "3000", incremental_operation=AlterConfigOpType.SET)
    incremental = [
        ConfigResource(ResourceType.TOPIC, name, incremental_configs=[set_retention])
        for name in INTERNAL_TOPICS
    ]
    for futures in (
        admin.alter_configs(legacy, validate_only=validate_only),
        admin.incremental_alter_configs(incremental, validate_only=validate_only),
    ):
        assert sorted(codes_of(futures).values()) == [KafkaError.INVALID_REQUEST] * 2
    resource = ConfigResource(ResourceType.TOPIC, OFFSETS_TOPIC)
    described = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert described["cleanup.policy"].value == "compact"
    assert described["retention.ms"].value == "604800000"


def test_adding_partitions_to_internal_topics_is_refused(broker: WeirProcess) -> None:
    grown = [NewPartitions(name, 60) for name in INTERNAL_TOPICS]
    admin = admin_of(broker)
    futures = admin.create_partitions(grown)
    assert codes_of(futures) == {name: KafkaError.INVALID_REQUEST for name in INTERNAL_TOPICS}
    listed = admin.list_topics(OFFSETS_TOPIC, timeout=TIMEOUT_S).topics
    assert len(listed[OFFSETS_TOPIC].partitions) == 50


def test_delete_records_on_internal_topics_is_refused(broker: WeirProcess) -> None:
    admin = admin_of(broker)
    futures = admin.delete_records(
        [TopicPartition(OFFSETS_TOPIC, p, OFFSET_END) for p in range(50)]
    )
    assert set(codes_of(futures).values()) == {KafkaError.TOPIC_EXCEPTION}
    assert committed(broker, "internal-g", "internal-topics-committed", 1) == [5]


def test_producing_to_internal_topics_is_refused(broker: WeirProcess) -> None:
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10_000})
    producer.produce(OFFSETS_TOPIC, b"garbage", key=b"garbage", partition=0,
                     on_delivery=lambda error, _message: errors.append(error))  # fmt: skip
    assert producer.flush(TIMEOUT_S) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.TOPIC_EXCEPTION]
    with connect(broker) as sock:
        producer_id = init_producer_id(sock)
        for correlation_id, topic in enumerate(INTERNAL_TOPICS, start=2):
            batch = record_batch(producer_id, transactional=False)
            assert produce_v3(sock, topic, batch, correlation_id) == INVALID_TOPIC_EXCEPTION


def test_an_idempotent_batch_of_a_never_issued_producer_id_is_refused(
    broker: WeirProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    with connect(broker) as sock:
        issued = init_producer_id(sock)
        never_issued = issued + 1_000_000  # ids are reserved in blocks of 1000
        assert produce_v3(sock, topic, record_batch(never_issued, transactional=False), 2) == (
            UNKNOWN_PRODUCER_ID
        )
        assert produce_v3(sock, topic, record_batch(issued, transactional=False), 3) == NONE
    assert end_offset(broker, topic) == 1


# -- committed offsets survive ---------------------------------------------------------------


@pytest.fixture
def configured_broker(tmp_path: Path) -> Iterator[tuple[WeirProcess, Path]]:
    """A broker of this test alone that checks retention every 200 ms, and its TOML
    settings file (rewrite it, then restart, to change a setting)."""
    proc = WeirProcess.configured(tmp_path, "retention_check_interval_ms = 200\n")
    try:
        proc.start()
        yield proc, tmp_path / SETTINGS_FILE_NAME
    finally:
        proc.close()


def try_everything_on_internal_topics(broker: WeirProcess) -> None:
    """Every way a client could reach the offsets topic; none may take effect."""
    admin = admin_of(broker)
    attempts: list[Callable[[], dict[Any, Any]]] = [
        lambda: admin.create_topics([NewTopic(OFFSETS_TOPIC, 1, 1, config=CLIENT_CONFIGS)]),
        lambda: admin.alter_configs(
            [ConfigResource(ResourceType.TOPIC, OFFSETS_TOPIC, set_config=CLIENT_CONFIGS)]
        ),
        lambda: admin.create_partitions([NewPartitions(OFFSETS_TOPIC, 60)]),
        lambda: admin.delete_records(
            [TopicPartition(OFFSETS_TOPIC, p, OFFSET_END) for p in range(50)]
        ),
        lambda: admin.delete_topics([OFFSETS_TOPIC], operation_timeout=TIMEOUT_S),
    ]
    for attempt in attempts:
        assert KafkaError.NO_ERROR not in codes_of(attempt()).values()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10_000})
    for partition in range(50):
        producer.produce(OFFSETS_TOPIC, b"garbage", key=b"\x00\x01garbage", partition=partition)
    producer.flush(TIMEOUT_S)


def make_offsets_topic_client_made(broker: WeirProcess) -> Path:
    """Stop the broker and rewrite its metadata as an older Weir left it when a client
    had created `__consumer_offsets`: not internal, deleting records after 3 s."""
    broker.stop()
    metadata_path = broker.data_dir / "cluster-metadata.json"
    document = json.loads(metadata_path.read_text())
    [offsets_topic] = [t for t in document["topics"] if t["name"] == OFFSETS_TOPIC]
    offsets_topic["is_internal"] = False
    offsets_topic["configs"] = dict(CLIENT_CONFIGS)
    metadata_path.write_text(json.dumps(document))
    return metadata_path


def test_deleting_internal_topics_is_refused_even_a_client_made_one(
    configured_broker: tuple[WeirProcess, Path], topic: str
) -> None:
    broker, _settings = configured_broker
    create_topic(broker.bootstrap, topic)
    commit(broker, "kept", topic, [9])
    make_offsets_topic_client_made(broker)
    broker.start()
    admin = admin_of(broker)
    futures = admin.delete_topics(INTERNAL_TOPICS, operation_timeout=TIMEOUT_S)
    assert codes_of(futures) == {
        OFFSETS_TOPIC: KafkaError.INVALID_REQUEST,
        TRANSACTION_STATE_TOPIC: KafkaError.UNKNOWN_TOPIC_OR_PART,  # never created
    }
    assert OFFSETS_TOPIC in admin.list_topics(timeout=TIMEOUT_S).topics
    assert committed(broker, "kept", topic, 1) == [9]


def test_committed_offsets_survive_every_refused_attempt_and_a_restart(
    configured_broker: tuple[WeirProcess, Path], topic: str
) -> None:
    broker, _settings = configured_broker
    create_topic(broker.bootstrap, topic, partitions=2)
    commit(broker, "survivor", topic, [11, 22])
    try_everything_on_internal_topics(broker)
    time.sleep(4.0)  # past the retention.ms a client asked for, had it taken effect
    broker.restart()
    assert committed(broker, "survivor", topic, 2) == [11, 22]
    listed = admin_of(broker).list_topics(OFFSETS_TOPIC, timeout=TIMEOUT_S).topics
    assert len(listed[OFFSETS_TOPIC].partitions) == 50


def test_a_client_made_offsets_topic_in_an_existing_data_dir_becomes_the_brokers(
    configured_broker: tuple[WeirProcess, Path], topic: str
) -> None:
    broker, settings = configured_broker
    settings.write_text("retention_check_interval_ms = 200\noffsets_topic_partition_count = 1\n")
    broker.restart()
    create_topic(broker.bootstrap, topic, partitions=2)
    commit(broker, "upgraded", topic, [3, 4])
    metadata_path = make_offsets_topic_client_made(broker)
    settings.write_text("retention_check_interval_ms = 200\n")  # 50 offsets partitions

    broker.start()
    stderr = broker.stderr_text()
    assert "WARNING" in stderr and "retention.ms: 3000 -> (default)" in stderr
    assert "cleanup.policy: delete -> compact" in stderr and "keeping 1" in stderr
    assert committed(broker, "upgraded", topic, 2) == [3, 4]
    time.sleep(4.0)  # past the client's retention.ms, with retention checked every 200 ms
    commit(broker, "upgraded-later", topic, [5, 6])
    broker.restart()
    assert committed(broker, "upgraded", topic, 2) == [3, 4]
    assert committed(broker, "upgraded-later", topic, 2) == [5, 6]
    broker.stop()
    [adopted] = [
        t for t in json.loads(metadata_path.read_text())["topics"] if t["name"] == OFFSETS_TOPIC
    ]
    assert adopted["is_internal"] is True and adopted["partition_count"] == 1
    assert adopted["configs"]["cleanup.policy"] == "compact"
    assert "retention.ms" not in adopted["configs"]
