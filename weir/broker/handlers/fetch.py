"""Fetch v4–v16: stored batches up to the high watermark (read_committed: up to
the last stable offset, with the aborted transactions of the returned range
listed so the client drops their records), long-polled. Topics by
name (v4-v12) or by id (v13+); a partition this broker does not lead names its
leader (CurrentLeader, and from v16 the leader's endpoint: KIP-951). A follower's
fetch (its replica id: a field before v15, ReplicaState from v15) reads up to the
log end and is parked for appends.

A fetch that finds fewer than min_bytes parks one trio.Event on each partition
it reads; the produce path sets them once new records are durable, so waiting
costs nothing and wakes at once (no sleeping loops).

Each read is sized before it touches the disk by what the connection may still
hold (`in_flight_budget`): a fetch whose response cannot be charged in full is
served smaller. KIP-74's oversized first batch is served only when the budget
can take it whole; otherwise that partition is left out of this response.

Reads never wait on the disk on the event loop: they take only what the page
cache holds (`weir/log/page_cache.py`). When a partition's records are not
cached, the fetch is deferred: its cold ranges are read into the page cache on
the disk executor, then the whole fetch is read again (and charged) on the
loop, as a long-poll's retry is. After COLD_READ_ATTEMPTS_MAX warm-ups that
memory pressure undid, the read waits on the loop rather than never finishing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from functools import partial

import trio

from weir.broker.broker import Broker
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.in_flight_budget import CONNECTION_BUDGET, ConnectionBudget
from weir.broker.metrics import Metrics
from weir.broker.partition_replica import PartitionReplica
from weir.format.errors import ErrorCode
from weir.log.disk_executor import DiskJob
from weir.log.errors import LogError, OffsetOutOfRange
from weir.log.page_cache import ColdRange, ReadNotCached, warm
from weir.wire.messages.fetch import (
    FetchRequest,
    FetchRequestPartition,
    FetchRequestTopic,
    FetchResponse,
    FetchResponseAbortedTransaction,
    FetchResponseCurrentLeader,
    FetchResponseDivergingEpoch,
    FetchResponseNodeEndpoint,
    FetchResponsePartition,
    FetchResponseResponse,
)

# A consumer fetch; followers (replica_id >= 0) arrive with replication.
CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1  # isolation_level
INVALID_SESSION_ID = 0
FINAL_SESSION_EPOCH = -1
# Warm-ups of a fetch's cold ranges before its read may wait on the loop.
COLD_READ_ATTEMPTS_MAX = 3
FIRST_TOPIC_ID_VERSION = 13
FIRST_NODE_ENDPOINTS_VERSION = 16
LEADER_HINT_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)
ZERO_UUID = uuid.UUID(int=0)


@dataclass
class FetchPlan:
    """The partitions of one request, resolved once and read on every attempt."""

    # Per topic: its name and id (the response names topics by id from v13), and
    # each requested partition with its replica or the error to answer.
    topics: list[
        tuple[str, uuid.UUID, list[tuple[FetchRequestPartition, PartitionReplica | ErrorCode]]]
    ]
    response_bytes_max: int
    # A follower's fetch (its broker id): reads up to the log end, not the high
    # watermark, and parks for appends rather than for commits.
    replica_id: int = CONSUMER_REPLICA_ID
    # A consumer's read_committed fetch: up to the LSO, aborted transactions listed.
    read_committed: bool = False
    waiters: list[trio.Event] = field(default_factory=list)
    # What the last read found outside the page cache (its answer is not sent).
    cold: list[ColdRange] = field(default_factory=list)
    cached_only: bool = True
    # What the last read returned: (topic, bytes, offsets moved over) per partition.
    delivered: list[tuple[str, int, int]] = field(default_factory=list)


def handle_fetch(
    ctx: RequestContext, request: FetchRequest
) -> FetchResponse | Deferred[FetchResponse]:
    broker = ctx.broker
    limits = broker.config.limits
    session_error = _check_session(request)
    if session_error != ErrorCode.NONE:
        return FetchResponse(throttle_time_ms=0, error_code=session_error, session_id=0)
    # v15 moved the replica id into ReplicaState (KIP-903).
    replica_id = request.replica_state.replica_id if ctx.api_version >= 15 else request.replica_id
    if replica_id != CONSUMER_REPLICA_ID and not _replica_allowed(ctx, replica_id):
        return FetchResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, session_id=0
        )
    plan = FetchPlan(
        topics=[_plan_topic(broker, t, replica_id, ctx.api_version) for t in request.topics],
        response_bytes_max=min(
            max(request.max_bytes, 0),
            limits.fetch_response_bytes_max,
        ),
        replica_id=replica_id,
        read_committed=(
            request.isolation_level == READ_COMMITTED and replica_id == CONSUMER_REPLICA_ID
        ),
    )
    wait_s = min(max(request.max_wait_ms, 0), limits.fetch_wait_ms_max) / 1000
    deadline = trio.current_time() + wait_s
    min_bytes = max(request.min_bytes, 1)
    responses, total_bytes, has_error = _read_all(plan)
    if not plan.cold and (total_bytes >= min_bytes or has_error or wait_s <= 0):
        return _fetch_response(broker, plan, responses, ctx.api_version, ctx.listener_name)

    async def finish() -> FetchResponse:
        # Records may have arrived while earlier responses were being sent.
        warmups = 0
        while True:
            if plan.cold:
                warmups += 1
                await _warm(broker, plan, warmups)
            responses, total_bytes, has_error = _read_all(plan)
            if plan.cold:
                continue
            if total_bytes >= min_bytes or has_error or trio.current_time() >= deadline:
                return _fetch_response(broker, plan, responses, ctx.api_version, ctx.listener_name)
            await _wait_for_data(plan, deadline)

    return Deferred(finish)


def _plan_topic(
    broker: Broker, topic: FetchRequestTopic, replica_id: int, api_version: int
) -> tuple[str, uuid.UUID, list[tuple[FetchRequestPartition, PartitionReplica | ErrorCode]]]:
    """A requested topic by name (v4-v12) or by id (v13+: an unknown id answers
    UNKNOWN_TOPIC_ID for each of its partitions)."""
    if api_version >= FIRST_TOPIC_ID_VERSION:
        record = broker.controller.topic_by_id(topic.topic_id)
        if record is None:
            unknown: PartitionReplica | ErrorCode = ErrorCode.UNKNOWN_TOPIC_ID
            return "", topic.topic_id, [(p, unknown) for p in topic.partitions]
        name, topic_id = record.name, record.topic_id
    else:
        record = broker.controller.topic(topic.topic)
        name, topic_id = topic.topic, record.topic_id if record else ZERO_UUID
    return name, topic_id, [(p, _lookup(broker, name, p, replica_id)) for p in topic.partitions]


def _replica_allowed(ctx: RequestContext, replica_id: int) -> bool:
    """Only a cluster's brokers fetch as replicas, and only with their replication
    token (CVE-2018-1288's class: a client claiming a replica id could otherwise
    read above the high watermark and move the ISR)."""
    cluster = ctx.broker.cluster
    if cluster is None or not cluster.replica_fetch_allowed(replica_id, ctx.header.client_id):
        return False
    cluster.follower_connected(replica_id, ctx.connection)
    return True


def _lookup(
    broker: Broker, topic: str, request_part: FetchRequestPartition, replica_id: int
) -> PartitionReplica | ErrorCode:
    """The partition when this broker leads it; a follower's fetch also records
    how far that follower's log is durable (its fetch offset)."""
    replica = broker.lookup(topic, request_part.partition)
    if isinstance(replica, ErrorCode):
        return replica
    if replica_id != CONSUMER_REPLICA_ID and broker.cluster is not None:
        epoch_error = replica.check_leader_epoch(request_part.current_leader_epoch)
        if epoch_error == ErrorCode.NONE:
            broker.cluster.record_follower_fetch(replica, replica_id, request_part.fetch_offset)
    return replica


async def _warm(broker: Broker, plan: FetchPlan, warmups: int) -> None:
    """Read the plan's cold ranges into the page cache on the disk executor."""
    held = [cold for cold in plan.cold if cold.file.try_hold()]
    plan.cold = []
    if warmups >= COLD_READ_ATTEMPTS_MAX:
        plan.cached_only = False  # the next read may wait (memory is that short)
        broker.metrics.cold_reads_on_loop_total += 1
    if held:
        warmed_bytes = await broker.disk.run(DiskJob.COLD_READ, partial(warm, held))
        broker.metrics.cold_read_bytes_total += warmed_bytes


def _fetch_response(
    broker: Broker,
    plan: FetchPlan,
    responses: list[FetchResponseResponse],
    api_version: int,
    listener_name: str,
) -> FetchResponse:
    if plan.replica_id == CONSUMER_REPLICA_ID:
        _count_delivered(broker.metrics, plan.delivered)
    _add_leader_hints(broker, responses)
    leaders = {
        p.current_leader.leader_id
        for t in responses
        for p in t.partitions
        if p.current_leader.leader_id >= 0
    }
    endpoints = []
    if leaders and broker.cluster is not None and api_version >= FIRST_NODE_ENDPOINTS_VERSION:
        endpoints = [
            FetchResponseNodeEndpoint(
                node_id=b.node_id,
                host=b.endpoint(listener_name)[0],
                port=b.endpoint(listener_name)[1],
                rack=b.rack,
            )
            for b in broker.cluster.live_brokers()
            if b.node_id in leaders
        ]
    return FetchResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        session_id=INVALID_SESSION_ID,
        responses=responses,
        node_endpoints=endpoints,
    )


def _count_delivered(metrics: Metrics, delivered: list[tuple[str, int, int]]) -> None:
    for topic, size, offsets in delivered:
        traffic = metrics.traffic(topic)
        traffic.fetched_bytes += size
        traffic.fetched_records += offsets


def _add_leader_hints(broker: Broker, responses: list[FetchResponseResponse]) -> None:
    """KIP-951: a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    names its current leader (CurrentLeader, a tagged field since v12)."""
    cluster = broker.cluster
    if cluster is None:
        return
    alive = {b.node_id for b in cluster.live_brokers()}
    for topic in responses:
        record = broker.controller.topic(topic.topic)
        if record is None:
            continue
        for partition in topic.partitions:
            if partition.error_code not in LEADER_HINT_ERRORS:
                continue
            if not 0 <= partition.partition_index < record.partition_count:
                continue
            state = cluster.partition_state(record, partition.partition_index)
            if state.leader in alive:
                partition.current_leader = FetchResponseCurrentLeader(
                    leader_id=state.leader, leader_epoch=state.leader_epoch
                )


def _check_session(request: FetchRequest) -> ErrorCode:
    """No incremental fetch sessions (KIP-227): every fetch is a full, sessionless one.
    Before v7 a request has no session id: it decodes as INVALID_SESSION_ID (0)."""
    if request.session_id != INVALID_SESSION_ID:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    return ErrorCode.NONE


def _read_all(plan: FetchPlan) -> tuple[list[FetchResponseResponse], int, bool]:
    """Every partition's response. The caller charges the response as soon as
    this returns (no checkpoint in between), so the budget's answer holds."""
    budget = CONNECTION_BUDGET.get()
    plan.cold = []
    plan.delivered = []
    bytes_left = plan.response_bytes_max
    if budget is not None:
        bytes_left = min(bytes_left, budget.available_bytes())
    total_bytes = 0
    has_error = False
    responses = []
    for topic, topic_id, partitions in plan.topics:
        partition_responses = []
        for request_part, replica in partitions:
            first = total_bytes == 0 and _may_exceed(budget, bytes_left)
            response, size, offsets = _read_partition(
                request_part, replica, bytes_left, first, plan
            )
            if size > bytes_left and budget is not None and not budget.fits(size):
                response.records, size = b"", 0  # KIP-74's batch, but no room for it now
            if size:
                plan.delivered.append((topic, size, offsets))
            has_error = has_error or response.error_code != ErrorCode.NONE
            bytes_left -= size
            total_bytes += size
            partition_responses.append(response)
        responses.append(
            FetchResponseResponse(topic=topic, topic_id=topic_id, partitions=partition_responses)
        )
    return responses, total_bytes, has_error


def _may_exceed(budget: ConnectionBudget | None, bytes_left: int) -> bool:
    """Whether the first batch may be read whole beyond `bytes_left` (KIP-74):
    not when nothing at all could be charged (the read would be thrown away)."""
    return budget is None or bytes_left > 0 or budget.fits(1)


def _read_partition(
    request_part: FetchRequestPartition,
    replica: PartitionReplica | ErrorCode,
    bytes_left: int,
    first: bool,
    plan: FetchPlan,
) -> tuple[FetchResponsePartition, int, int]:
    index = request_part.partition
    if isinstance(replica, ErrorCode):
        return _partition_error(index, replica), 0, 0
    epoch_error = replica.check_leader_epoch(request_part.current_leader_epoch)
    if epoch_error != ErrorCode.NONE:
        return _partition_error(index, epoch_error, replica), 0, 0
    high_watermark = replica.high_watermark
    last_stable_offset = replica.log.last_stable_offset_at(high_watermark)
    # A follower reads up to the log end: it replicates what is not committed yet.
    if plan.replica_id != CONSUMER_REPLICA_ID:
        read_end = replica.log.log_end_offset
    else:
        read_end = last_stable_offset if plan.read_committed else high_watermark
    fetch_offset = request_part.fetch_offset
    diverging = _diverging_epoch(replica, request_part.last_fetched_epoch, fetch_offset)
    if diverging is not None:
        return _diverging_response(index, replica, diverging), 0, 0
    records: bytes | bytearray | memoryview = b""
    next_offset = fetch_offset
    bytes_max = min(request_part.partition_max_bytes, bytes_left)
    log_start_offset = replica.log.log_start_offset
    if fetch_offset < log_start_offset or fetch_offset > replica.log.log_end_offset:
        return _partition_error(index, ErrorCode.OFFSET_OUT_OF_RANGE, replica), 0, 0
    if fetch_offset < read_end and (bytes_max > 0 or first):
        try:
            result = replica.log.read(
                fetch_offset,
                bytes_max=max(bytes_max, 1),
                end_offset=read_end,
                cached_only=plan.cached_only,
            )
        except ReadNotCached as exc:
            plan.cold.append(exc.cold)  # this answer is not sent: warmed and read again
            return _partition_error(index, ErrorCode.NONE, replica), 0, 0
        except OffsetOutOfRange:
            return _partition_error(index, ErrorCode.OFFSET_OUT_OF_RANGE, replica), 0, 0
        except LogError as exc:
            return _partition_error(index, exc.error_code, replica), 0, 0
        records, next_offset = result.records, result.next_offset
        # KIP-74: only the first non-empty partition may exceed the byte limits.
        if not first and len(records) > bytes_max:
            records = b""
    aborted: list[FetchResponseAbortedTransaction] = []
    if plan.read_committed and records:
        aborted = [
            FetchResponseAbortedTransaction(producer_id=producer_id, first_offset=first_offset)
            for producer_id, first_offset in replica.log.aborted_transactions(
                fetch_offset, next_offset
            )
        ]
    return (
        FetchResponsePartition(
            partition_index=index,
            error_code=ErrorCode.NONE,
            high_watermark=high_watermark,
            last_stable_offset=last_stable_offset,
            log_start_offset=log_start_offset,
            aborted_transactions=aborted,
            preferred_read_replica=-1,
            records=records,
        ),
        len(records),
        next_offset - fetch_offset,
    )


def _diverging_epoch(
    replica: PartitionReplica, last_fetched_epoch: int, fetch_offset: int
) -> tuple[int, int] | None:
    """KIP-595/KIP-320 (Fetch v12+): a fetcher whose last fetched epoch ends
    before its fetch offset here, or is unknown here, has diverged from this
    log; it is told (epoch, end offset) to truncate to instead of records."""
    if last_fetched_epoch < 0:
        return None
    epoch, end_offset = replica.log.end_offset_for_epoch(last_fetched_epoch)
    if end_offset < fetch_offset or epoch < last_fetched_epoch:
        return epoch, end_offset
    return None


def _diverging_response(
    index: int, replica: PartitionReplica, diverging: tuple[int, int]
) -> FetchResponsePartition:
    response = _partition_error(index, ErrorCode.NONE, replica)
    response.aborted_transactions = []
    response.diverging_epoch = FetchResponseDivergingEpoch(
        epoch=diverging[0], end_offset=diverging[1]
    )
    return response


def _partition_error(
    index: int, error: ErrorCode, replica: PartitionReplica | None = None
) -> FetchResponsePartition:
    return FetchResponsePartition(
        partition_index=index,
        error_code=error,
        high_watermark=replica.high_watermark if replica else -1,
        last_stable_offset=replica.last_stable_offset if replica else -1,
        log_start_offset=replica.log.log_start_offset if replica else -1,
        aborted_transactions=None,
        preferred_read_replica=-1,
        # Empty, not null: librdkafka rejects a null record set even beside an error.
        records=b"",
    )


async def _wait_for_data(plan: FetchPlan, deadline: float) -> None:
    event = trio.Event()
    replicas = [r for _, _, parts in plan.topics for _, r in parts if not isinstance(r, ErrorCode)]
    follower = plan.replica_id != CONSUMER_REPLICA_ID
    for replica in replicas:
        (replica.follower_waiters if follower else replica.waiters).add(event)
    try:
        with trio.move_on_at(deadline):
            await event.wait()
    finally:
        for replica in replicas:
            (replica.follower_waiters if follower else replica.waiters).discard(event)
