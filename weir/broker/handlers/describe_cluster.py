"""DescribeCluster v0–v1: the cluster id, its brokers and its controller.

A single Weir node is the whole cluster and its own controller. KIP-919's
endpoint type (v1): brokers (1) are described; asking a broker listener for the
controllers (2) is MISMATCHED_ENDPOINT_TYPE, any other type
UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST in v0, which cannot name one).
KIP-430: asked for, the cluster's authorized operations (every cluster operation
without an authorizer, else the session's: weir/broker/handlers/acl_operations.py);
otherwise "not provided".
"""

from __future__ import annotations

import enum

from weir.broker.handlers.acl_operations import OPERATIONS_NOT_REQUESTED, cluster_operations
from weir.broker.handlers.context import RequestContext
from weir.format.errors import ErrorCode
from weir.wire.messages.cluster import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeClusterResponseBroker,
)


class EndpointType(enum.IntEnum):
    UNKNOWN = 0
    BROKER = 1
    CONTROLLER = 2


def handle_describe_cluster(
    ctx: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    version = ctx.api_version
    requested = request.endpoint_type  # v0 has none: it decodes as BROKER
    if requested not in (EndpointType.BROKER, EndpointType.CONTROLLER):
        error = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE if version >= 1 else ErrorCode.INVALID_REQUEST
        return _refusal(error, f"Unsupported endpoint type {requested}")
    if requested == EndpointType.CONTROLLER:
        error = ErrorCode.MISMATCHED_ENDPOINT_TYPE if version >= 1 else ErrorCode.INVALID_REQUEST
        return _refusal(
            error,
            "The request was sent to an endpoint of type BROKER, "
            "but we wanted an endpoint of type CONTROLLER",
        )
    broker = ctx.broker
    node_id = broker.config.node_id
    advertised = broker.config.advertised
    controller_id = node_id
    brokers = [
        DescribeClusterResponseBroker(
            broker_id=node_id, host=advertised.host, port=advertised.port, rack=None
        )
    ]
    if broker.cluster is not None:
        controller_id = broker.cluster.controller_id
        brokers = [
            DescribeClusterResponseBroker(
                broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack
            )
            for b in broker.cluster.live_brokers()
        ]
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=EndpointType.BROKER,
        cluster_id=broker.controller.cluster_id,
        controller_id=controller_id,
        brokers=brokers,
        cluster_authorized_operations=cluster_operations(
            request.include_cluster_authorized_operations, ctx.authorization
        ),
    )


def _refusal(error: ErrorCode, message: str) -> DescribeClusterResponse:
    """Kafka answers a refused endpoint type with the code and message alone."""
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        endpoint_type=EndpointType.BROKER,
        cluster_id="",
        controller_id=-1,
        brokers=[],
        cluster_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )
