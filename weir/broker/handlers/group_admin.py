"""Group administration: ListGroups, DescribeGroups, DeleteGroups, OffsetDelete,
over the three coordinators (classic, KIP-848 and share groups).

Share groups as Kafka 4.4 answers for them: ListGroups lists them with group type and
protocol type "share"; DescribeGroups (a classic-group API) describes one as it does
an unknown group (Dead, no error); DeleteGroups deletes an empty one, its share state
first (`__share_group_state` tombstones) and the group only once that is durable, and
answers NON_EMPTY_GROUP for one with members.
"""

from __future__ import annotations

from weir.broker.coordinators.group_service import GroupService
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.groups import group_service, set_group_operations
from weir.broker.handlers.share_admin import delete_group_states
from weir.format.errors import ErrorCode
from weir.format.schema import strict_value
from weir.groupcoord.record_schemas import GroupRecord
from weir.wire.messages.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteGroupsResponseResult,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeGroupsResponseGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    ListGroupsResponseGroup,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"
GROUP_TYPE_SHARE = "share"


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
    listed += [
        (group_id, GROUP_TYPE_SHARE, state, GROUP_TYPE_SHARE)
        for group_id, state in service.share_groups.list_groups()
    ]
    return [
        ListGroupsResponseGroup(group_id=g, protocol_type=p, group_state=s, group_type=t)
        for g, p, s, t in sorted(listed)
        if (wanted_states is None or s.lower() in wanted_states)
        and (wanted_types is None or t in wanted_types)
    ]


def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    service = group_service(ctx)
    service.ensure_ready(ctx.now_ms())
    # Versions without the filters decode them as empty lists: no filter, as absent.
    groups = group_listings(service, request.states_filter, request.types_filter)
    return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=groups)


def handle_describe_groups(
    ctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    service = group_service(ctx)
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
    set_group_operations(
        described,
        ctx.api_version >= 3 and request.include_authorized_operations,
        ctx.authorization,
    )
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


def handle_delete_groups(
    ctx: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse | Deferred[DeleteGroupsResponse]:
    service = group_service(ctx)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)
    results: dict[str, ErrorCode] = {}
    records = []
    classic_ids = []
    share_ids = []
    for group_id in request.groups_names:
        if service.consumer_groups.has_group(group_id):
            error, group_records = service.consumer_groups.delete_group(group_id)
            results[group_id] = error
            if error == ErrorCode.NONE:
                records += group_records + service.offsets.delete_group(group_id)
        elif service.share_groups.has_group(group_id):
            if service.share_groups.members_of(group_id):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            elif group_id not in share_ids:
                share_ids.append(group_id)
        else:
            classic_ids.append(group_id)
    reply = service.classic.delete_groups(classic_ids, now_ms)
    records += reply.records

    async def finish() -> DeleteGroupsResponse:
        share_records = await _delete_share_groups(ctx, service, share_ids, results)
        durable_error = await service.settle(records + share_records, reply.completed)
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


async def _delete_share_groups(
    ctx: RequestContext, service: GroupService, group_ids: list[str], results: dict[str, ErrorCode]
) -> list[GroupRecord]:
    """Kafka's order: each empty share group's state goes first; a group whose state
    could not be deleted stays (and answers the error). Returns the records deleting
    the others."""
    deletable = []
    for group_id in group_ids:
        error = await delete_group_states(ctx, group_id)
        if error == ErrorCode.NONE:
            deletable.append(group_id)
        else:
            results[group_id] = error
    errors, share_records = service.share_groups.delete_groups(deletable)
    results.update(errors)
    return service.share_records(share_records)


def handle_offset_delete(
    ctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse | Deferred[OffsetDeleteResponse]:
    service = group_service(ctx)
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
