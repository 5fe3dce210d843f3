"""The internal share-state APIs' rule (Kafka 4.4's KafkaApis): ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState and ReadShareGroupStateSummary are
spoken between brokers only, so each needs CLUSTER_ACTION on the cluster; refused,
every partition of the request is answered CLUSTER_AUTHORIZATION_FAILED (Kafka's
`getErrorResponse` of each request).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weir.broker.authorization.gate import Gate, allowed, refused
from weir.broker.authorization.rules_shared import CLUSTER_AUTHORIZATION_FAILED, ERROR_MESSAGES
from weir.broker.handlers.context import RequestContext
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.security.acl import AclOperation
from weir.wire.messages.share_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    DeleteShareGroupStateResponsePartition,
    DeleteShareGroupStateResponseResult,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateResponsePartition,
    ReadShareGroupStateResponseResult,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    ReadShareGroupStateSummaryResponsePartition,
    ReadShareGroupStateSummaryResponseResult,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
    WriteShareGroupStateResponsePartition,
    WriteShareGroupStateResponseResult,
)

ShareStateRequest = (
    ReadShareGroupStateRequest
    | WriteShareGroupStateRequest
    | DeleteShareGroupStateRequest
    | ReadShareGroupStateSummaryRequest
)


def _cluster_action(
    authorization: RequestAuthorization,
    request: ShareStateRequest,
    response: Callable[[list[Any]], Any],
    result: Callable[..., Any],
    partition: Callable[..., Any],
) -> Gate[Any, Any]:
    if authorization.allows_cluster(AclOperation.CLUSTER_ACTION):
        return allowed(request)
    message = ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED]
    return refused(
        response(
            [
                result(
                    topic_id=topic.topic_id,
                    partitions=[
                        partition(
                            partition=p.partition,
                            error_code=CLUSTER_AUTHORIZATION_FAILED,
                            error_message=message,
                        )
                        for p in topic.partitions
                    ],
                )
                for topic in request.topics
            ]
        )
    )


def read_share_group_state(
    authorization: RequestAuthorization, ctx: RequestContext, request: ReadShareGroupStateRequest
) -> Gate[ReadShareGroupStateRequest, Any]:
    return _cluster_action(
        authorization,
        request,
        ReadShareGroupStateResponse,
        ReadShareGroupStateResponseResult,
        ReadShareGroupStateResponsePartition,
    )


def write_share_group_state(
    authorization: RequestAuthorization, ctx: RequestContext, request: WriteShareGroupStateRequest
) -> Gate[WriteShareGroupStateRequest, Any]:
    return _cluster_action(
        authorization,
        request,
        WriteShareGroupStateResponse,
        WriteShareGroupStateResponseResult,
        WriteShareGroupStateResponsePartition,
    )


def delete_share_group_state(
    authorization: RequestAuthorization, ctx: RequestContext, request: DeleteShareGroupStateRequest
) -> Gate[DeleteShareGroupStateRequest, Any]:
    return _cluster_action(
        authorization,
        request,
        DeleteShareGroupStateResponse,
        DeleteShareGroupStateResponseResult,
        DeleteShareGroupStateResponsePartition,
    )


def read_share_group_state_summary(
    authorization: RequestAuthorization,
    ctx: RequestContext,
    request: ReadShareGroupStateSummaryRequest,
) -> Gate[ReadShareGroupStateSummaryRequest, Any]:
    return _cluster_action(
        authorization,
        request,
        ReadShareGroupStateSummaryResponse,
        ReadShareGroupStateSummaryResponseResult,
        ReadShareGroupStateSummaryResponsePartition,
    )
