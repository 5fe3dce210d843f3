"""The `__transaction_state` records, in Kafka's own formats.

Transcribed from Kafka's transaction-coordinator message specs (TransactionLogKey,
TransactionLogValue). A stored key or value is an int16 version and then the body
(`weir.format.versioned_records`):

- key: TransactionLogKey version 0: the transactional id (a string). Never flexible.
- value: TransactionLogValue version 0 (not flexible) or 1 (flexible: compact
  strings and arrays and tagged fields). Its fields: producer id (int64), producer
  epoch (int16), transaction timeout (int32 ms), status (int8, `TxnState`), the
  partitions of the transaction (a nullable array of topic and partition ids; null
  when the state is Empty), the last update and the start timestamps (int64 ms).
  Version 1 adds three tagged fields: PreviousProducerId (tag 0, default -1),
  NextProducerId (tag 1, default -1) and ClientTransactionVersion (tag 2, default
  0); a tagged field equal to its default is not written. Kafka writes version 1
  once `transaction.version` >= 1, else 0.
  A null value (tombstone) removes an expired transactional id.

`TransactionLogEntry` is one value as plain data; `TransactionRecord` is what the
coordinator hands to the broker to append: key and value bytes, the transactional
id it places the record by, and the entry (or None for a tombstone), so that the
broker can report a durable record back (`records_durable`) without parsing it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from weir.format.schema import INT8, INT16, INT32, INT64, STRING, Array, Field, Message, Struct
from weir.format.versioned_records import (
    RecordFormatError,
    decode_record,
    encode_record,
    record_version,
)

TRANSACTION_LOG_KEY_VERSION = 0
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

TRANSACTION_LOG_KEY = Message(
    "TransactionLogKey",
    valid="0",
    flexible="none",
    fields=[Field("transactional_id", STRING)],
)

TRANSACTION_LOG_VALUE = Message(
    "TransactionLogValue",
    valid="0-1",
    flexible="1+",
    fields=[
        Field("producer_id", INT64),
        Field("previous_producer_id", INT64, "1+", tag=0, default=NO_PRODUCER_ID),
        Field("next_producer_id", INT64, "1+", tag=1, default=NO_PRODUCER_ID),
        Field("producer_epoch", INT16),
        Field("transaction_timeout_ms", INT32),
        Field("transaction_status", INT8),
        Field(
            "transaction_partitions",
            Array(Struct(Field("topic", STRING), Field("partition_ids", Array(INT32)))),
            nullable="0+",
        ),
        Field("transaction_last_update_timestamp_ms", INT64),
        Field("transaction_start_timestamp_ms", INT64),
        Field("client_transaction_version", INT16, "1+", tag=2, default=0),
    ],
)


class TxnState(enum.IntEnum):
    """A transaction's status, with the ids Kafka stores (TransactionState)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit")."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_KAFKA_NAME.get(name)


_BY_KAFKA_NAME = {state.kafka_name: state for state in TxnState}

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TransactionLogEntry:
    """One TransactionLogValue, as plain data."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


class TransactionRecord(NamedTuple):
    """One `__transaction_state` record to append (a None value is a tombstone)."""

    transactional_id: str
    key: bytes
    value: bytes | None
    entry: TransactionLogEntry | None


def encode_transaction_key(transactional_id: str) -> bytes:
    return encode_record(
        TRANSACTION_LOG_KEY, TRANSACTION_LOG_KEY_VERSION, {"transactional_id": transactional_id}
    )


def decode_transaction_key(data: bytes) -> str:
    """The transactional id of a key; RecordFormatError for any other record."""
    _, body = decode_record(TRANSACTION_LOG_KEY, data)
    transactional_id: str = body.transactional_id
    return transactional_id


def encode_transaction_value(entry: TransactionLogEntry, version: int) -> bytes:
    """`entry` as TransactionLogValue `version` (0 or 1)."""
    if entry.state == TxnState.EMPTY and entry.partitions:
        raise RecordFormatError("an Empty transaction has no partitions")
    partitions = None if entry.state == TxnState.EMPTY else _by_topic(entry.partitions)
    body: dict[str, Any] = {
        "producer_id": entry.producer_id,
        "producer_epoch": entry.producer_epoch,
        "transaction_timeout_ms": entry.timeout_ms,
        "transaction_status": int(entry.state),
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": entry.last_update_ms,
        "transaction_start_timestamp_ms": entry.start_ms,
    }
    if version >= 1:
        body["previous_producer_id"] = entry.previous_producer_id
        body["next_producer_id"] = entry.next_producer_id
        body["client_transaction_version"] = entry.client_transaction_version
    return encode_record(TRANSACTION_LOG_VALUE, version, body)


def decode_transaction_value(data: bytes | None) -> TransactionLogEntry | None:
    """The entry of a value (None for a tombstone); RecordFormatError if malformed or
    its status is not one Kafka defines."""
    if data is None:
        return None
    version, body = decode_record(TRANSACTION_LOG_VALUE, data)
    try:
        state = TxnState(body.transaction_status)
    except ValueError:
        raise RecordFormatError(f"unknown transaction status {body.transaction_status}") from None
    partitions: frozenset[TopicPartition] = frozenset()
    if state != TxnState.EMPTY and body.transaction_partitions is not None:
        partitions = frozenset(
            (topic.topic, partition)
            for topic in body.transaction_partitions
            for partition in topic.partition_ids
        )
    return TransactionLogEntry(
        producer_id=body.producer_id,
        producer_epoch=body.producer_epoch,
        timeout_ms=body.transaction_timeout_ms,
        state=state,
        partitions=partitions,
        last_update_ms=body.transaction_last_update_timestamp_ms,
        start_ms=body.transaction_start_timestamp_ms,
        previous_producer_id=body.previous_producer_id if version >= 1 else NO_PRODUCER_ID,
        next_producer_id=body.next_producer_id if version >= 1 else NO_PRODUCER_ID,
        client_transaction_version=body.client_transaction_version if version >= 1 else 0,
    )


def transaction_record(
    transactional_id: str, entry: TransactionLogEntry | None, value_version: int
) -> TransactionRecord:
    """The record that stores `entry` for `transactional_id` (None: its tombstone)."""
    value = None if entry is None else encode_transaction_value(entry, value_version)
    return TransactionRecord(
        transactional_id, encode_transaction_key(transactional_id), value, entry
    )


def is_transaction_key(data: bytes) -> bool:
    """Whether a key is a TransactionLogKey version (Kafka skips unknown key versions)."""
    return record_version(data) == TRANSACTION_LOG_KEY_VERSION


def partitions_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Topic -> its partition indexes, in the order given (requests and records name
    partitions topic by topic)."""
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return topics


def _by_topic(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [
        {"topic": topic, "partition_ids": ids}
        for topic, ids in partitions_by_topic(sorted(partitions)).items()
    ]
