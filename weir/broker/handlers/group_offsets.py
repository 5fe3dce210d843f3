"""OffsetCommit v2–v9 and OffsetFetch v1–v9: a group's committed offsets.

Commits go to the group's coordinator (KIP-848 for consumer groups, classic for
every other group), are appended to `__consumer_offsets` on the connection's
reader, and are answered once durable (weir.broker.coordinators.group_service).
"""

from __future__ import annotations

from collections.abc import Callable

from weir.broker.coordinators.group_service import GroupService
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.groups import group_service
from weir.format.errors import ErrorCode
from weir.groupcoord.classic_messages import OffsetCommitRequest as ClassicCommit
from weir.groupcoord.classic_messages import (
    OffsetToCommit,
)
from weir.groupcoord.committed_offsets import (
    CommittedOffset,
    offsets_by_topic,
)
from weir.log.errors import LogError
from weir.wire.messages.committed_offsets import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponseGroupTopic,
    OffsetFetchResponseGroupTopicPartition,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)

NO_OFFSET = -1


def handle_offset_commit(
    ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse | Deferred[OffsetCommitResponse]:
    """Partitions of unknown topics are refused here; the rest go to the group's
    coordinator: KIP-848 for consumer groups, classic for every other group."""
    service = group_service(ctx)
    group_id = request.group_id
    if not group_id:
        return _commit_response(request, lambda topic, partition: ErrorCode.INVALID_GROUP_ID)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)
    if not service.available(group_id):
        return _commit_response(request, lambda topic, partition: ErrorCode.NOT_COORDINATOR)
    errors: dict[tuple[str, int], ErrorCode] = {}
    valid: list[tuple[str, OffsetCommitRequestPartition]] = []
    for topic in request.topics:
        for part in topic.partitions:
            error = _check_partition(ctx, topic.name, part)
            errors[(topic.name, part.partition_index)] = error
            if error == ErrorCode.NONE:
                valid.append((topic.name, part))
    if service.consumer_groups.has_group(group_id):
        return _commit_consumer_group(service, request, valid, errors, now_ms)
    return _commit_classic(service, request, valid, errors, now_ms)


def _commit_consumer_group(
    service: GroupService,
    request: OffsetCommitRequest,
    valid: list[tuple[str, OffsetCommitRequestPartition]],
    errors: dict[tuple[str, int], ErrorCode],
    now_ms: int,
) -> OffsetCommitResponse | Deferred[OffsetCommitResponse]:
    group_id = request.group_id
    group_error = service.consumer_groups.validate_offset_commit(
        group_id, request.member_id, request.generation_id_or_member_epoch
    )
    if group_error != ErrorCode.NONE:
        return _commit_response(request, lambda topic, partition: group_error)
    accepted = [
        (
            name,
            part.partition_index,
            CommittedOffset(
                part.committed_offset,
                part.committed_leader_epoch,
                part.committed_metadata or "",
                now_ms,
            ),
        )
        for name, part in valid
    ]
    if not accepted:
        return _commit_response(request, lambda topic, partition: errors[(topic, partition)])
    try:
        pending = service.append(service.offsets.commit(group_id, accepted), group_id)
    except LogError as exc:
        append_error = exc.error_code
        return _commit_response(request, lambda topic, partition: append_error)

    async def finish() -> OffsetCommitResponse:
        durable_error = await pending.durable()
        return _commit_response(
            request, lambda topic, partition: errors[(topic, partition)] or durable_error
        )

    return Deferred(finish)


def _commit_classic(
    service: GroupService,
    request: OffsetCommitRequest,
    valid: list[tuple[str, OffsetCommitRequestPartition]],
    errors: dict[tuple[str, int], ErrorCode],
    now_ms: int,
) -> Deferred[OffsetCommitResponse]:
    commit = ClassicCommit(
        group_id=request.group_id,
        offsets=[
            OffsetToCommit(
                name,
                part.partition_index,
                part.committed_offset,
                part.committed_leader_epoch,
                part.committed_metadata,
            )
            for name, part in valid
        ],
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
    )
    reply = service.classic.commit_offsets(commit, now_ms)

    async def finish() -> OffsetCommitResponse:
        durable_error = await service.settle(reply.records, reply.completed, request.group_id)
        await service.wait_for(reply.pending)
        for failed in reply.pending.result:
            errors[(failed.topic, failed.partition)] = failed.error
        return _commit_response(
            request, lambda topic, partition: errors[(topic, partition)] or durable_error
        )

    return Deferred(finish)


def _check_partition(
    ctx: RequestContext, topic: str, part: OffsetCommitRequestPartition
) -> ErrorCode:
    record = ctx.broker.controller.topic(topic)
    if record is None or not 0 <= part.partition_index < record.partition_count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    metadata = part.committed_metadata
    if metadata is not None and len(metadata) > ctx.broker.config.offset_metadata_max_bytes:
        return ErrorCode.OFFSET_METADATA_TOO_LARGE
    return ErrorCode.NONE


def _commit_response(
    request: OffsetCommitRequest, error_of: Callable[[str, int], ErrorCode]
) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=part.partition_index,
                        error_code=error_of(topic.name, part.partition_index),
                    )
                    for part in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


# -- OffsetFetch ---------------------------------------------------------------------


def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    service = group_service(ctx)
    service.ensure_ready(ctx.now_ms())
    if ctx.api_version >= 8:
        return OffsetFetchResponse(
            throttle_time_ms=0, groups=[_fetch_group(service, group) for group in request.groups]
        )
    error, topics = _fetch_offsets(service, request)
    return OffsetFetchResponse(
        throttle_time_ms=0,
        topics=[
            OffsetFetchResponseTopic(
                name=name,
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=partition,
                        committed_offset=committed.offset if committed else NO_OFFSET,
                        committed_leader_epoch=committed.leader_epoch if committed else -1,
                        metadata=committed.metadata if committed else "",
                        error_code=ErrorCode.NONE,
                    )
                    for partition, committed in partitions
                ],
            )
            for name, partitions in topics
        ],
        error_code=error,
    )


def _fetch_group(service: GroupService, group: OffsetFetchRequestGroup) -> OffsetFetchResponseGroup:
    error, topics = _fetch_offsets(service, group)
    return OffsetFetchResponseGroup(
        group_id=group.group_id,
        topics=[
            OffsetFetchResponseGroupTopic(
                name=name,
                partitions=[
                    OffsetFetchResponseGroupTopicPartition(
                        partition_index=partition,
                        committed_offset=committed.offset if committed else NO_OFFSET,
                        committed_leader_epoch=committed.leader_epoch if committed else -1,
                        metadata=committed.metadata if committed else "",
                        error_code=ErrorCode.NONE,
                    )
                    for partition, committed in partitions
                ],
            )
            for name, partitions in topics
        ],
        error_code=error,
    )


FetchedTopics = list[tuple[str, list[tuple[int, CommittedOffset | None]]]]


def _fetch_offsets(
    service: GroupService, group: OffsetFetchRequest | OffsetFetchRequestGroup
) -> tuple[ErrorCode, FetchedTopics]:
    """One group's committed offsets by topic (None: nothing committed), or an error.
    Before v8 the request itself names the one group (without member fields)."""
    group_id = group.group_id
    member_id = group.member_id if isinstance(group, OffsetFetchRequestGroup) else None
    error = ErrorCode.NONE
    if not group_id:
        error = ErrorCode.INVALID_GROUP_ID
    elif not service.available(group_id):
        error = ErrorCode.NOT_COORDINATOR
    elif service.consumer_groups.has_group(group_id) and member_id is not None:
        assert isinstance(group, OffsetFetchRequestGroup)
        error = service.consumer_groups.validate_offset_fetch(
            group_id, member_id, group.member_epoch
        )
    if error != ErrorCode.NONE:
        return error, []
    stored = service.committed_offsets(group_id)
    if group.topics is None:  # every committed offset of the group
        return ErrorCode.NONE, [
            (name, [(p, c) for p, c in partitions]) for name, partitions in offsets_by_topic(stored)
        ]
    return ErrorCode.NONE, [
        (
            topic.name,
            [(index, stored.get((topic.name, index))) for index in topic.partition_indexes],
        )
        for topic in group.topics
    ]
