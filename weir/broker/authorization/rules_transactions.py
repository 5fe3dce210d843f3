"""The transaction APIs' rules (KafkaApis' InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit, DescribeProducers,
DescribeTransactions, ListTransactions): a transactional producer needs WRITE on
its transactional id, an idempotent one IDEMPOTENT_WRITE on the cluster or WRITE
on some topic; the brokers' own requests need CLUSTER_ACTION."""

from __future__ import annotations

from typing import Any

from weir.broker.authorization.gate import Gate, allowed, refused
from weir.broker.authorization.rules_shared import (
    CLUSTER_AUTHORIZATION_FAILED,
    ERROR_MESSAGES,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    allowed_names,
    allows_quietly,
    appending,
    filtering,
    served_with,
    split,
)
from weir.broker.handlers.context import RequestContext
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.controller.controller import ControllerError, is_internal_topic, validate_topic_name
from weir.format.errors import ErrorCode
from weir.security.acl import CLUSTER, AclOperation, Resource, ResourceType
from weir.wire.messages.transactions import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnRequestTopic,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResponseResultsByPartition,
    AddPartitionsToTxnResponseTopicResult,
    DescribeProducersRequest,
    DescribeProducersResponsePartition,
    DescribeProducersResponseTopic,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeTransactionsResponseTransactionState,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponseTransactionState,
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
    WriteTxnMarkersResponseMarker,
    WriteTxnMarkersResponsePartition,
    WriteTxnMarkersResponseTopic,
)

READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE


def init_producer_id(
    authorization: RequestAuthorization, ctx: RequestContext, request: InitProducerIdRequest
) -> Gate[InitProducerIdRequest, Any]:
    """A transactional id needs WRITE on it; an idempotent producer IDEMPOTENT_WRITE
    on the cluster (its denial not audited) or WRITE on some topic (Kafka's
    authorizeByResourceType)."""
    transactional_id = request.transactional_id
    if transactional_id is not None:
        if authorization.allows_transactional_id(WRITE, transactional_id):
            return allowed(request)
        return refused(_init_refusal(TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if allows_quietly(authorization, AclOperation.IDEMPOTENT_WRITE, CLUSTER):
        return allowed(request)
    if authorization.allows_any_of_type(WRITE, ResourceType.TOPIC):
        return allowed(request)
    return refused(_init_refusal(CLUSTER_AUTHORIZATION_FAILED))


def _init_refusal(error: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)


# -- AddPartitionsToTxn ----------------------------------------------------------------

FIRST_BROKER_ADD_PARTITIONS_VERSION = 4


def add_partitions_to_txn(
    authorization: RequestAuthorization, ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> Gate[AddPartitionsToTxnRequest, Any]:
    """v4+ comes from brokers: CLUSTER_ACTION. v0-3 from a client: WRITE on the
    transactional id, then WRITE on each topic (an internal topic never may).
    Any refused or unknown partition fails the whole transaction: the refused
    TOPIC_AUTHORIZATION_FAILED, the unknown UNKNOWN_TOPIC_OR_PARTITION, the others
    OPERATION_NOT_ATTEMPTED."""
    if ctx.api_version >= FIRST_BROKER_ADD_PARTITIONS_VERSION:
        if authorization.allows_cluster(AclOperation.CLUSTER_ACTION):
            return allowed(request)
        return refused(AddPartitionsToTxnResponse(error_code=CLUSTER_AUTHORIZATION_FAILED))
    topics = request.v3_and_below_topics
    if not authorization.allows_transactional_id(WRITE, request.v3_and_below_transactional_id):
        errors: dict[tuple[str, int], int] = {
            (t.name, p): TRANSACTIONAL_ID_AUTHORIZATION_FAILED for t in topics for p in t.partitions
        }
        return refused(_add_partitions_answer(errors))
    permitted = allowed_names(
        authorization, WRITE, ResourceType.TOPIC,
        (t.name for t in topics if not is_internal_topic(t.name)),
    )  # fmt: skip
    if all(t.name in permitted for t in topics):
        return allowed(request)
    return refused(_add_partitions_answer(_add_partitions_errors(ctx, topics, permitted)))


def _add_partitions_errors(
    ctx: RequestContext, topics: list[AddPartitionsToTxnRequestTopic], permitted: set[str]
) -> dict[tuple[str, int], int]:
    controller = ctx.broker.controller
    errors: dict[tuple[str, int], int] = {}
    for topic in topics:
        record = controller.topic(topic.name)
        for index in topic.partitions:
            if topic.name not in permitted:
                errors[(topic.name, index)] = TOPIC_AUTHORIZATION_FAILED
            elif record is None or not 0 <= index < record.partition_count:
                errors[(topic.name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                errors[(topic.name, index)] = ErrorCode.OPERATION_NOT_ATTEMPTED
    return errors


def _add_partitions_answer(errors: dict[tuple[str, int], int]) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list[AddPartitionsToTxnResponseResultsByPartition]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnResponseResultsByPartition(
                partition_index=index, partition_error_code=error
            )
        )
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnResponseTopicResult(name=name, results_by_partition=results)
            for name, results in by_topic.items()
        ]
    )


# -- AddOffsetsToTxn, EndTxn, WriteTxnMarkers ------------------------------------------


def add_offsets_to_txn(
    authorization: RequestAuthorization, ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> Gate[AddOffsetsToTxnRequest, Any]:
    """WRITE on the transactional id, then READ on the group."""
    if not authorization.allows_transactional_id(WRITE, request.transactional_id):
        return refused(AddOffsetsToTxnResponse(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not authorization.allows_group(READ, request.group_id):
        return refused(AddOffsetsToTxnResponse(error_code=GROUP_AUTHORIZATION_FAILED))
    return allowed(request)


def end_txn(
    authorization: RequestAuthorization, ctx: RequestContext, request: EndTxnRequest
) -> Gate[EndTxnRequest, Any]:
    """WRITE on the transactional id."""
    if authorization.allows_transactional_id(WRITE, request.transactional_id):
        return allowed(request)
    return refused(
        EndTxnResponse(
            error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1
        )
    )


def write_txn_markers(
    authorization: RequestAuthorization, ctx: RequestContext, request: WriteTxnMarkersRequest
) -> Gate[WriteTxnMarkersRequest, Any]:
    """ALTER on the cluster (its denial not audited), else CLUSTER_ACTION; refused,
    every partition of every marker is CLUSTER_AUTHORIZATION_FAILED."""
    if allows_quietly(authorization, AclOperation.ALTER, CLUSTER):
        return allowed(request)
    if authorization.allows_cluster(AclOperation.CLUSTER_ACTION):
        return allowed(request)
    return refused(
        WriteTxnMarkersResponse(
            markers=[
                WriteTxnMarkersResponseMarker(
                    producer_id=marker.producer_id,
                    topics=[
                        WriteTxnMarkersResponseTopic(
                            name=topic.name,
                            partitions=[
                                WriteTxnMarkersResponsePartition(
                                    partition_index=index, error_code=CLUSTER_AUTHORIZATION_FAILED
                                )
                                for index in topic.partition_indexes
                            ],
                        )
                        for topic in marker.topics
                    ],
                )
                for marker in request.markers
            ]
        )
    )


# -- TxnOffsetCommit -------------------------------------------------------------------


def txn_offset_commit(
    authorization: RequestAuthorization, ctx: RequestContext, request: TxnOffsetCommitRequest
) -> Gate[TxnOffsetCommitRequest, Any]:
    """WRITE on the transactional id, then READ on the group (either refused:
    every partition carries the error), then READ on each topic."""
    if not authorization.allows_transactional_id(WRITE, request.transactional_id):
        return refused(_txn_commit_refusal(request.topics, TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not authorization.allows_group(READ, request.group_id):
        return refused(_txn_commit_refusal(request.topics, GROUP_AUTHORIZATION_FAILED))
    kept, denied = split(authorization, READ, request.topics, lambda topic: topic.name)
    if not denied:
        return allowed(request)
    request.topics = kept
    entries = _txn_commit_refusal(denied, TOPIC_AUTHORIZATION_FAILED).topics
    return served_with(request, appending("topics", entries))


def _txn_commit_refusal(
    topics: list[TxnOffsetCommitRequestTopic], error: int
) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=error
                    )
                    for p in topic.partitions
                ],
            )
            for topic in topics
        ]
    )


# -- DescribeProducers, DescribeTransactions, ListTransactions -------------------------


def describe_producers(
    authorization: RequestAuthorization, ctx: RequestContext, request: DescribeProducersRequest
) -> Gate[DescribeProducersRequest, Any]:
    """READ on each (validly named: the handler answers an invalid name) topic."""
    _, denied = split(
        authorization, READ, [t for t in request.topics if _valid_topic_name(t.name)],
        lambda topic: topic.name,
    )  # fmt: skip
    if not denied:
        return allowed(request)
    refused_ids = {id(topic) for topic in denied}
    request.topics = [topic for topic in request.topics if id(topic) not in refused_ids]
    entries = [
        DescribeProducersResponseTopic(
            name=topic.name,
            partitions=[
                DescribeProducersResponsePartition(
                    partition_index=index,
                    error_code=TOPIC_AUTHORIZATION_FAILED,
                    error_message=ERROR_MESSAGES[TOPIC_AUTHORIZATION_FAILED],
                )
                for index in topic.partition_indexes
            ],
        )
        for topic in denied
    ]
    return served_with(request, appending("topics", entries))


def _valid_topic_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except ControllerError:
        return False
    return True


def describe_transactions(
    authorization: RequestAuthorization, ctx: RequestContext, request: DescribeTransactionsRequest
) -> Gate[DescribeTransactionsRequest, Any]:
    """DESCRIBE on each transactional id; the described transactions list only
    the topics the session may describe. Answered in request order."""
    requested = list(request.transactional_ids)
    permitted = allowed_names(authorization, DESCRIBE, ResourceType.TRANSACTIONAL_ID, requested)
    request.transactional_ids = [t for t in requested if t in permitted]
    topic_cache: dict[str, bool] = {}

    def describable(topic: str) -> bool:
        if topic not in topic_cache:
            topic_cache[topic] = authorization.allows_topic(DESCRIBE, topic)
        return topic_cache[topic]

    def complete(response: DescribeTransactionsResponse) -> DescribeTransactionsResponse:
        served = iter(response.transaction_states)
        states = []
        for transactional_id in requested:
            if transactional_id in permitted:
                state = next(served)
            else:
                state = DescribeTransactionsResponseTransactionState(
                    error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    transactional_id=transactional_id,
                )
            state.topics = [t for t in state.topics if describable(t.topic)]
            states.append(state)
        response.transaction_states = states
        return response

    return Gate(request, complete=complete)


def list_transactions(
    authorization: RequestAuthorization, ctx: RequestContext, request: ListTransactionsRequest
) -> Gate[ListTransactionsRequest, Any]:
    """Only the transactions whose id the session may DESCRIBE are listed."""

    def describable(state: ListTransactionsResponseTransactionState) -> bool:
        resource = Resource(ResourceType.TRANSACTIONAL_ID, state.transactional_id)
        return authorization.allows(DESCRIBE, resource)

    return served_with(request, filtering("transaction_states", describable))
