"""Control records: the transaction markers a coordinator writes (KIP-98).

A control batch is a RecordBatch v2 with the control and transactional
attribute bits set, the producer id and epoch of the transaction it ends, no
sequence (-1), uncompressed, holding one record:

    key   (4 bytes):  version int16 (0), type int16 (ABORT 0, COMMIT 1)
    value (6 bytes):  version int16 (0), coordinator_epoch int32

Kafka's parsing rules, followed here: a key or value shorter than its version 0
size, or with a negative version, is invalid; a newer version is read as
version 0 (its fields are a prefix). Other control types exist (KRaft's leader
change, snapshot header/footer, voters) but only ABORT and COMMIT end a
transaction; Weir never writes the others.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    Buffer,
    InvalidBatch,
    build_batch,
    decode_records,
    parse_batch_header,
)

__all__ = [
    "CONTROL_KEY_BYTES",
    "END_TXN_MARKER_VALUE_BYTES",
    "ControlRecordType",
    "EndTransactionMarker",
    "InvalidControlRecord",
    "build_end_txn_marker_batch",
    "decode_control_key",
    "encode_control_key",
    "read_end_txn_marker",
]

CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
CONTROL_KEY_BYTES = 4
END_TXN_MARKER_VALUE_BYTES = 6
NO_SEQUENCE = -1
# A marker batch is 78 bytes; anything a control batch inflates to past this is
# not a marker (control batches are written uncompressed anyway).
CONTROL_BATCH_INFLATE_BYTES_MAX = 64 * 1024

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    # KRaft's (never written by Weir, named so a reader can say what it found).
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class InvalidControlRecord(InvalidBatch):
    """A control record's key or value breaks its schema (Kafka's InvalidRecordException)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.INVALID_RECORD)


def encode_control_key(control_type: ControlRecordType) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def decode_control_key(key: Buffer | None) -> int:
    """The control type id of a control record's key (an int: unknown types are
    the caller's to ignore). Raises InvalidControlRecord."""
    if key is None or len(key) < CONTROL_KEY_BYTES:
        size = 0 if key is None else len(key)
        raise InvalidControlRecord(
            f"control record key has {size} bytes, needs at least {CONTROL_KEY_BYTES}"
        )
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidControlRecord(f"control record key version {version} is negative")
    return int(type_id)


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A COMMIT or ABORT marker, and the epoch of the coordinator that wrote it."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def __post_init__(self) -> None:
        if self.control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise ValueError(f"{self.control_type!r} does not end a transaction")

    @property
    def committed(self) -> bool:
        return self.control_type == ControlRecordType.COMMIT

    def encode_key(self) -> bytes:
        return encode_control_key(self.control_type)

    def encode_value(self) -> bytes:
        return _VALUE.pack(END_TXN_MARKER_VERSION, self.coordinator_epoch)

    @classmethod
    def decode(cls, key: Buffer | None, value: Buffer | None) -> EndTransactionMarker:
        """The marker of a control record. Raises InvalidControlRecord, also when
        the record is a control record of another type."""
        type_id = decode_control_key(key)
        if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise InvalidControlRecord(f"control type {type_id} is not a transaction marker")
        if value is None or len(value) < END_TXN_MARKER_VALUE_BYTES:
            size = 0 if value is None else len(value)
            raise InvalidControlRecord(
                f"end transaction marker has {size} bytes, needs {END_TXN_MARKER_VALUE_BYTES}"
            )
        version, coordinator_epoch = _VALUE.unpack_from(value, 0)
        if version < 0:
            raise InvalidControlRecord(f"end transaction marker version {version} is negative")
        return cls(ControlRecordType(type_id), coordinator_epoch)


def build_end_txn_marker_batch(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The control batch that ends producer `producer_id`'s transaction, as Kafka's
    coordinator sends it in WriteTxnMarkers: transactional and control bits set,
    no sequence, uncompressed, CreateTime `timestamp_ms`, one record."""
    if producer_id < 0:
        raise ValueError("an end transaction marker needs a producer id")
    return build_batch(
        [(marker.encode_key(), marker.encode_value(), [])],
        base_offset=base_offset,
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


def read_end_txn_marker(batch: Buffer, position: int = 0) -> EndTransactionMarker | None:
    """The marker held by the control batch at `position` of `batch` (the whole
    batch must be there), from its first record as Kafka reads it; None when the
    batch holds no record (compaction removed it: the transaction is gone).
    Raises InvalidBatch (not a control batch, bad CRC, truncated) or
    InvalidControlRecord."""
    header = parse_batch_header(batch, position)
    if not header.is_control:
        raise InvalidBatch(f"batch at offset {header.base_offset} is not a control batch")
    whole = memoryview(batch)[position : position + header.size]
    if len(whole) < header.size:
        raise InvalidBatch(f"control batch at offset {header.base_offset} is truncated")
    records = decode_records(
        whole, uncompressed_bytes_max=CONTROL_BATCH_INFLATE_BYTES_MAX, include_control=True
    )
    first = next(records, None)
    if first is None:
        return None
    return EndTransactionMarker.decode(first.key, first.value)
