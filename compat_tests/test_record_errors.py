"""KIP-467: a Produce (v8+) refused because of some of its records lists them in
`record_errors` (their index in the batch and why) with the partition's
`error_message`, as Kafka does, so a client can tell the bad records from the
ones refused only for sharing their batch. Checked with raw Produce v8 and v9
requests, and with kafka-python, which reports each record's own error."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.errors import InvalidRecordError, KafkaError

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.wire_client import connect, round_trip
from weir.format.compression import Codec
from weir.format.record_batch import RecordInput, build_batch

PRODUCE = 0
INVALID_RECORD = 87
INVALID_TIMESTAMP = 32
TIMEOUT_S = 20.0


def produce_raw(broker: WeirProcess, topic: str, version: int, batch: bytes) -> Any:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    with connect(broker) as sock:
        response = round_trip(sock, PRODUCE, version, body)
    [topic_answer] = response.responses
    [answer] = topic_answer.partition_responses
    return answer


@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD])
def test_keyless_records_on_a_compacted_topic_are_named(
    broker: WeirProcess, topic: str, version: int, codec: Codec
) -> None:
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    records: list[RecordInput] = [(b"a", b"1", []), (None, b"2", []), (b"c", b"3", []),
                                  (None, b"4", [])]  # fmt: skip
    answer = produce_raw(broker, topic, version, build_batch(records, compression=codec))
    why = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert answer.error_code == INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
        (1, why),
        (3, why),
    ]
    assert answer.error_message.startswith(
        "One or more records have been rejected due to 2 record errors in total"
    )
    assert answer.base_offset == -1
    keyed = produce_raw(broker, topic, version, build_batch([(b"a", b"1", [])]))
    assert (keyed.error_code, keyed.base_offset, keyed.record_errors) == (0, 0, [])
    assert broker.connection_trouble() == {}


@pytest.mark.parametrize("version", [8, 9])
def test_records_outside_the_timestamp_window_are_named(
    broker: WeirProcess, topic: str, version: int
) -> None:
    create_topic(broker.bootstrap, topic, config={"message.timestamp.before.max.ms": "60000"})
    now_ms = int(time.time() * 1000)
    records: list[RecordInput] = [(b"a", b"1", [], now_ms), (b"b", b"2", [], now_ms - 3_600_000)]
    answer = produce_raw(broker, topic, version, build_batch(records))
    assert answer.error_code == INVALID_TIMESTAMP
    assert answer.error_message == "One or more records have been rejected due to invalid timestamp"
    [error] = answer.record_errors
    assert error.batch_index == 1
    assert error.batch_index_error_message.startswith(
        f"Timestamp {now_ms - 3_600_000} of message with offset 1 is out of range."
    )


def test_kafka_python_reports_the_bad_record_apart_from_its_batch_mates(
    broker: WeirProcess, topic: str
) -> None:
    """kafka-python (3.x) gives a record listed in record_errors its own message and
    the others of the batch a generic "part of a batch" error."""
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=500, retries=0)
    try:
        futures = [producer.send(topic, key=None if i == 1 else b"k", value=b"v") for i in range(3)]
        producer.flush(TIMEOUT_S)
        errors: list[BaseException] = []
        for future in futures:
            with pytest.raises(KafkaError) as raised:
                future.get(TIMEOUT_S)
            errors.append(raised.value)
    finally:
        producer.close(TIMEOUT_S)
    assert isinstance(errors[1], InvalidRecordError)
    assert "Compacted topic cannot accept message without key" in str(errors[1])
    for other in (errors[0], errors[2]):
        assert not isinstance(other, InvalidRecordError)
        assert "part of a batch which had one more more invalid records" in str(other)
    assert broker.connection_trouble() == {}
