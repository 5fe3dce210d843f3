"""FindCoordinator v0–v4: the broker that coordinates a group or a transactional id.

A single node coordinates every group and id once its internal topic is ready; in a
cluster, a group's coordinator is the leader of its `__consumer_offsets` partition,
a transactional id's the leader of its `__transaction_state` partition.
"""

from __future__ import annotations

import logging

from weir.broker.coordinators.offsets_topic import OFFSETS_TOPIC_NAME
from weir.broker.coordinators.transaction_service import transaction_service
from weir.broker.handlers.context import RequestContext
from weir.broker.handlers.groups import group_service
from weir.broker.roles import live_broker
from weir.controller.controller import TRANSACTION_STATE_TOPIC_NAME
from weir.format.errors import ErrorCode
from weir.log.errors import LogError
from weir.wire.apis.groups import COORDINATOR_KEY_TYPE_GROUP, COORDINATOR_KEY_TYPE_TRANSACTION
from weir.wire.messages.groups import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
)

log = logging.getLogger(__name__)


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
        return _find_transaction_coordinator(ctx, key)
    if key_type != COORDINATOR_KEY_TYPE_GROUP:
        error, message = ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
    elif not key:
        error, message = ErrorCode.INVALID_REQUEST, "the group id is empty"
    else:
        try:
            group_service(ctx).ensure_ready(ctx.now_ms())
        except (LogError, OSError) as exc:
            log.error("cannot prepare %s: %s", "the offsets topic", exc)
            error, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
        if error == ErrorCode.NONE and ctx.broker.cluster is not None:
            return _find_in_cluster(ctx, key)
        if error == ErrorCode.NONE and not group_service(ctx).available(key):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            message = group_service(ctx).unavailable_reason(key)
    advertised = ctx.broker.config.advertised_on(ctx.listener_name)
    found = error == ErrorCode.NONE
    return FindCoordinatorResponseCoordinator(
        key=key,
        node_id=ctx.broker.config.node_id if found else -1,
        host=advertised.host if found else "",
        port=advertised.port if found else -1,
        error_code=error,
        error_message=message,
    )


def _find_transaction_coordinator(
    ctx: RequestContext, transactional_id: str
) -> FindCoordinatorResponseCoordinator:
    if not transactional_id:
        return _not_found(
            transactional_id, ErrorCode.INVALID_REQUEST, "the transactional id is empty"
        )
    service = transaction_service(ctx.broker)
    service.ensure_ready()
    if not service.loaded:
        return _not_found(
            transactional_id,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            service.unavailable_reason(transactional_id),
        )
    node = service.coordinator_node(transactional_id)
    if node is None:
        return _not_found(
            transactional_id,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"{TRANSACTION_STATE_TOPIC_NAME} has no leader for this id yet; retry",
        )
    node_id, host, port = node
    if node_id == ctx.broker.config.node_id and not service.available(transactional_id):
        return _not_found(
            transactional_id,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            service.unavailable_reason(transactional_id),
        )
    return FindCoordinatorResponseCoordinator(
        key=transactional_id, node_id=node_id, host=host, port=port,
        error_code=ErrorCode.NONE, error_message=None,
    )  # fmt: skip


def _not_found(key: str, error: ErrorCode, message: str) -> FindCoordinatorResponseCoordinator:
    return FindCoordinatorResponseCoordinator(
        key=key, node_id=-1, host="", port=-1, error_code=error, error_message=message
    )


def _find_in_cluster(ctx: RequestContext, key: str) -> FindCoordinatorResponseCoordinator:
    """A group's coordinator is the leader of its offsets partition, whichever
    broker is asked (the client then talks to that one)."""
    cluster = ctx.broker.cluster
    assert cluster is not None
    topic = ctx.broker.controller.topic(OFFSETS_TOPIC_NAME)
    leader = None
    if topic is not None:
        state = cluster.partition_state(topic, group_service(ctx).partition_for(key))
        leader = live_broker(cluster, state.leader)
    if leader is None:
        return FindCoordinatorResponseCoordinator(
            key=key, node_id=-1, host="", port=-1,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            error_message=f"{OFFSETS_TOPIC_NAME} has no leader for this group yet; retry",
        )  # fmt: skip
    return FindCoordinatorResponseCoordinator(
        key=key, node_id=leader.node_id, host=leader.endpoint(ctx.listener_name)[0],
        port=leader.endpoint(ctx.listener_name)[1],
        error_code=ErrorCode.NONE, error_message=None,
    )  # fmt: skip
