"""Classic group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Each request changes the classic coordinator's state machine on the
connection's reader; the answer waits for its records to be durable, then for
the request's own handle (a join waits for the rebalance).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from weir.broker.coordinators.group_service import GroupService
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.groups import group_service
from weir.format.errors import ErrorCode
from weir.format.schema import strict_value
from weir.groupcoord.classic_messages import (
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    LeavingMember,
    SyncGroupRequest,
    SyncGroupResult,
)
from weir.groupcoord.pending import Reply
from weir.wire.messages.groups import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupResponse,
)
from weir.wire.messages.groups import JoinGroupRequest as JoinGroupWireRequest
from weir.wire.messages.groups import SyncGroupRequest as SyncGroupWireRequest

log = logging.getLogger(__name__)


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
    service = group_service(ctx)
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
    service = group_service(ctx)
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
    service = group_service(ctx)
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
    service = group_service(ctx)
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
