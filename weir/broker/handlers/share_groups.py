"""Share groups' membership (KIP-932): ShareGroupHeartbeat v1 and ShareGroupDescribe v1.

On the group's coordinator (FindCoordinator's GROUP key, the same
`__consumer_offsets` placement as every group); a heartbeat's records are appended on
the connection's reader and answered once durable, as KIP-848 heartbeats are
(`consumer_groups`).
"""

from __future__ import annotations

import logging

from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.groups import group_service, set_group_operations
from weir.format.errors import ErrorCode
from weir.format.schema import strict_value
from weir.log.errors import LogError
from weir.sharecoord.share_coordinator import ShareHeartbeat
from weir.wire.messages.share_groups import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupDescribeResponseGroup,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

log = logging.getLogger(__name__)


def handle_share_group_heartbeat(
    ctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse | Deferred[ShareGroupHeartbeatResponse]:
    service = group_service(ctx)
    now_ms = ctx.now_ms()
    service.ensure_ready(now_ms)
    if not service.available(request.group_id):
        return _heartbeat_failure(
            service.unavailable_error(request.group_id),
            service.unavailable_reason(request.group_id),
        )
    service.sync_topic_names()
    subscribed = request.subscribed_topic_names
    answer, share_records = service.share_groups.heartbeat(
        ShareHeartbeat(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            rack_id=request.rack_id,
            subscribed_topic_names=None if subscribed is None else tuple(subscribed),
            client_id=ctx.header.client_id or "",
            client_host=ctx.client_host,
        ),
        now_ms,
    )
    response = strict_value(ShareGroupHeartbeatResponse, answer.response())
    service.poke()  # member deadlines moved
    if not share_records:
        return response
    try:
        pending = service.append(service.share_records(share_records), request.group_id)
    except LogError as exc:
        log.error("share group %s: records not appended: %s", request.group_id, exc)
        return _heartbeat_failure(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "the group coordinator could not store the group's state",
        )

    async def finish() -> ShareGroupHeartbeatResponse:
        error = await pending.durable()
        if error == ErrorCode.NONE:
            return response
        return _heartbeat_failure(error, "the group coordinator could not store the group's state")

    return Deferred(finish)


def _heartbeat_failure(error: ErrorCode, message: str) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        member_id=None,
        member_epoch=-1,
        heartbeat_interval_ms=0,
        assignment=None,
    )


def handle_share_group_describe(
    ctx: RequestContext, request: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    service = group_service(ctx)
    service.ensure_ready(ctx.now_ms())
    described = []
    for group_id in request.group_ids:
        if not service.available(group_id):
            described.append(
                ShareGroupDescribeResponseGroup(
                    error_code=service.unavailable_error(group_id),
                    error_message=service.unavailable_reason(group_id),
                    group_id=group_id,
                )
            )
            continue
        (entry,) = service.share_groups.describe([group_id])
        described.append(strict_value(ShareGroupDescribeResponseGroup, entry))
    set_group_operations(described, request.include_authorized_operations, ctx.authorization)
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=described)
