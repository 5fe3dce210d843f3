"""A coordinator's internal, compacted state topic: create it, append to a partition,
wait until durable, read a partition back.

`__transaction_state` goes through these functions; `offsets_topic` uses them for
`__consumer_offsets` and adds what only that topic needs (adopting a topic a client
created in old data dirs, transactional offset batches, reading markers back).
Only the broker appends to an internal topic
(`weir.controller.controller.INTERNAL_TOPIC_NAMES`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.partition_replica import PartitionReplica
from weir.controller.controller import ControllerError
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    InvalidBatch,
    Record,
    build_batch,
    decode_records,
    iter_batch_headers,
)
from weir.log.errors import LogError, LogTruncated
from weir.log.settings import BATCH_INFLATE_BYTES_MAX

log = logging.getLogger(__name__)

# What one read of the topic may return at a time while loading.
LOAD_READ_BYTES_MAX = 4 * 1024 * 1024

KeyValue = tuple[bytes, bytes | None]  # a record's key and value; a None value is a tombstone


async def create_state_topic(
    broker: Broker,
    name: str,
    partition_count: int,
    replication_factor: int,
    configs: Mapping[str, str],
) -> TopicRecord:
    """The topic, created internal with `configs` if it does not exist (file work on
    the disk executor; in a cluster another broker may create it first: that one)."""

    def plan() -> TopicRecord:
        return broker.controller.plan_topic(
            name, partition_count, replication_factor, configs=dict(configs), internal=True
        )

    existing = broker.controller.topic(name)
    if existing is not None:
        return existing
    try:
        record = await broker.topic_changes.create_topic(plan)
    except ControllerError as exc:
        existing = broker.controller.topic(name)
        if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and existing is not None:
            return existing
        raise
    log.info("created %s with %d partitions", name, partition_count)
    return record


def unserved_partitions(
    broker: Broker, name: str, led: set[int] | None, failed: Mapping[int, str]
) -> dict[int, str]:
    """The partitions of a coordinator's state topic whose state this broker should
    serve but cannot, and why: its log failed (`failed`); or, in a cluster (`led`:
    the partitions loaded here), it leads the partition in etcd but is fenced (its
    lease may have ended) or has not loaded it yet."""
    cluster = broker.cluster
    topic = broker.controller.topic(name)
    if led is None or cluster is None or topic is None:
        return dict(failed)
    unavailable: dict[int, str] = {}
    for partition in range(topic.partition_count):
        if cluster.partition_state(topic, partition).leader != cluster.node_id:
            continue  # another broker serves it (a failed log moves it)
        if partition in failed:
            unavailable[partition] = failed[partition]
        elif partition in led:
            continue
        elif cluster.fenced():
            unavailable[partition] = "fenced: this broker cannot renew its etcd lease"
        else:
            unavailable[partition] = "leads it but has not loaded it yet"
    return unavailable


def state_replica(broker: Broker, name: str, partition: int) -> PartitionReplica:
    replica = broker.partition(name, partition)
    if replica is None:
        raise LookupError(f"{name}-{partition} is not open")
    return replica


def append_state_records_now(
    broker: Broker, name: str, partition: int, records: Sequence[KeyValue]
) -> int:
    """Append `records` as one batch (not yet durable) and return the offset to wait
    for with `wait_state_records`. Raises LogError (NOT_COORDINATOR when this broker
    does not lead the partition)."""
    replica = state_replica(broker, name, partition)
    if not replica.is_leader:
        raise LogError(ErrorCode.NOT_COORDINATOR, f"this broker does not lead {name}-{partition}")
    now_ms = wall_clock_ms()
    batch = build_batch([(key, value, []) for key, value in records], timestamp_ms=now_ms)
    result = replica.log.append(batch, leader_epoch=replica.leader_epoch, now_ms=now_ms)
    replica.wake_followers()
    return result.last_offset + 1


async def wait_state_records(broker: Broker, name: str, partition: int, end_offset: int) -> None:
    """Return once everything before `end_offset` is durable (in a cluster: below the
    high watermark over the ISR). Raises LogError: NOT_COORDINATOR when this broker
    stopped leading the partition (also when the records were truncated away: the
    coordinator's memory then reloads from the new leader's log, not a failed log),
    COORDINATOR_NOT_AVAILABLE when not committed."""
    replica = state_replica(broker, name, partition)
    try:
        await replica.log.wait_durable(end_offset)
    except LogTruncated as exc:  # a new leader truncated this follower's log
        raise LogError(ErrorCode.NOT_COORDINATOR, f"{name}-{partition}: {exc}") from exc
    replication = replica.replication
    if replication is None:
        replica.wake_fetchers()
        return
    replication.durable_end_moved()
    error = await replication.wait_committed(end_offset)
    if error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        raise LogError(ErrorCode.NOT_COORDINATOR, f"{name}-{partition} moved to another broker")
    if error != ErrorCode.NONE:
        raise LogError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"not committed: {error.name}")


def read_state_records(broker: Broker, name: str, partition: int) -> Iterator[Record]:
    """Every record of the partition from its log start to its end (a single node:
    the high watermark; a cluster's new leader loads all it has), in log order,
    tombstones included. Control batches have no state records and are skipped."""
    for offset, records in read_state_log(state_replica(broker, name, partition)):
        for record in _decode_batches(records, f"{name}-{partition}"):
            if record.offset >= offset:
                yield record


def read_state_log(replica: PartitionReplica) -> Iterator[tuple[int, bytes | bytearray]]:
    """The partition's batches from its log start to its end, read at most
    `LOAD_READ_BYTES_MAX` at a time: (the offset read from, the bytes read). The first
    batch of a read may start below that offset; its records below it were read
    before. A single node reads to its high watermark; a cluster's new leader loads
    all it has (it never truncates its own log)."""
    offset = replica.log.log_start_offset
    end_offset = (
        replica.high_watermark if replica.replication is None else replica.log.log_end_offset
    )
    while offset < end_offset:
        result = replica.log.read(offset, bytes_max=LOAD_READ_BYTES_MAX, end_offset=end_offset)
        if not result.records:
            break
        yield offset, result.records
        offset = result.next_offset


def _decode_batches(records: bytes | bytearray, where: str) -> Iterator[Record]:
    view = memoryview(records)
    for position, header in iter_batch_headers(view):
        if header.is_control:
            continue
        batch = view[position : position + header.size]
        try:
            yield from decode_records(batch, uncompressed_bytes_max=BATCH_INFLATE_BYTES_MAX)
        except InvalidBatch as exc:
            log.warning("%s: skipping the unreadable batch at offsets %d..%d: %s",
                        where, header.base_offset, header.last_offset, exc)  # fmt: skip
