"""`__consumer_offsets`: the internal, compacted topic that holds group state.

The group coordinator decides what to write (Kafka's key/value record formats);
this module creates the topic, appends the coordinator's records to one of its
partitions and waits until they are durable, and reads a partition back from
the start when the broker loads group state.

A TxnOffsetCommit's records are appended as a transactional batch of the
producer (its id and epoch, no sequence: the log skips the sequence checks for
the coordinator's own batches, as Kafka's AppendOrigin.COORDINATOR); the
transaction coordinator's markers end them. Reading back yields each record with
the producer of its transactional batch, and each marker (`read_group_log`).

Clients cannot create, configure, delete, truncate or produce to the topic
(`weir.controller.controller.INTERNAL_TOPIC_NAMES`); only these functions
append to it. A data dir from before that rule may hold an offsets topic a
client created: `adopt_offsets_topic` makes it the broker's at start.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.coordinators.state_topic import (
    create_state_topic,
    read_state_log,
    wait_state_records,
)
from weir.broker.partition_replica import PartitionReplica
from weir.controller.controller import OFFSETS_TOPIC_NAME
from weir.controller.metadata import TopicRecord
from weir.format.control_records import read_end_txn_marker
from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    BatchHeader,
    InvalidBatch,
    Record,
    RecordInput,
    build_batch,
    decode_records,
    iter_batch_headers,
)
from weir.log.errors import LogError
from weir.log.settings import BATCH_INFLATE_BYTES_MAX

log = logging.getLogger(__name__)

# Kafka's offsets.topic.segment.bytes and the compaction policy the topic needs.
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "producer",
}
# Records appended in one batch at most (a big group's offset commit is split).
RECORDS_PER_BATCH_MAX = 10_000

KeyValue = tuple[bytes, bytes | None]  # a record's key and value; a None value is a tombstone
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The producer whose transaction a TxnOffsetCommit's records belong to."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class LoadedRecord:
    """A record read back, with the producer of its transactional batch (-1: none)."""

    record: Record
    producer_id: int = NO_PRODUCER_ID


@dataclass(frozen=True, slots=True)
class LoadedMarker:
    """A transaction marker read back: producer `producer_id`'s transaction ended."""

    offset: int
    producer_id: int
    committed: bool


def ensure_offsets_topic(broker: Broker, partition_count: int) -> TopicRecord:
    """The offsets topic, created (internal, compacted) if it does not exist."""
    existing = broker.controller.topic(OFFSETS_TOPIC_NAME)
    if existing is not None:
        return existing
    record = broker.controller.plan_topic(
        OFFSETS_TOPIC_NAME, partition_count, 1, configs=OFFSETS_TOPIC_CONFIGS, internal=True
    )
    broker.create_topic(record)
    log.info("created %s with %d partitions", OFFSETS_TOPIC_NAME, partition_count)
    return record


async def create_offsets_topic(
    broker: Broker, partition_count: int, replication_factor: int = 1
) -> TopicRecord:
    """`ensure_offsets_topic` with its file work on the disk executor (in a cluster,
    replicated; another broker may create it first, and that one is used)."""
    return await create_state_topic(
        broker, OFFSETS_TOPIC_NAME, partition_count, replication_factor, OFFSETS_TOPIC_CONFIGS
    )


def adopt_offsets_topic(broker: Broker, partition_count: int) -> TopicRecord | None:
    """At start, before group state is loaded and before retention runs: make an
    existing offsets topic the broker's own. A topic a client created (or
    reconfigured) before Weir refused that is marked internal and its configs
    are replaced by OFFSETS_TOPIC_CONFIGS (persisted; WARNING naming each
    change). Its records are kept as they are, and so is its partition count:
    groups are placed by the count of the topic that holds their records."""
    record = broker.controller.topic(OFFSETS_TOPIC_NAME)
    if record is None:
        return None
    changes = _config_changes(record.configs, OFFSETS_TOPIC_CONFIGS)
    if not record.is_internal:
        changes.insert(0, "is_internal: false -> true")
    if changes:
        record.is_internal = True
        broker.set_topic_configs(OFFSETS_TOPIC_NAME, OFFSETS_TOPIC_CONFIGS)
        log.warning("%s was not the broker's own (created or reconfigured by a client); "
                    "changed %s", OFFSETS_TOPIC_NAME, "; ".join(changes))  # fmt: skip
    if record.partition_count != partition_count:
        log.warning("%s has %d partitions, not offsets_topic_partition_count %d: keeping %d "
                    "(groups are placed by the existing topic's partition count)",
                    OFFSETS_TOPIC_NAME, record.partition_count, partition_count,
                    record.partition_count)  # fmt: skip
    return record


def _config_changes(current: Mapping[str, str], wanted: Mapping[str, str]) -> list[str]:
    """'name: old -> new' for every override that differs ('(default)': none)."""
    return [
        f"{name}: {current.get(name, '(default)')} -> {wanted.get(name, '(default)')}"
        for name in sorted(set(current) | set(wanted))
        if current.get(name) != wanted.get(name)
    ]


def offsets_replica(broker: Broker, partition: int) -> PartitionReplica:
    replica = broker.partition(OFFSETS_TOPIC_NAME, partition)
    if replica is None:
        raise LookupError(f"{OFFSETS_TOPIC_NAME}-{partition} is not open")
    return replica


def append_group_records_now(
    broker: Broker,
    partition: int,
    records: Sequence[KeyValue],
    producer: TxnProducer | None = None,
) -> int:
    """Append `records` to the partition (not yet durable) and return the offset
    to wait for with `wait_group_records`; with `producer`, in transactional
    batches of that producer. Raises weir.log.errors.LogError (the log's
    producer checks: e.g. INVALID_PRODUCER_EPOCH for a fenced producer)."""
    replica = offsets_replica(broker, partition)
    if not replica.is_leader:
        raise LogError(ErrorCode.NOT_COORDINATOR, _not_leading_reason(broker, replica))
    now_ms = wall_clock_ms()
    next_offset = replica.log.log_end_offset
    for start in range(0, len(records), RECORDS_PER_BATCH_MAX):
        chunk: list[RecordInput] = [
            (key, value, []) for key, value in records[start : start + RECORDS_PER_BATCH_MAX]
        ]
        if producer is None:
            batch = build_batch(chunk, timestamp_ms=now_ms)
            result = replica.log.append(batch, leader_epoch=replica.leader_epoch, now_ms=now_ms)
        else:
            batch = build_batch(
                chunk,
                timestamp_ms=now_ms,
                producer_id=producer.producer_id,
                producer_epoch=producer.producer_epoch,
                base_sequence=NO_SEQUENCE,
                is_transactional=True,
            )
            result = replica.log.append(
                batch,
                leader_epoch=replica.leader_epoch,
                now_ms=now_ms,
                origin_coordinator=True,  # the LOG helper's keyword: no sequence checks
            )
        next_offset = result.last_offset + 1
    return next_offset


def _not_leading_reason(broker: Broker, replica: PartitionReplica) -> str:
    """Why this broker cannot append to an offsets partition, truthfully: fenced
    (its etcd lease may have ended, leadership unchanged) or led elsewhere."""
    cluster = broker.cluster
    replication = replica.replication
    if cluster is not None and replication is not None:
        if replication.leader_id == cluster.node_id and cluster.fenced():
            return "this broker is fenced: it cannot renew its etcd lease"
        return f"the offsets partition is led by broker {replication.leader_id}"
    return "this broker does not lead the offsets partition"


async def wait_group_records(broker: Broker, partition: int, end_offset: int) -> None:
    """Return once everything before `end_offset` in the partition is durable (in
    a cluster: committed, below the high watermark over the ISR). Raises LogError,
    with NOT_COORDINATOR when this broker stopped leading the partition."""
    await wait_state_records(broker, OFFSETS_TOPIC_NAME, partition, end_offset)


def read_group_records(broker: Broker, partition: int) -> Iterator[Record]:
    """Every record of the partition from its log start to its durable end,
    in log order (tombstones included: their value is None); markers left out."""
    for entry in read_group_log(broker, partition):
        if isinstance(entry, LoadedRecord):
            yield entry.record


def read_group_log(broker: Broker, partition: int) -> Iterator[LoadedRecord | LoadedMarker]:
    """Every record and transaction marker of the partition from its log start
    to its durable end (a cluster's leader: its log end), in log order."""
    for offset, records in read_state_log(offsets_replica(broker, partition)):
        for entry in _decode_batches(records, partition):
            entry_offset = entry.offset if isinstance(entry, LoadedMarker) else entry.record.offset
            if entry_offset >= offset:
                yield entry


def _decode_batches(
    records: bytes | bytearray, partition: int
) -> Iterator[LoadedRecord | LoadedMarker]:
    """The records of each batch, or its marker; a batch that cannot be decoded (a
    client wrote it before clients were refused: bad compressed data, inflating
    past BATCH_INFLATE_BYTES_MAX) is skipped with a warning instead of failing the
    load. The broker's own batches are uncompressed and were checked when appended."""
    view = memoryview(records)
    for position, header in iter_batch_headers(view):
        batch = view[position : position + header.size]
        try:
            if header.is_control:
                yield from _marker_of(batch, header)
                continue
            producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
            for record in decode_records(batch, uncompressed_bytes_max=BATCH_INFLATE_BYTES_MAX):
                yield LoadedRecord(record, producer_id)
        except InvalidBatch as exc:
            log.warning("%s-%d: skipping the unreadable rest of the batch at offsets %d..%d: %s",
                        OFFSETS_TOPIC_NAME, partition, header.base_offset,
                        header.last_offset, exc)  # fmt: skip


def _marker_of(batch: memoryview, header: BatchHeader) -> Iterator[LoadedMarker]:
    """The transaction marker of a control batch; none when compaction emptied it.
    Raises InvalidBatch (InvalidControlRecord: another control type)."""
    marker = read_end_txn_marker(batch)
    if marker is not None:
        yield LoadedMarker(header.base_offset, header.producer_id, marker.committed)
