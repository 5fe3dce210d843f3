"""KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

A heartbeat's records are appended on the connection's reader and answered
once durable (weir.broker.coordinators.group_service).
"""

from __future__ import annotations

import logging

from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.groups import group_service, set_group_operations
from weir.format.errors import ErrorCode
from weir.format.schema import strict_value
from weir.log.errors import LogError
from weir.wire.messages.consumer_groups import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeResponseGroup,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

log = logging.getLogger(__name__)


def handle_consumer_group_heartbeat(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse | Deferred[ConsumerGroupHeartbeatResponse]:
    service = group_service(ctx)
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
    service = group_service(ctx)
    service.ensure_ready(ctx.now_ms())
    described = [
        strict_value(ConsumerGroupDescribeResponseGroup, group)
        for group in service.consumer_groups.describe(request.group_ids, service.topic_name)
    ]
    set_group_operations(described, request.include_authorized_operations, ctx.authorization)
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=described)
