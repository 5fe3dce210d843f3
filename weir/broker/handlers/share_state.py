"""The share coordinator's internal APIs (KIP-932), asked by share partition leaders
on other brokers: ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState
and ReadShareGroupStateSummary.

Each partition of a request is one key (group, topic id, partition) of a
`__share_group_state` partition this broker must lead and have loaded
(`ShareStateService.read_here` and the others; else NOT_COORDINATOR, or
COORDINATOR_LOAD_IN_PROGRESS while loading); a topic or partition the metadata does
not know is UNKNOWN_TOPIC_OR_PARTITION (as Kafka's share coordinator checks its
metadata image). A write or a read that stores a new leader epoch is answered once
durable. The partitions of one request are served one after the other.
"""

from __future__ import annotations

import trio

from weir.broker.coordinators.share_state_rpc import (
    ShareStateUnavailableError,
    state_from_wire,
    wire_batches,
)
from weir.broker.coordinators.share_state_service import ShareKey, ShareStateService
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.share_fetch import share_service
from weir.format.errors import ErrorCode
from weir.sharecoord.share_state import ShareState
from weir.wire.apis.share_state import (
    DEFAULT_STATE_EPOCH,
    EPOCH_NOT_CHECKED,
    UNINITIALIZED_START_OFFSET,
)
from weir.wire.messages.share_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    DeleteShareGroupStateResponsePartition,
    DeleteShareGroupStateResponseResult,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateResponsePartition,
    ReadShareGroupStateResponseResult,
    ReadShareGroupStateResponseStateBatch,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    ReadShareGroupStateSummaryResponsePartition,
    ReadShareGroupStateSummaryResponseResult,
    WriteShareGroupStateRequest,
    WriteShareGroupStateRequestPartition,
    WriteShareGroupStateResponse,
    WriteShareGroupStateResponsePartition,
    WriteShareGroupStateResponseResult,
)

# How long a request waits for the state topic to be created or loaded here before
# answering COORDINATOR_LOAD_IN_PROGRESS (the asking broker retries).
READY_WAIT_S = 1.0


async def _ready(store: ShareStateService) -> None:
    with trio.move_on_after(READY_WAIT_S):
        await store.ready()


def _unknown_partition(ctx: RequestContext, key: ShareKey) -> ShareStateUnavailableError | None:
    topic = ctx.broker.controller.topic_by_id(key.topic_id)
    if topic is None or not 0 <= key.partition < topic.partition_count:
        return ShareStateUnavailableError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such topic partition"
        )
    return None


# -- ReadShareGroupState (84) ---------------------------------------------------------


def handle_read_share_group_state(
    ctx: RequestContext, request: ReadShareGroupStateRequest
) -> Deferred[ReadShareGroupStateResponse]:
    store = share_service(ctx).store

    async def finish() -> ReadShareGroupStateResponse:
        await _ready(store)
        results = []
        for topic in request.topics:
            partitions = []
            for requested in topic.partitions:
                key = ShareKey(request.group_id, topic.topic_id, requested.partition)
                partitions.append(await _read_one(ctx, store, key, requested.leader_epoch))
            results.append(ReadShareGroupStateResponseResult(topic.topic_id, partitions))
        return ReadShareGroupStateResponse(results)

    return Deferred(finish)


async def _read_one(
    ctx: RequestContext, store: ShareStateService, key: ShareKey, leader_epoch: int
) -> ReadShareGroupStateResponsePartition:
    try:
        unknown = _unknown_partition(ctx, key)
        if unknown is not None:
            raise unknown
        state = await store.read_here(key, leader_epoch)
    except ShareStateUnavailableError as exc:
        return ReadShareGroupStateResponsePartition(
            partition=key.partition, error_code=exc.error_code, error_message=str(exc)
        )
    if state is None:
        return ReadShareGroupStateResponsePartition(
            partition=key.partition,
            state_epoch=DEFAULT_STATE_EPOCH,
            start_offset=UNINITIALIZED_START_OFFSET,
        )
    return ReadShareGroupStateResponsePartition(
        partition=key.partition,
        state_epoch=state.state_epoch,
        start_offset=state.start_offset,
        state_batches=wire_batches(state, ReadShareGroupStateResponseStateBatch),
        dead_letter_mark=state.dead_letter_mark,
    )


# -- WriteShareGroupState (85) --------------------------------------------------------


def handle_write_share_group_state(
    ctx: RequestContext, request: WriteShareGroupStateRequest
) -> Deferred[WriteShareGroupStateResponse]:
    store = share_service(ctx).store

    async def finish() -> WriteShareGroupStateResponse:
        await _ready(store)
        results = []
        for topic in request.topics:
            partitions = []
            for requested in topic.partitions:
                key = ShareKey(request.group_id, topic.topic_id, requested.partition)
                error = await _write_one(ctx, store, key, requested)
                partitions.append(
                    WriteShareGroupStateResponsePartition(
                        partition=requested.partition,
                        error_code=error.error_code if error else ErrorCode.NONE,
                        error_message=str(error) if error else None,
                    )
                )
            results.append(WriteShareGroupStateResponseResult(topic.topic_id, partitions))
        return WriteShareGroupStateResponse(results)

    return Deferred(finish)


async def _write_one(
    ctx: RequestContext,
    store: ShareStateService,
    key: ShareKey,
    requested: WriteShareGroupStateRequestPartition,
) -> ShareStateUnavailableError | None:
    try:
        unknown = _unknown_partition(ctx, key)
        if unknown is not None:
            return unknown
        state = _written_state(store, key, requested)
        await store.write_here(key, state)
    except ShareStateUnavailableError as exc:
        return exc
    return None


def _written_state(
    store: ShareStateService, key: ShareKey, requested: WriteShareGroupStateRequestPartition
) -> ShareState:
    """The state a write asks for: its batches over its start offset (-1: the stored
    one's). Raises ShareStateUnavailableError (INVALID_REQUEST) when it is not one."""
    start_offset = requested.start_offset
    if start_offset == UNINITIALIZED_START_OFFSET:
        stored = store.latest.get(key)
        if stored is None:
            raise ShareStateUnavailableError(
                ErrorCode.INVALID_REQUEST, "no start offset, and none stored"
            )
        start_offset = stored.start_offset
    state_epoch = requested.state_epoch
    if state_epoch == EPOCH_NOT_CHECKED:
        stored = store.latest.get(key)
        state_epoch = DEFAULT_STATE_EPOCH if stored is None else stored.state_epoch
    try:
        return state_from_wire(
            start_offset,
            state_epoch,
            requested.leader_epoch,
            requested.state_batches,
            requested.dead_letter_mark,
        )
    except ValueError as exc:
        raise ShareStateUnavailableError(ErrorCode.INVALID_REQUEST, str(exc)) from exc


# -- DeleteShareGroupState (86) -------------------------------------------------------


def handle_delete_share_group_state(
    ctx: RequestContext, request: DeleteShareGroupStateRequest
) -> Deferred[DeleteShareGroupStateResponse]:
    store = share_service(ctx).store

    async def finish() -> DeleteShareGroupStateResponse:
        await _ready(store)
        results = []
        for topic in request.topics:
            partitions = []
            for requested in topic.partitions:
                key = ShareKey(request.group_id, topic.topic_id, requested.partition)
                try:
                    await store.write_here(key, None)
                except ShareStateUnavailableError as exc:
                    partitions.append(
                        DeleteShareGroupStateResponsePartition(
                            requested.partition, exc.error_code, str(exc)
                        )
                    )
                    continue
                partitions.append(DeleteShareGroupStateResponsePartition(requested.partition))
            results.append(DeleteShareGroupStateResponseResult(topic.topic_id, partitions))
        return DeleteShareGroupStateResponse(results)

    return Deferred(finish)


# -- ReadShareGroupStateSummary (87) --------------------------------------------------


def handle_read_share_group_state_summary(
    ctx: RequestContext, request: ReadShareGroupStateSummaryRequest
) -> Deferred[ReadShareGroupStateSummaryResponse]:
    store = share_service(ctx).store

    async def finish() -> ReadShareGroupStateSummaryResponse:
        await _ready(store)
        results = []
        for topic in request.topics:
            partitions = []
            for requested in topic.partitions:
                key = ShareKey(request.group_id, topic.topic_id, requested.partition)
                partitions.append(_summary_one(ctx, store, key))
            results.append(ReadShareGroupStateSummaryResponseResult(topic.topic_id, partitions))
        return ReadShareGroupStateSummaryResponse(results)

    return Deferred(finish)


def _summary_one(
    ctx: RequestContext, store: ShareStateService, key: ShareKey
) -> ReadShareGroupStateSummaryResponsePartition:
    try:
        unknown = _unknown_partition(ctx, key)
        if unknown is not None:
            raise unknown
        state = store.summary_here(key)
    except ShareStateUnavailableError as exc:
        return ReadShareGroupStateSummaryResponsePartition(
            partition=key.partition, error_code=exc.error_code, error_message=str(exc)
        )
    if state is None:
        return ReadShareGroupStateSummaryResponsePartition(
            partition=key.partition,
            state_epoch=DEFAULT_STATE_EPOCH,
            leader_epoch=EPOCH_NOT_CHECKED,
            start_offset=UNINITIALIZED_START_OFFSET,
        )
    return ReadShareGroupStateSummaryResponsePartition(
        partition=key.partition,
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        delivery_complete_count=state.delivery_complete_count,
    )
