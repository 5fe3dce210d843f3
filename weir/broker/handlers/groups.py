"""FindCoordinator v0–v4, OffsetCommit v2–v9, OffsetFetch v1–v9.

A single node coordinates every group. Handlers validate, change the state
machines and append their records on the connection's reader, then defer the
answer until the records are durable (weir.broker.coordinators.group_service).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from weir.broker.coordinators.group_service import GroupService
from weir.broker.coordinators.offsets_topic import OFFSETS_TOPIC_NAME
from weir.broker.handlers.acl_operations import group_operations
from weir.broker.handlers.context import Deferred, RequestContext
from weir.format.errors import ErrorCode
from weir.format.schema import strict_value
from weir.groupcoord.classic_messages import (
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    LeavingMember,
    OffsetToCommit,
    SyncGroupRequest,
    SyncGroupResult,
)
from weir.groupcoord.classic_messages import OffsetCommitRequest as ClassicCommit
from weir.groupcoord.committed_offsets import (
    CommittedOffset,
    offsets_by_topic,
)
from weir.groupcoord.pending import Reply
from weir.log.errors import LogError
from weir.wire.apis.groups import COORDINATOR_KEY_TYPE_GROUP, COORDINATOR_KEY_TYPE_TRANSACTION
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
from weir.wire.messages.consumer_groups import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeResponseGroup,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from weir.wire.messages.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteGroupsResponseResult,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeGroupsResponseGroup,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListGroupsResponseGroup,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
    SyncGroupResponse,
)
from weir.wire.messages.groups import JoinGroupRequest as JoinGroupWireRequest
from weir.wire.messages.groups import SyncGroupRequest as SyncGroupWireRequest

log = logging.getLogger(__name__)

NO_OFFSET = -1


def _service(ctx: RequestContext) -> GroupService:
    service = ctx.broker.groups
    assert isinstance(service, GroupService), "the broker's group service is attached at start"
    return service


# -- FindCoordinator -----------------------------------------------------------------


def handle_find_coordinator(
    ctx: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    keys = request.coordinator_keys if ctx.api_version >= 4 else [request.key]
    answers = [_find(ctx, key, request.key_type) for key in keys]  # v0: GROUP
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=answers)
    only = answers[0]
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=only.error_code,
        error_message=only.error_message,
        node_id=only.node_id,
        host=only.host,
        port=only.port,
    )


def _find(ctx: RequestContext, key: str, key_type: int) -> FindCoordinatorResponseCoordinator:
    error, message = ErrorCode.NONE, None
    if key_type == COORDINATOR_KEY_TYPE_TRANSACTION:
        error, message = (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "transactions are not supported by this broker yet",
        )
    elif key_type != COORDINATOR_KEY_TYPE_GROUP:
        error, message = ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
    elif not key:
        error, message = ErrorCode.INVALID_REQUEST, "the group id is empty"
    else:
        try:
            _service(ctx).ensure_ready(ctx.now_ms())
        except (LogError, OSError) as exc:
            log.error("cannot prepare %s: %s", "the offsets topic", exc)
            error, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
        if error == ErrorCode.NONE and ctx.broker.cluster is not None:
            return _find_in_cluster(ctx, key)
        if error == ErrorCode.NONE and not _service(ctx).available(key):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            message = _service(ctx).unavailable_reason(key)
    advertised = ctx.broker.config.advertised
    found = error == ErrorCode.NONE
    return FindCoordinatorResponseCoordinator(
        key=key,
        node_id=ctx.broker.config.node_id if found else -1,
        host=advertised.host if found else "",
        port=advertised.port if found else -1,
        error_code=error,
        error_message=message,
    )


def _find_in_cluster(ctx: RequestContext, key: str) -> FindCoordinatorResponseCoordinator:
    """A group's coordinator is the leader of its offsets partition, whichever
    broker is asked (the client then talks to that one)."""
    cluster = ctx.broker.cluster
    assert cluster is not None
    topic = ctx.broker.controller.topic(OFFSETS_TOPIC_NAME)
    leader = None
    if topic is not None:
        state = cluster.partition_state(topic, _service(ctx).partition_for(key))
        leader = next((b for b in cluster.live_brokers() if b.node_id == state.leader), None)
    if leader is None:
        return FindCoordinatorResponseCoordinator(
            key=key, node_id=-1, host="", port=-1,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            error_message=f"{OFFSETS_TOPIC_NAME} has no leader for this group yet; retry",
        )  # fmt: skip
    return FindCoordinatorResponseCoordinator(
        key=key, node_id=leader.node_id, host=leader.host, port=leader.port,
        error_code=ErrorCode.NONE, error_message=None,
    )  # fmt: skip


# -- OffsetCommit --------------------------------------------------------------------


def handle_offset_commit(
    ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse | Deferred[OffsetCommitResponse]:
    """Partitions of unknown topics are refused here; the rest go to the group's
    coordinator: KIP-848 for consumer groups, classic for every other group."""
    service = _service(ctx)
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
    service = _service(ctx)
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


# -- KIP-848: ConsumerGroupHeartbeat and ConsumerGroupDescribe -------------------------


def handle_consumer_group_heartbeat(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse | Deferred[ConsumerGroupHeartbeatResponse]:
    service = _service(ctx)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)
    if not service.available(request.group_id):
        return _heartbeat_failure(ErrorCode.NOT_COORDINATOR)
    owned = request.topic_partitions
    service.sync_topic_names()  # topics created or deleted reach regex subscriptions
    result = service.consumer_groups.heartbeat(
        request.group_id,
        request.member_id,
        request.member_epoch,
        now_ms=now_ms,
        topics=service.topic_info,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=request.subscribed_topic_names,
        subscribed_topic_regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor,
        topic_partitions=None
        if owned is None
        else [(tp.topic_id, list(tp.partitions)) for tp in owned],
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
        api_version=ctx.api_version,
    )
    response = strict_value(ConsumerGroupHeartbeatResponse, result.response())
    service.poke()  # member deadlines moved
    if not result.records:
        return response
    try:
        pending = service.append(result.records, request.group_id)
    except LogError as exc:
        log.error("consumer group %s: records not appended: %s", request.group_id, exc)
        return _heartbeat_failure(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def finish() -> ConsumerGroupHeartbeatResponse:
        error = await pending.durable()
        return response if error == ErrorCode.NONE else _heartbeat_failure(error)

    return Deferred(finish)


def _heartbeat_failure(error: ErrorCode) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message="the group coordinator could not store the group's state",
        member_id=None,
        member_epoch=-1,
        heartbeat_interval_ms=0,
        assignment=None,
    )


def handle_consumer_group_describe(
    ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    service = _service(ctx)
    service.ensure_ready(ctx.now_ms())
    described = [
        strict_value(ConsumerGroupDescribeResponseGroup, group)
        for group in service.consumer_groups.describe(request.group_ids, service.topic_name)
    ]
    _set_group_operations(described, request.include_authorized_operations)
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=described)


def _set_group_operations(
    described: Sequence[DescribeGroupsResponseGroup | ConsumerGroupDescribeResponseGroup],
    requested: bool,
) -> None:
    """KIP-430: the groups described without error carry every group operation
    when the client asked (no authorizer), as Kafka's KafkaApis sets them."""
    for group in described:
        if group.error_code == ErrorCode.NONE:
            group.authorized_operations = group_operations(requested)


# -- Classic groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup ------------------------


def _classic_conflict(service: GroupService, group_id: str) -> bool:
    """A group id already used by a KIP-848 consumer group cannot join classically."""
    return service.consumer_groups.has_group(group_id)


ResultT = TypeVar("ResultT")
ResponseT = TypeVar("ResponseT")


def _defer_classic(
    service: GroupService,
    reply: Reply[ResultT],
    group_id: str,
    respond: Callable[[ResultT | None, ErrorCode], ResponseT],
) -> Deferred[ResponseT]:
    """The classic coordinator's protocol: records durable, then wake others, then
    answer once this request's own handle is done."""

    async def finish() -> ResponseT:
        error = await service.settle(reply.records, reply.completed, group_id)
        if error != ErrorCode.NONE:
            return respond(None, error)
        await service.wait_for(reply.pending)
        if not service.available(group_id):
            # Completed by a call whose records failed: never answer with that.
            return respond(None, ErrorCode.NOT_COORDINATOR)
        return respond(reply.pending.result, ErrorCode.NONE)

    return Deferred(finish)


def handle_join_group(
    ctx: RequestContext, request: JoinGroupWireRequest
) -> JoinGroupResponse | Deferred[JoinGroupResponse]:
    service = _service(ctx)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)
    version = ctx.api_version

    def respond(result: JoinGroupResult | None, error: ErrorCode) -> JoinGroupResponse:
        if result is None:
            result = JoinGroupResult(error, member_id=request.member_id)
        response = strict_value(JoinGroupResponse, result.response(version))
        response.throttle_time_ms = 0
        return response

    if not service.available(request.group_id):
        return respond(None, ErrorCode.NOT_COORDINATOR)
    if _classic_conflict(service, request.group_id):
        return respond(None, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    metadata_bytes_max = ctx.broker.config.limits.group_member_metadata_bytes_max
    if sum(len(p.metadata) for p in request.protocols) > metadata_bytes_max:
        log.warning("JoinGroup for %s refused: protocol metadata over %d bytes",
                    request.group_id, metadata_bytes_max)  # fmt: skip
        return respond(None, ErrorCode.INVALID_REQUEST)
    session_timeout_ms = request.session_timeout_ms
    join = JoinGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else session_timeout_ms,
        group_instance_id=request.group_instance_id,
        require_known_member_id=version >= 4,
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
        reason=request.reason,
    )
    reply = service.classic.join_group(join, now_ms)
    return _defer_classic(service, reply, request.group_id, respond)


def handle_sync_group(
    ctx: RequestContext, request: SyncGroupWireRequest
) -> SyncGroupResponse | Deferred[SyncGroupResponse]:
    service = _service(ctx)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)

    def respond(result: SyncGroupResult | None, error: ErrorCode) -> SyncGroupResponse:
        response = strict_value(SyncGroupResponse, (result or SyncGroupResult(error)).response())
        response.throttle_time_ms = 0
        return response

    if not service.available(request.group_id):
        return respond(None, ErrorCode.NOT_COORDINATOR)
    assignments_bytes_max = ctx.broker.config.limits.group_assignments_bytes_max
    if sum(len(a.assignment) for a in request.assignments) > assignments_bytes_max:
        log.warning("SyncGroup for %s refused: assignments over %d bytes",
                    request.group_id, assignments_bytes_max)  # fmt: skip
        return respond(None, ErrorCode.INVALID_REQUEST)
    sync = SyncGroupRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        assignments=[(a.member_id, bytes(a.assignment)) for a in request.assignments],
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
    )
    reply = service.classic.sync_group(sync, now_ms)
    return _defer_classic(service, reply, request.group_id, respond)


def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    service = _service(ctx)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)
    if not service.available(request.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.NOT_COORDINATOR)
    error = service.classic.heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id,
        now_ms,
    )
    service.poke()
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


def handle_leave_group(
    ctx: RequestContext, request: LeaveGroupRequest
) -> LeaveGroupResponse | Deferred[LeaveGroupResponse]:
    service = _service(ctx)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)
    version = ctx.api_version
    if version >= 3:
        leaving = [
            LeavingMember(m.member_id, m.group_instance_id, m.reason) for m in request.members
        ]
    else:
        leaving = [LeavingMember(request.member_id)]

    def respond(result: LeaveGroupResult | None, error: ErrorCode) -> LeaveGroupResponse:
        left = result or LeaveGroupResult(error)
        response = strict_value(LeaveGroupResponse, left.response(version))
        response.throttle_time_ms = 0
        return response

    if not service.available(request.group_id):
        return respond(None, ErrorCode.NOT_COORDINATOR)
    reply = service.classic.leave_group(request.group_id, leaving, now_ms)
    return _defer_classic(service, reply, request.group_id, respond)


# -- Group administration: ListGroups, DescribeGroups, DeleteGroups, OffsetDelete -------

GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"


def group_listings(
    service: GroupService, states: list[str] | None, types: list[str] | None
) -> list[ListGroupsResponseGroup]:
    """Every group of both coordinators, filtered by state and type (case-insensitive)."""
    wanted_states = {s.lower() for s in states} if states else None
    wanted_types = {t.lower() for t in types} if types else None
    listed = [
        (g.group_id, g.protocol_type, g.state, GROUP_TYPE_CLASSIC)
        for g in service.classic.list_groups()
    ]
    listed += [
        (group_id, GROUP_TYPE_CONSUMER, group.state().value, GROUP_TYPE_CONSUMER)
        for group_id, group in service.consumer_groups.groups.items()
    ]
    return [
        ListGroupsResponseGroup(group_id=g, protocol_type=p, group_state=s, group_type=t)
        for g, p, s, t in sorted(listed)
        if (wanted_states is None or s.lower() in wanted_states)
        and (wanted_types is None or t in wanted_types)
    ]


def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    service = _service(ctx)
    service.ensure_ready(ctx.now_ms())
    # Versions without the filters decode them as empty lists: no filter, as absent.
    groups = group_listings(service, request.states_filter, request.types_filter)
    return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=groups)


def handle_describe_groups(
    ctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    service = _service(ctx)
    service.ensure_ready(ctx.now_ms())
    described = []
    for group_id in request.groups:
        if service.consumer_groups.has_group(group_id):
            state = service.consumer_groups.group_state(group_id).value
            described.append(
                DescribeGroupsResponseGroup(
                    error_code=ErrorCode.NONE,
                    group_id=group_id,
                    group_state=state,
                    protocol_type=GROUP_TYPE_CONSUMER,
                    protocol_data="",
                    members=[],
                )
            )
        else:
            classic = service.classic.describe_group(group_id).response()
            described.append(strict_value(DescribeGroupsResponseGroup, classic))
    _set_group_operations(described, ctx.api_version >= 3 and request.include_authorized_operations)
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


def handle_delete_groups(
    ctx: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse | Deferred[DeleteGroupsResponse]:
    service = _service(ctx)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)
    results: dict[str, ErrorCode] = {}
    records = []
    classic_ids = []
    for group_id in request.groups_names:
        if service.consumer_groups.has_group(group_id):
            error, group_records = service.consumer_groups.delete_group(group_id)
            results[group_id] = error
            if error == ErrorCode.NONE:
                records += group_records + service.offsets.delete_group(group_id)
        else:
            classic_ids.append(group_id)
    reply = service.classic.delete_groups(classic_ids, now_ms)
    records += reply.records

    async def finish() -> DeleteGroupsResponse:
        durable_error = await service.settle(records, reply.completed)
        await service.wait_for(reply.pending)
        results.update(dict(reply.pending.result))
        return DeleteGroupsResponse(
            throttle_time_ms=0,
            results=[
                DeleteGroupsResponseResult(
                    group_id=g, error_code=results.get(g, ErrorCode.NONE) or durable_error
                )
                for g in request.groups_names
            ],
        )

    return Deferred(finish)


def handle_offset_delete(
    ctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse | Deferred[OffsetDeleteResponse]:
    service = _service(ctx)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)
    partitions = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]

    def respond(error: ErrorCode, errors: dict[tuple[str, int], ErrorCode]) -> OffsetDeleteResponse:
        return OffsetDeleteResponse(
            error_code=error,
            throttle_time_ms=0,
            topics=[
                OffsetDeleteResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetDeleteResponsePartition(
                            partition_index=p.partition_index,
                            error_code=errors.get((t.name, p.partition_index), ErrorCode.NONE),
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
        )

    if service.consumer_groups.has_group(request.group_id):
        if service.has_members(request.group_id):
            return respond(ErrorCode.NON_EMPTY_GROUP, {})
        records = service.offsets.delete(request.group_id, partitions)
        reply_records, completed, pending = records, [], None
    else:
        reply = service.classic.delete_offsets(request.group_id, partitions, now_ms)
        reply_records, completed, pending = reply.records, reply.completed, reply.pending

    async def finish() -> OffsetDeleteResponse:
        durable_error = await service.settle(reply_records, completed, request.group_id)
        if pending is None:
            return respond(durable_error, {})
        await service.wait_for(pending)
        result = pending.result
        errors = {(e.topic, e.partition): e.error for e in result.partitions}
        return respond(result.error or durable_error, errors)

    return Deferred(finish)
