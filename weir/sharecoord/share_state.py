"""A share partition's durable state, and its `__share_group_state` record.

What must survive a broker's death for a share group's partition (KIP-932): the share
partition start offset (every record below it is done), the state epoch (moved by
the share coordinator when the state is reset, so that a stale leader's write is
fenced), the leader epoch of the partition leader that wrote it, and a batch (first
offset, last offset, state, delivery count) for every in-flight range that is not a
never-delivered AVAILABLE record. Kafka's DeliveryState byte: 0 AVAILABLE,
2 ACKNOWLEDGED, 3 ARCHIVING (Kafka 4.4, KIP-1191: archived, its dead letter not yet
written), 4 ARCHIVED. An ACQUIRED record is written as AVAILABLE with its
delivery count: after a failover it is delivered again and its count goes on from
where it was, so no record is delivered more than `share.delivery.count.limit` times
across crashes (Kafka persists on acknowledgement, not on acquisition, so after a
crash its count can be one short; Weir's driver writes the state after acquiring).

The record is Kafka 4.4's ShareSnapshot (share-coordinator's `ShareSnapshotKey.json`
and `ShareSnapshotValue.json`, coordinator record type 0), declared in the schema DSL:

| part | version | fields |
|---|---|---|
| key | 0 (the record type) | GroupId string, TopicId uuid, Partition int32 |
| value | 0, flexible | SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32, |
| | | StartOffset int64, tag 0: DeliveryCompleteCount int32 (default -1), |
| | | CreateTimestamp int64, WriteTimestamp int64, StateBatches [FirstOffset |
| | | int64, LastOffset int64, DeliveryState int8, DeliveryCount int16, |
| | | tag 0x5746 (Weir's): VisibleTimestamp int64 (default 0)], |
| | | tag 0x5745 (Weir's): DeadLetterMark int64 (default -1) |

Weir writes snapshots only (never Kafka's ShareUpdate deltas, record type 1).
DeadLetterMark is Weir's own tagged field (a reader that does not know the tag skips
it, as Kafka would): while records are ARCHIVING, an offset of the group's
dead-letter partition at or below every dead letter written for them, so that a
broker that crashed between writing dead letters and storing them ARCHIVED finds
them by reading the dead-letter partition from there
(`weir.broker.coordinators.dead_letters`). -1: none.

VisibleTimestamp is Weir's own tagged field (a reader that does not know it skips
it, as Kafka's tagged-field rules require): the wall-clock time (epoch ms) before
which an AVAILABLE batch may not be delivered again, set by a release backoff
(`weir.share.release.backoff.*`), so that a restart does not shorten a backoff.
0 for every other batch.

Decoding never trusts the bytes (`weir.format.versioned_records` bounds lengths and
array counts); on top of that a decoded state must be well formed (`ShareState`'s
checks: batches in order and disjoint, none below the start offset, known states,
counts in range) and span at most `STATE_SPAN_RECORDS_MAX` offsets, because loading
a state allocates one entry per offset in flight. Anything else raises
`RecordFormatError`.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from weir.format.schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    Array,
    Field,
    Message,
    Struct,
)
from weir.format.versioned_records import (
    RecordFormatError,
    decode_record,
    encode_record,
    record_version,
)

__all__ = [
    "NO_DEAD_LETTER_MARK",
    "SHARE_SNAPSHOT_KEY",
    "SHARE_SNAPSHOT_RECORD_TYPE",
    "SHARE_SNAPSHOT_VALUE",
    "STATE_SPAN_RECORDS_MAX",
    "RecordFormatError",
    "RecordState",
    "ShareSnapshot",
    "ShareState",
    "ShareStateKey",
    "StateBatch",
    "decode_share_snapshot_key",
    "decode_share_snapshot_value",
    "encode_share_snapshot",
]


class RecordState(enum.IntEnum):
    """A record's state in a share partition (Kafka's RecordState ids)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # archived, its dead letter not yet written (KIP-1191)
    ARCHIVED = 4


# The states a stored batch may have: an ACQUIRED record is stored as AVAILABLE.
STORED_STATES = frozenset(
    {
        RecordState.AVAILABLE,
        RecordState.ACKNOWLEDGED,
        RecordState.ARCHIVING,
        RecordState.ARCHIVED,
    }
)

# Offsets one stored state may span (start offset to its last batch's last offset).
# Weir's own states span at most `share.partition.max.record.locks` (at most
# `PARTITION_MAX_RECORD_LOCKS_MAX` in share_partition); the margin admits a state
# written under a larger bound. Loading allocates per offset, hence the bound.
STATE_SPAN_RECORDS_MAX = 20_000
# DeliveryCount is an int16 on disk.
DELIVERY_COUNT_MAX = 0x7FFF

SHARE_SNAPSHOT_RECORD_TYPE = 0
SNAPSHOT_VALUE_VERSION = 0
# Weir's tagged field in ShareSnapshotValue ("WE"): far from Kafka's own tags.
DEAD_LETTER_MARK_TAG = 0x5745
# Weir's tagged field in a StateBatch (a release backoff's end): far from Kafka's too.
VISIBLE_TIMESTAMP_TAG = 0x5746
NO_DEAD_LETTER_MARK = -1


SHARE_SNAPSHOT_KEY = Message(
    "ShareSnapshotKey",
    valid=str(SHARE_SNAPSHOT_RECORD_TYPE),
    flexible="none",
    fields=[
        Field("group_id", STRING),
        Field("topic_id", UUID),
        Field("partition", INT32),
    ],
)

SHARE_SNAPSHOT_VALUE = Message(
    "ShareSnapshotValue",
    valid="0",
    flexible="0+",
    fields=[
        Field("snapshot_epoch", INT32),
        Field("state_epoch", INT32),
        Field("leader_epoch", INT32),
        Field("start_offset", INT64),
        Field("delivery_complete_count", INT32, tag=0, default=-1),
        Field("create_timestamp", INT64),
        Field("write_timestamp", INT64),
        Field(
            "state_batches",
            Array(
                Struct(
                    Field("first_offset", INT64),
                    Field("last_offset", INT64),
                    Field("delivery_state", INT8),
                    Field("delivery_count", INT16),
                    Field("visible_timestamp", INT64, tag=VISIBLE_TIMESTAMP_TAG, default=0),
                )
            ),
        ),
        Field("dead_letter_mark", INT64, tag=DEAD_LETTER_MARK_TAG, default=NO_DEAD_LETTER_MARK),
    ],
)


@dataclass(frozen=True)
class StateBatch:
    """Offsets `first_offset..last_offset` (inclusive), all in `state` with `delivery_count`;
    an AVAILABLE batch may not be delivered before `visible_ms` (epoch ms; 0: at once)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    visible_ms: int = 0


@dataclass(frozen=True)
class ShareState:
    """What must be durable of one share partition. Checked on construction (a
    ValueError names the first rule broken), so a decoded state is well formed."""

    start_offset: int
    state_epoch: int
    leader_epoch: int
    batches: tuple[StateBatch, ...] = ()
    # Where the dead letters of the ARCHIVING records may be (see the module doc).
    dead_letter_mark: int = NO_DEAD_LETTER_MARK

    def __post_init__(self) -> None:
        problem = _state_problem(self)
        if problem is not None:
            raise ValueError(problem)

    @property
    def end_offset(self) -> int:
        """One past the last offset the state speaks of (the start when none)."""
        return self.batches[-1].last_offset + 1 if self.batches else self.start_offset

    @property
    def delivery_complete_count(self) -> int:
        """Offsets at or above the start whose delivery is complete (KIP-1226)."""
        return sum(
            b.last_offset - b.first_offset + 1
            for b in self.batches
            if b.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        )


def _state_problem(state: ShareState) -> str | None:
    if state.start_offset < 0:
        return f"start offset {state.start_offset} is negative"
    previous_last = state.start_offset - 1
    for batch in state.batches:
        if batch.first_offset <= previous_last:
            return f"batch {batch} overlaps, or is below, offset {previous_last}"
        if batch.last_offset < batch.first_offset:
            return f"batch {batch} ends before it starts"
        if batch.state not in STORED_STATES:
            return f"batch {batch} has a state a stored batch cannot have"
        if not 0 <= batch.delivery_count <= DELIVERY_COUNT_MAX:
            return f"batch {batch} has delivery count out of range"
        if batch.visible_ms < 0 or (batch.visible_ms and batch.state is not RecordState.AVAILABLE):
            return f"batch {batch} has a visible time it cannot have"
        previous_last = batch.last_offset
    if state.dead_letter_mark < NO_DEAD_LETTER_MARK:
        return f"dead-letter mark {state.dead_letter_mark} is below -1"
    if state.end_offset - state.start_offset > STATE_SPAN_RECORDS_MAX:
        return f"state spans {state.end_offset - state.start_offset} offsets"
    return None


@dataclass(frozen=True)
class ShareStateKey:
    """Whose state a record holds: a share group's topic partition."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class ShareSnapshot:
    """A decoded ShareSnapshotValue: the state and the record's own bookkeeping."""

    state: ShareState
    snapshot_epoch: int
    create_timestamp_ms: int
    write_timestamp_ms: int


def encode_share_snapshot(
    key: ShareStateKey,
    state: ShareState,
    *,
    create_timestamp_ms: int,
    write_timestamp_ms: int,
    snapshot_epoch: int = 0,
) -> tuple[bytes, bytes]:
    """The `__share_group_state` record (key, value) holding `state`."""
    key_body = {"group_id": key.group_id, "topic_id": key.topic_id, "partition": key.partition}
    value_body = {
        "snapshot_epoch": snapshot_epoch,
        "state_epoch": state.state_epoch,
        "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "delivery_complete_count": state.delivery_complete_count,
        "create_timestamp": create_timestamp_ms,
        "write_timestamp": write_timestamp_ms,
        "state_batches": [
            {
                "first_offset": b.first_offset,
                "last_offset": b.last_offset,
                "delivery_state": int(b.state),
                "delivery_count": b.delivery_count,
                "visible_timestamp": b.visible_ms,
            }
            for b in state.batches
        ],
        "dead_letter_mark": state.dead_letter_mark,
    }
    return (
        encode_record(SHARE_SNAPSHOT_KEY, SHARE_SNAPSHOT_RECORD_TYPE, key_body),
        encode_record(SHARE_SNAPSHOT_VALUE, SNAPSHOT_VALUE_VERSION, value_body),
    )


def decode_share_snapshot_key(data: bytes) -> ShareStateKey:
    """The key of a ShareSnapshot record. Raises RecordFormatError otherwise
    (`record_version` tells a caller the record type first, if it must skip others)."""
    if record_version(data) != SHARE_SNAPSHOT_RECORD_TYPE:
        raise RecordFormatError(f"record type {record_version(data)} is not a share snapshot")
    _, body = decode_record(SHARE_SNAPSHOT_KEY, data)
    return ShareStateKey(body.group_id, body.topic_id, body.partition)


def decode_share_snapshot_value(data: bytes) -> ShareSnapshot:
    """A ShareSnapshotValue, checked as `ShareState` checks a state. Raises
    RecordFormatError on bytes that are not one, or on a state that breaks a rule."""
    _, body = decode_record(SHARE_SNAPSHOT_VALUE, data)
    batches = _batches(body.state_batches)
    try:
        state = ShareState(
            body.start_offset,
            body.state_epoch,
            body.leader_epoch,
            batches,
            body.dead_letter_mark,
        )
    except ValueError as exc:
        raise RecordFormatError(f"share snapshot: {exc}") from exc
    return ShareSnapshot(state, body.snapshot_epoch, body.create_timestamp, body.write_timestamp)


def _batches(stored: Sequence[Any]) -> tuple[StateBatch, ...]:
    if len(stored) > STATE_SPAN_RECORDS_MAX:
        raise RecordFormatError(f"share snapshot with {len(stored)} batches")
    batches = []
    for entry in stored:
        code = entry.delivery_state
        try:
            state = RecordState(code)
        except ValueError:
            raise RecordFormatError(f"unknown delivery state {code}") from None
        batches.append(
            StateBatch(
                entry.first_offset,
                entry.last_offset,
                state,
                entry.delivery_count,
                entry.visible_timestamp,
            )
        )
    return tuple(batches)
