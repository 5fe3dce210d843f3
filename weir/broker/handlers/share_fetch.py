"""ShareFetch v1-2 and ShareAcknowledge v1-2 (KIP-932): records acquired under a lock,
acknowledged one by one.

A ShareFetch, on the leader of its partitions:

1. continues, opens or closes the member's share session (`share_sessions`);
2. applies the acknowledgements it carries (ACCEPT, RELEASE, REJECT, RENEW per
   offset), each partition's result in its `acknowledge_error_code`;
3. acquires records from every partition of the session: the log is read from the
   share partition's `fetch_offset` up to the high watermark (the last stable
   offset under read_committed), and `SharePartition.acquire_records` locks what
   is available for this member, up to MaxRecords (exactly, in v2's record-limit
   mode); the batches holding acquired records are returned whole, with the
   acquired ranges and their delivery counts (the client drops the rest). For a
   group with Weir's delays or expiry (`weir.share.record.headers.enable`,
   `weir.share.record.ttl.ms` of the group or the topic) the read's records' times
   are given too (`weir.sharecoord.delivery_times`, which decodes records only where
   they can matter): delayed records are left for later, expired ones archived; for
   a group with `weir.share.key.ordering.enable` the read's record keys too
   (`weir.sharecoord.record_keys`): records held behind an earlier one of their key
   are left for later;
4. with nothing acquired, waits (up to MaxWaitMs) for new records, records
   released or unlocked, or delayed records becoming visible, then tries again;
5. stores the changed share partitions' state and answers once it is durable,
   when that took a tenth of the lock or more (a share coordinator that moves can
   hold the store for seconds), the records whose lock expired meanwhile are left out
   (no longer the member's: another consumer may have them) and the others' locks
   restart at the answer, so the member has a whole lock (`_hold_from_answer`).

ShareAcknowledge does 1 and 2 (and 5). The final epoch (-1) closes the session
after its acknowledgements, releasing the member's other acquired records.

A direct request (Weir's tagged field `weir_direct_lock_ms`, sent only by a Weir
broker's HTTP queue APIs through `weir.broker.http.share_direct`) skips step 1: it
opens no session and joins no group, its partitions are the ones it names, and the
locks it takes (step 3) or renews (a RENEW in a direct ShareAcknowledge, allowed
whatever the group's setting) run for its own lock duration, restarted at the answer.
The records stay acquired by its member id until acknowledged or their locks end.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import partial

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.coordinators.share_partitions import ShareLeader
from weir.broker.coordinators.share_service import ShareService
from weir.broker.coordinators.share_sessions import (
    FINAL_EPOCH,
    ShareSession,
    ShareSessionError,
    TopicPartitionId,
)
from weir.broker.coordinators.share_state_service import ShareKey, ShareStateUnavailableError
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.partition_replica import PartitionReplica
from weir.format.errors import ErrorCode
from weir.format.record_batch import InvalidBatch, iter_batch_headers
from weir.log.disk_executor import DiskJob
from weir.log.errors import LogError, OffsetOutOfRange
from weir.log.page_cache import ReadNotCached, warm
from weir.sharecoord.delivery_times import DeliveryPolicy, delivery_times
from weir.sharecoord.record_keys import record_keys
from weir.sharecoord.share_partition import (
    AckBatch,
    AcknowledgeType,
    AckOutcome,
    AcquiredRange,
    Acquisition,
    LogBatch,
    RecordTimes,
)
from weir.wire.apis.share_groups import NOT_DIRECT
from weir.wire.messages.share_groups import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeResponsePartition,
    ShareAcknowledgeResponseResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareFetchResponseAcquiredRecord,
    ShareFetchResponseCurrentLeader,
    ShareFetchResponsePartition,
    ShareFetchResponseResponse,
)

log = logging.getLogger(__name__)

# ShareFetch v2's ShareAcquireMode: 0 batch-optimized, 1 record-limit.
RECORD_LIMIT_MODE = 1
# A ShareFetch that names no MaxRecords (or 0) acquires at most this many records.
MAX_RECORDS_DEFAULT = 500
# What one share partition's read takes from the log at most: about 500 records of
# 2 KiB, a share fetch's default MaxRecords (measured: reading a client's 50 MiB
# MaxBytes to acquire 500 records was three quarters of a share fetch's cost).
SHARE_READ_BYTES_MAX = 1024 * 1024
# Warm-ups of cold ranges before a share fetch's read may wait on the loop.
COLD_READ_ATTEMPTS_MAX = 3
# A share fetch whose acquisition took a tenth of the lock or more to answer (its state
# stored: a moving share coordinator can take seconds) restarts the locks it answers.
LOCK_RESTART_FRACTION = 10
# A direct (session-less) request's longest lock: SQS's longest visibility timeout, 12 h.
DIRECT_LOCK_MS_MAX = 12 * 3600 * 1000


def share_service(ctx: RequestContext) -> ShareService:
    service = ctx.broker.shares
    assert isinstance(service, ShareService), "the broker's share service is attached at start"
    return service


@dataclass
class _PartitionResult:
    """What one partition's answer holds, built over the request's steps."""

    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    ack_error: ErrorCode = ErrorCode.NONE
    ack_error_message: str | None = None
    acked: bool = False
    records: bytes | bytearray | memoryview = b""
    acquired: list[AcquiredRange] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1
    # the share partition `acquired` was taken from
    share_leader: ShareLeader | None = None


@dataclass
class _Request:
    group_id: str
    member_id: str
    acks: dict[TopicPartitionId, list[AckBatch]]
    # IsRenewAck (v2): only a request that says so may carry RENEW.
    renew: bool = False
    # A direct request's lock duration (Weir's HTTP queues); None: the group's.
    lock_ms: int | None = None
    results: dict[TopicPartitionId, _PartitionResult] = field(default_factory=dict)
    changed: list[ShareLeader] = field(default_factory=list)

    def result(self, partition: TopicPartitionId) -> _PartitionResult:
        found = self.results.get(partition)
        if found is None:
            found = self.results[partition] = _PartitionResult()
        return found


# -- ShareFetch -------------------------------------------------------------------------


def handle_share_fetch(
    ctx: RequestContext, request: ShareFetchRequest
) -> ShareFetchResponse | Deferred[ShareFetchResponse]:
    service = share_service(ctx)
    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return _fetch_failure(ErrorCode.INVALID_REQUEST, "a group id and a member id are required")
    named = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    # Only partitions that exist join the session (so a session holds at most the
    # cluster's partitions); the others are answered with their error once.
    unknown: dict[TopicPartitionId, ErrorCode] = {}
    for partition in named:
        error = _unknown_error(ctx.broker, *partition)
        if error is not None:
            unknown[partition] = error
    named = [partition for partition in named if partition not in unknown]
    acks = {
        (t.topic_id, p.partition_index): [
            AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
            for b in p.acknowledgement_batches
        ]
        for t in request.topics
        for p in t.partitions
        if p.acknowledgement_batches
    }
    if request.weir_direct_lock_ms != NOT_DIRECT:
        return _direct_fetch(ctx, service, request, named, unknown, acks)
    forgotten = [(f.topic_id, p) for f in request.forgotten_topics_data for p in f.partitions]
    try:
        session = service.sessions.for_fetch(
            group_id,
            member_id,
            request.share_session_epoch,
            added=[] if request.share_session_epoch == FINAL_EPOCH else named,
            forgotten=forgotten,
            has_acknowledgements=bool(acks),
        )
    except ShareSessionError as exc:
        return _fetch_failure(exc.error_code, str(exc))
    if session is not None:
        _watch_connection(ctx, service, session)
    state = _Request(group_id, member_id, acks, renew=request.is_renew_ack)
    for partition, error in unknown.items():
        state.result(partition).error = error
    lock_duration_ms = service.partitions.config(group_id).record_lock_duration_ms

    async def finish() -> ShareFetchResponse:
        started_ms = wall_clock_ms()  # every lock taken below runs from this or later
        await _acknowledge_all(ctx.broker, service, state, ctx.now_ms())
        if session is None:
            closing = service.sessions.get(group_id, member_id)
            if closing is not None:
                await service.close_session(closing)
        elif not request.is_renew_ack:  # KIP-1222: a renewal acquires nothing
            await _acquire_with_wait(ctx, service, session.partitions, request, state)
        error = await service.partitions.persist(state.changed)
        if error != ErrorCode.NONE:
            _fail_unstored(state, error)
        now_ms = wall_clock_ms()
        if now_ms - started_ms >= lock_duration_ms // LOCK_RESTART_FRACTION:
            _hold_from_answer(state, now_ms)
        return _fetch_response(state, lock_duration_ms)

    return Deferred(finish)


def _unknown_error(broker: Broker, topic_id: uuid.UUID, index: int) -> ErrorCode | None:
    """UNKNOWN_TOPIC_ID or UNKNOWN_TOPIC_OR_PARTITION for a partition that does not
    exist; None for one that does (wherever it is led)."""
    topic = broker.controller.topic_by_id(topic_id)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_ID
    if not 0 <= index < topic.partition_count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return None


def _fetch_failure(error: ErrorCode, message: str) -> ShareFetchResponse:
    return ShareFetchResponse(throttle_time_ms=0, error_code=error, error_message=message)


def _direct_lock_problem(lock_ms: int) -> str | None:
    if 0 < lock_ms <= DIRECT_LOCK_MS_MAX:
        return None
    return f"a direct request's lock is 1 to {DIRECT_LOCK_MS_MAX} ms, not {lock_ms}"


def _direct_fetch(
    ctx: RequestContext,
    service: ShareService,
    request: ShareFetchRequest,
    named: list[TopicPartitionId],
    unknown: dict[TopicPartitionId, ErrorCode],
    acks: dict[TopicPartitionId, list[AckBatch]],
) -> ShareFetchResponse | Deferred[ShareFetchResponse]:
    """A session-less ShareFetch (Weir's HTTP queue APIs, `weir_direct_lock_ms`): its
    acknowledgements, then records acquired from the partitions it names, locked for
    its lock duration; no share session is opened or changed."""
    lock_ms = request.weir_direct_lock_ms
    problem = _direct_lock_problem(lock_ms)
    if problem is not None:
        return _fetch_failure(ErrorCode.INVALID_REQUEST, problem)
    state = _Request(request.group_id or "", request.member_id or "", acks, lock_ms=lock_ms)
    for partition, error in unknown.items():
        state.result(partition).error = error

    async def finish() -> ShareFetchResponse:
        await _acknowledge_all(ctx.broker, service, state, ctx.now_ms())
        await _acquire_with_wait(ctx, service, named, request, state)
        error = await service.partitions.persist(state.changed)
        if error != ErrorCode.NONE:
            _fail_unstored(state, error)
        _hold_from_answer(state, wall_clock_ms())  # always: the lock is not the group's
        # The locks may now end before the deadline the expiry task sleeps towards.
        service.partitions.poke()
        return _fetch_response(state, lock_ms)

    return Deferred(finish)


def _watch_connection(ctx: RequestContext, service: ShareService, session: ShareSession) -> None:
    """A session ends with the connection it was opened on (its records released)."""
    connection = ctx.connection
    if connection is None or session.connection_closed is not None:
        return

    def closed() -> None:
        nursery = service.store.background
        if nursery is not None:
            nursery.start_soon(service.close_session, session)

    session.connection_closed = closed
    connection.on_close(closed)


async def _acquire_with_wait(
    ctx: RequestContext,
    service: ShareService,
    partitions: Collection[TopicPartitionId],
    request: ShareFetchRequest,
    state: _Request,
) -> None:
    """Acquire from `partitions` (a session's, which may change while this waits; or a
    direct request's), waiting up to MaxWaitMs while there is nothing."""
    broker = ctx.broker
    limits = broker.config.limits
    wait_s = min(max(request.max_wait_ms, 0), limits.fetch_wait_ms_max) / 1000
    deadline = trio.current_time() + wait_s
    records_max = request.max_records if request.max_records > 0 else MAX_RECORDS_DEFAULT
    record_limit = ctx.api_version >= 2 and request.share_acquire_mode == RECORD_LIMIT_MODE
    bytes_max = min(max(request.max_bytes, 0), limits.fetch_response_bytes_max)
    while True:
        waits = await _acquire_once(
            broker, service, partitions, state, records_max, record_limit, bytes_max
        )
        if any(r.acquired for r in state.results.values()):
            return
        if trio.current_time() >= deadline or not waits:
            return
        await _wait_for_records(waits, deadline)


async def _acquire_once(
    broker: Broker,
    service: ShareService,
    partitions: Collection[TopicPartitionId],
    state: _Request,
    records_max: int,
    record_limit: bool,
    bytes_max: int,
) -> list[tuple[PartitionReplica, ShareLeader]]:
    """Acquire from each of `partitions`; return what to wait on when nothing was
    acquired."""
    waits = []
    config = service.partitions.config(state.group_id)
    read_committed = config.read_committed
    policy = DeliveryPolicy(
        headers=config.record_headers_enabled,
        record_ttl_ms=config.record_ttl_ms,
        delay_max_ms=config.delivery_delay_max_ms,
    )
    for topic_id, index in list(partitions):
        if records_max <= 0 or bytes_max <= 0:
            break
        result = state.result((topic_id, index))
        found = await _share_leader(broker, service, state.group_id, topic_id, index, result)
        if found is None:
            continue
        replica, leader = found
        read_end = replica.last_stable_offset if read_committed else replica.high_watermark
        acquisition, records = await _acquire_partition(
            broker,
            replica,
            leader,
            state.member_id,
            read_end,
            _Limits(records_max, record_limit, bytes_max, read_committed),
            policy.with_topic_ttl(replica.log.config.weir_share_record_ttl_ms),
        )
        if acquisition.archived:  # expired (rule 10): stored, and dead-lettered
            service.partitions.archived(leader, acquisition.archived)
            state.changed.append(leader)
        if acquisition.delayed:
            service.partitions.poke()  # a visible time for the expiry task
        acquired = acquisition.acquired
        if acquired:
            log.debug("share fetch: %s acquired %s of %s-%d", state.member_id, acquired,
                      replica.topic.name, index)  # fmt: skip
            result.acquired.extend(acquired)
            result.records = records
            result.share_leader = leader
            state.changed.append(leader)
            service.partitions.poke()  # new lock deadlines for the expiry task
            records_max -= sum(r.last_offset - r.first_offset + 1 for r in acquired)
            bytes_max -= len(records)
        else:
            waits.append((replica, leader))
    return waits


async def _share_leader(
    broker: Broker,
    service: ShareService,
    group_id: str,
    topic_id: uuid.UUID,
    index: int,
    result: _PartitionResult,
) -> tuple[PartitionReplica, ShareLeader] | None:
    """The partition's replica and share partition, or None with `result`'s error set."""
    topic = broker.controller.topic_by_id(topic_id)
    if topic is None:
        result.error = ErrorCode.UNKNOWN_TOPIC_ID
        return None
    replica = broker.lookup(topic.name, index)
    if isinstance(replica, ErrorCode):
        result.error = replica
        _leader_hint(broker, topic.name, index, result)
        return None
    try:
        leader = await service.partitions.leader(ShareKey(group_id, topic_id, index), replica)
    except ShareStateUnavailableError as exc:
        result.error, result.error_message = exc.error_code, str(exc)
        return None
    result.leader_id, result.leader_epoch = broker.config.node_id, replica.leader_epoch
    return replica, leader


def _leader_hint(broker: Broker, topic: str, index: int, result: _PartitionResult) -> None:
    cluster = broker.cluster
    record = broker.controller.topic(topic)
    if cluster is None or record is None:
        return
    partition_state = cluster.partition_state(record, index)
    result.leader_id, result.leader_epoch = partition_state.leader, partition_state.leader_epoch


@dataclass(frozen=True)
class _Limits:
    """What one partition's acquisition may take."""

    records_max: int
    record_limit: bool  # ShareFetch v2's record-limit mode
    bytes_max: int
    # share.isolation.level=read_committed: aborted transactions' records are skipped.
    read_committed: bool = False


_NOTHING = Acquisition([])


async def _acquire_partition(
    broker: Broker,
    replica: PartitionReplica,
    leader: ShareLeader,
    member_id: str,
    read_end: int,
    limits: _Limits,
    policy: DeliveryPolicy,
) -> tuple[Acquisition, bytes | bytearray | memoryview]:
    partition = leader.partition
    now_ms = wall_clock_ms()
    offset = partition.fetch_offset(now_ms)
    if offset is None or offset >= read_end:
        return _NOTHING, b""
    if offset < replica.log.log_start_offset:  # retention or DeleteRecords moved it
        partition.advance_start_to(replica.log.log_start_offset)
        offset = partition.fetch_offset(now_ms)
        if offset is None or offset >= read_end:
            return _NOTHING, b""
    # Read no more than acquisition can use: a fetch asking for 50 MiB would otherwise
    # copy and check 50 MiB of batches to acquire 500 records (the first batch is
    # still read whole however large, as KIP-74 has it).
    bytes_max = min(limits.bytes_max, SHARE_READ_BYTES_MAX)
    records = await _read(broker, replica, offset, bytes_max, read_end)
    if not records:
        return _NOTHING, b""
    now_ms = wall_clock_ms()  # the read may have waited on the disk
    batches, times = _batches_and_times(broker, records, policy, now_ms)
    keys = _keys(broker, records) if partition.settings.key_ordering else None
    aborted: set[int] = set()
    if limits.read_committed:
        aborted = _aborted_batches(replica, records, offset, read_end)
        batches = [batch for batch in batches if batch.base_offset not in aborted]
    acquisition = partition.acquire_records(
        member_id,
        batches,
        max_records=limits.records_max,
        record_limit=limits.record_limit,
        read_offset=offset,
        now_ms=now_ms,
        times=times,
        keys=keys,
    )
    if not acquisition.acquired:
        return acquisition, b""
    return acquisition, _trim(records, acquisition.acquired, aborted)


def _batches_and_times(
    broker: Broker,
    records: bytes | bytearray | memoryview,
    policy: DeliveryPolicy,
    now_ms: int,
) -> tuple[list[LogBatch], dict[int, RecordTimes] | None]:
    """The read's data batches, and its records' times when the group has delays or
    expiry (else the records are never looked at: the batch headers suffice)."""
    if not policy.active:
        return _batches(records), None
    try:
        return delivery_times(
            records,
            policy,
            now_ms,
            uncompressed_bytes_max=broker.config.limits.fetch_response_bytes_max,
        )
    except InvalidBatch:
        return [], None


def _keys(broker: Broker, records: bytes | bytearray | memoryview) -> dict[int, int] | None:
    """The read's record keys (hashed), for a group with key ordering; None when the
    read cannot be parsed (then the share partition orders conservatively)."""
    try:
        return record_keys(
            records, uncompressed_bytes_max=broker.config.limits.fetch_response_bytes_max
        )
    except InvalidBatch:
        return None


async def _read(
    broker: Broker,
    replica: PartitionReplica,
    offset: int,
    bytes_max: int,
    read_end: int,
) -> bytes | bytearray | memoryview:
    """Whole batches from `offset`, warming cold ranges on the disk executor first
    (the loop never waits on the disk unless memory is too short to keep them)."""
    for warmups in range(COLD_READ_ATTEMPTS_MAX + 1):
        cached_only = warmups < COLD_READ_ATTEMPTS_MAX
        try:
            result = replica.log.read(
                offset, bytes_max=max(bytes_max, 1), end_offset=read_end, cached_only=cached_only
            )
        except ReadNotCached as exc:
            if exc.cold.file.try_hold():
                warmed = await broker.disk.run(DiskJob.COLD_READ, partial(warm, [exc.cold]))
                broker.metrics.cold_read_bytes_total += warmed
            continue
        except (OffsetOutOfRange, LogError) as exc:
            log.warning("share fetch of %s-%d at %d: %s", replica.topic.name, replica.index,
                        offset, exc)  # fmt: skip
            return b""
        return result.records
    return b""


def _aborted_batches(
    replica: PartitionReplica, records: bytes | bytearray | memoryview, offset: int, read_end: int
) -> set[int]:
    """The base offsets of the batches of aborted transactions in `records`: never
    offered for acquisition nor sent (their offsets are gaps the client answers GAP
    for, as Kafka's share partitions leave them out under read_committed). A
    transactional batch is aborted when its producer's aborted transaction spans it,
    from its first offset to its ABORT marker (the transaction index)."""
    aborted = replica.log.aborted_txns_between(offset, read_end)
    if not aborted:
        return set()
    spans: dict[int, list[tuple[int, int]]] = {}
    for txn in aborted:
        spans.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return {
        header.base_offset
        for _, header in iter_batch_headers(memoryview(records))
        if header.is_transactional
        and any(lo <= header.base_offset <= hi for lo, hi in spans.get(header.producer_id, ()))
    }


def _batches(records: bytes | bytearray | memoryview) -> list[LogBatch]:
    try:
        return [
            LogBatch(header.base_offset, header.last_offset)
            for _, header in iter_batch_headers(memoryview(records))
            if not header.is_control
        ]
    except InvalidBatch:
        return []


def _trim(
    records: bytes | bytearray | memoryview,
    acquired: Sequence[AcquiredRange],
    left_out: AbstractSet[int] = frozenset(),
) -> bytes | bytearray | memoryview:
    """The batches holding acquired records, without those in `left_out` (base
    offsets: aborted transactions'); one slice of `records` when nothing in between
    is left out, else the kept batches joined."""
    view = memoryview(records)
    first = min(r.first_offset for r in acquired)
    last = max(r.last_offset for r in acquired)
    kept: list[tuple[int, int]] = []
    for position, header in iter_batch_headers(view):
        if header.last_offset < first or header.base_offset > last:
            continue
        if header.base_offset in left_out:
            continue
        if kept and kept[-1][1] == position:
            kept[-1] = (kept[-1][0], position + header.size)
        else:
            kept.append((position, position + header.size))
    if not kept:
        return b""
    if len(kept) == 1:
        return view[kept[0][0] : kept[0][1]]
    return b"".join(view[start:end] for start, end in kept)


async def _wait_for_records(
    waits: Sequence[tuple[PartitionReplica, ShareLeader]], deadline: float
) -> None:
    """Until new records are committed on one of the partitions, or records became
    available again on one of the share partitions, or the deadline."""
    event = trio.Event()
    for replica, leader in waits:
        replica.waiters.add(event)
        leader.waiters.add(event)
    try:
        with trio.move_on_at(deadline):
            await event.wait()
    finally:
        for replica, leader in waits:
            replica.waiters.discard(event)
            leader.waiters.discard(event)


def _fail_unstored(state: _Request, error: ErrorCode) -> None:
    """The state could not be stored: nothing acquired is delivered (the locks
    expire and the records come back), and acknowledgements report the error."""
    for result in state.results.values():
        if result.acquired:
            result.acquired, result.records = [], b""
            result.error = error
        if result.acked and result.ack_error == ErrorCode.NONE:
            result.ack_error = error


def _hold_from_answer(state: _Request, now_ms: int) -> None:
    """The acquired records as the member gets them, the state stored: those whose lock
    expired meanwhile are left out (no longer the member's), the others' locks restart
    now (`SharePartition.hold_from`). A left-out record's delivery count skips one, as
    for an answer the client never got."""
    for result in state.results.values():
        if not result.acquired or result.share_leader is None:
            continue
        partition = result.share_leader.partition
        kept = partition.hold_from(state.member_id, result.acquired, now_ms, state.lock_ms)
        if kept != result.acquired:
            log.info("share fetch: %s: locks expired before the answer: %s, kept %s",
                     state.member_id, result.acquired, kept)  # fmt: skip
            result.acquired = kept
            if not kept:
                result.records = b""


def _fetch_response(state: _Request, lock_duration_ms: int) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, list[ShareFetchResponsePartition]] = {}
    for (topic_id, index), result in state.results.items():
        if not (result.acquired or result.acked or result.error != ErrorCode.NONE):
            continue
        by_topic.setdefault(topic_id, []).append(
            ShareFetchResponsePartition(
                partition_index=index,
                error_code=result.error,
                error_message=result.error_message,
                acknowledge_error_code=result.ack_error,
                acknowledge_error_message=result.ack_error_message,
                current_leader=ShareFetchResponseCurrentLeader(
                    leader_id=result.leader_id, leader_epoch=result.leader_epoch
                ),
                records=result.records,
                acquired_records=[
                    ShareFetchResponseAcquiredRecord(
                        first_offset=r.first_offset,
                        last_offset=r.last_offset,
                        delivery_count=r.delivery_count,
                    )
                    for r in result.acquired
                ],
            )
        )
    return ShareFetchResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        acquisition_lock_timeout_ms=lock_duration_ms,
        responses=[
            ShareFetchResponseResponse(topic_id=topic_id, partitions=partitions)
            for topic_id, partitions in by_topic.items()
        ],
    )


# -- acknowledgements ----------------------------------------------------------------


async def _acknowledge_all(
    broker: Broker, service: ShareService, state: _Request, now_ms: int
) -> None:
    for (topic_id, index), batches in state.acks.items():
        result = state.result((topic_id, index))
        result.acked = True
        found = await _share_leader(broker, service, state.group_id, topic_id, index, result)
        if found is None:
            result.ack_error, result.ack_error_message = result.error, result.error_message
            result.error, result.error_message = ErrorCode.NONE, None
            continue
        _replica, leader = found
        if not state.renew and any(AcknowledgeType.RENEW in b.types for b in batches):
            result.ack_error = ErrorCode.INVALID_REQUEST
            result.ack_error_message = "RENEW in a request that is not a renewal (IsRenewAck)"
            continue
        outcome = _acknowledge(leader, state, batches, now_ms, service)
        if outcome.error != ErrorCode.NONE:
            result.ack_error, result.ack_error_message = outcome.error, outcome.message or None
        state.changed.append(leader)
        leader.wake()
        if leader.partition.settings.release_backoff_initial_ms:
            service.partitions.poke()  # a RELEASE's backoff: a visible time to wake at


def _acknowledge(
    leader: ShareLeader,
    state: _Request,
    batches: Sequence[AckBatch],
    now_ms: int,
    service: ShareService,
) -> AckOutcome:
    """The request's batches for one partition, applied all or nothing."""
    outcome = leader.partition.acknowledge_batches(
        state.member_id, batches, now_ms, renew_lock_ms=state.lock_ms
    )
    service.partitions.archived(leader, outcome.archived)
    if state.lock_ms is not None:  # a direct RENEW may shorten a lock: a nearer deadline
        service.partitions.poke()
    return outcome


# -- ShareAcknowledge ---------------------------------------------------------------


def handle_share_acknowledge(
    ctx: RequestContext, request: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse | Deferred[ShareAcknowledgeResponse]:
    service = share_service(ctx)
    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return _acknowledge_failure(
            ErrorCode.INVALID_REQUEST, "a group id and a member id are required"
        )
    direct = request.weir_direct_lock_ms != NOT_DIRECT
    if direct and _direct_lock_problem(request.weir_direct_lock_ms) is not None:
        return _acknowledge_failure(
            ErrorCode.INVALID_REQUEST, _direct_lock_problem(request.weir_direct_lock_ms) or ""
        )
    try:
        session = (
            None
            if direct
            else service.sessions.for_acknowledge(group_id, member_id, request.share_session_epoch)
        )
    except ShareSessionError as exc:
        return _acknowledge_failure(exc.error_code, str(exc))
    acks = {
        (t.topic_id, p.partition_index): [
            AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
            for b in p.acknowledgement_batches
        ]
        for t in request.topics
        for p in t.partitions
    }
    state = _Request(group_id, member_id, acks, renew=request.is_renew_ack or direct)
    lock_duration_ms = service.partitions.config(group_id).record_lock_duration_ms
    if direct:
        state.lock_ms = lock_duration_ms = request.weir_direct_lock_ms

    async def finish() -> ShareAcknowledgeResponse:
        await _acknowledge_all(ctx.broker, service, state, ctx.now_ms())
        if session is None and not direct:
            closing = service.sessions.get(group_id, member_id)
            if closing is not None:
                await service.close_session(closing)
        error = await service.partitions.persist(state.changed)
        if error != ErrorCode.NONE:
            _fail_unstored(state, error)
        return _acknowledge_response(state, lock_duration_ms)

    return Deferred(finish)


def _acknowledge_failure(error: ErrorCode, message: str) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=error, error_message=message)


def _acknowledge_response(state: _Request, lock_duration_ms: int) -> ShareAcknowledgeResponse:
    by_topic: dict[uuid.UUID, list[ShareAcknowledgeResponsePartition]] = {}
    for (topic_id, index), result in state.results.items():
        by_topic.setdefault(topic_id, []).append(
            ShareAcknowledgeResponsePartition(
                partition_index=index,
                error_code=result.ack_error,
                error_message=result.ack_error_message,
            )
        )
    return ShareAcknowledgeResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        acquisition_lock_timeout_ms=lock_duration_ms,
        responses=[
            ShareAcknowledgeResponseResponse(topic_id=topic_id, partitions=partitions)
            for topic_id, partitions in by_topic.items()
        ],
    )
