"""Topic-level compression.type with real producers: a topic whose codec is not
`producer` stores every batch with its own codec, whatever the producer sent,
as Kafka does. The stored codec is read from the batch attributes of a raw Fetch
response; the contents through a real consumer. Set by CreateTopics,
IncrementalAlterConfigs (confluent-kafka) and AlterConfigs (kafka-python)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.wire_client import connect, round_trip
from weir.format.record_batch import RecordInput, build_batch, decode_records, iter_batch_headers

TIMEOUT_S = 20.0
PRODUCE, FETCH, INIT_PRODUCER_ID = 0, 1, 22
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
MESSAGES = [(f"key-{i}".encode(), (f"value-{i}-" * (i + 1)).encode()) for i in range(40)]


def stored_batches(broker: WeirProcess, topic: str) -> bytes:
    """The partition's stored batches, as a raw Fetch v11 returns them."""
    body = {
        "max_wait_ms": 0,
        "min_bytes": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
        "forgotten_topics_data": [],
    }
    with connect(broker) as sock:
        response = round_trip(sock, FETCH, 11, body)
    [answer] = response.responses[0].partitions
    assert answer.error_code == 0
    return bytes(answer.records or b"")


def stored_codecs(broker: WeirProcess, topic: str) -> set[int]:
    return {header.compression for _, header in iter_batch_headers(stored_batches(broker, topic))}


def stored_records(broker: WeirProcess, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    batches = stored_batches(broker, topic)
    return [(r.key, r.value) for r in decode_records(batches, uncompressed_bytes_max=1 << 24)]


def consume(broker: WeirProcess, topic: str, count: int) -> list[tuple[Any, Any]]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reader-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group rebalance to wait for
    received: list[tuple[Any, Any]] = []
    try:
        while len(received) < count:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"only {len(received)} of {count} records arrived"
            assert message.error() is None, message.error()
            received.append((message.key(), message.value()))
    finally:
        consumer.close()
    return received


def produce_with_confluent(broker: WeirProcess, topic: str, codec: str) -> None:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "compression.type": codec,
            "enable.idempotence": True,
            "linger.ms": 50,
        }
    )
    failures: list[Any] = []
    for key, value in MESSAGES:
        producer.produce(topic, key=key, value=value, on_delivery=lambda e, _m: failures.append(e))
    assert producer.flush(TIMEOUT_S) == 0
    assert [e for e in failures if e is not None] == []


def produce_with_kafka_python(broker: WeirProcess, topic: str, codec: str) -> None:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=50, acks="all"
    )
    try:
        futures = [producer.send(topic, key=key, value=value) for key, value in MESSAGES]
        producer.flush(TIMEOUT_S)
        for future in futures:
            future.get(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)


@pytest.mark.parametrize("target", ["lz4", "zstd", "uncompressed", "snappy"])
def test_confluent_gzip_batches_are_stored_with_the_topics_codec(
    broker: WeirProcess, topic: str, target: str
) -> None:
    create_topic(broker.bootstrap, topic, config={"compression.type": target})
    produce_with_confluent(broker, topic, "gzip")
    assert stored_codecs(broker, topic) == {CODECS[target]}
    assert stored_records(broker, topic) == MESSAGES
    assert consume(broker, topic, len(MESSAGES)) == MESSAGES
    assert broker.connection_trouble() == {}


def test_a_producer_topic_keeps_the_producers_codec(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, config={"compression.type": "producer"})
    produce_with_confluent(broker, topic, "gzip")
    assert stored_codecs(broker, topic) == {CODECS["gzip"]}
    assert consume(broker, topic, len(MESSAGES)) == MESSAGES


def test_incremental_alter_configs_changes_the_codec_of_later_batches(
    broker: WeirProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    produce_with_kafka_python(broker, topic, "gzip")  # stored as sent: gzip
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_S)
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    [entries] = [future.result(timeout=TIMEOUT_S) for future in described.values()]
    assert entries["compression.type"].value == "zstd"

    produce_with_kafka_python(broker, topic, "gzip")
    codecs = [h.compression for _, h in iter_batch_headers(stored_batches(broker, topic))]
    first_zstd = codecs.index(CODECS["zstd"])
    assert set(codecs[:first_zstd]) == {CODECS["gzip"]}
    assert set(codecs[first_zstd:]) == {CODECS["zstd"]}
    assert consume(broker, topic, 2 * len(MESSAGES)) == MESSAGES + MESSAGES
    assert broker.connection_trouble() == {}


def test_kafka_python_alter_configs_sets_the_codec(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.alter_configs(
            [
                KafkaPythonConfigResource(
                    ConfigResourceType.TOPIC, topic, {"compression.type": "lz4"}
                )
            ]
        )
    finally:
        admin.close()
    produce_with_kafka_python(broker, topic, "gzip")
    assert stored_codecs(broker, topic) == {CODECS["lz4"]}
    assert stored_records(broker, topic) == MESSAGES
    assert broker.connection_trouble() == {}


def test_an_unknown_codec_is_refused(broker: WeirProcess, topic: str) -> None:
    with pytest.raises(Exception, match="compression.type"):
        create_topic(broker.bootstrap, topic, config={"compression.type": "brotli"})


def test_a_retried_idempotent_batch_is_stored_once_after_the_rewrite(
    broker: WeirProcess, topic: str
) -> None:
    """The rewrite keeps producer id, epoch and base sequence: the broker still
    recognises a retry of a recompressed batch and answers it with the first
    append's offset, as it does for batches stored as sent."""
    create_topic(broker.bootstrap, topic, config={"compression.type": "zstd"})
    with connect(broker) as sock:
        ids = round_trip(
            sock, INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60_000}
        )
        assert ids.error_code == 0
        records: list[RecordInput] = [(key, value, []) for key, value in MESSAGES[:5]]
        batch = build_batch(
            records, compression=CODECS["gzip"], producer_id=ids.producer_id,
            producer_epoch=ids.producer_epoch, base_sequence=0,
        )  # fmt: skip
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        }
        answers = [round_trip(sock, PRODUCE, 9, body) for _ in range(2)]
    first, retry = (a.responses[0].partition_responses[0] for a in answers)
    assert (first.error_code, first.base_offset) == (0, 0)
    assert (retry.error_code, retry.base_offset) == (0, 0)
    [(_, stored)] = iter_batch_headers(stored_batches(broker, topic))
    assert stored.compression == CODECS["zstd"]
    assert (stored.producer_id, stored.base_sequence, stored.records_count) == (
        ids.producer_id, 0, 5,
    )  # fmt: skip
    assert broker.connection_trouble() == {}
