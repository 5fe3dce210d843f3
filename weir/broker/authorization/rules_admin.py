"""The administrative APIs' rules (KafkaApis and, for what KRaft forwards,
ControllerApis and ConfigHelper): topics need CREATE, DELETE or ALTER on
themselves (or the cluster's CREATE / DELETE), configurations DESCRIBE_CONFIGS /
ALTER_CONFIGS on their resource (a broker's: the cluster's), partition
leadership and reassignment the cluster's ALTER (listing: DESCRIBE)."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from weir.broker.authorization.gate import Gate, allowed, refused
from weir.broker.authorization.rules_shared import (
    CLUSTER_AUTHORIZATION_FAILED,
    ERROR_MESSAGES,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    allowed_names,
    allows_quietly,
    appending,
    served_with,
)
from weir.broker.handlers.context import RequestContext
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.security.acl import CLUSTER, AclOperation, ResourceType
from weir.wire.messages.configs import (
    AlterConfigsRequest,
    AlterConfigsResponseResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponseResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponseResponse,
)
from weir.wire.messages.partitions import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionReassignmentsResponsePartition,
    AlterPartitionReassignmentsResponseResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersResponsePartitionResult,
    ElectLeadersResponseReplicaElectionResult,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from weir.wire.messages.topics import (
    CreatePartitionsRequest,
    CreatePartitionsResponseResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    CreateTopicsResponseTopic,
    DeleteTopicsRequest,
    DeleteTopicsResponseResponse,
)

Op = AclOperation
TOPIC = ResourceType.TOPIC
ZERO_UUID = uuid.UUID(int=0)
# KRaft's metadata log: never created through CreateTopics (the handler says so).
CLUSTER_METADATA_TOPIC = "__cluster_metadata"

# -- CreateTopics, DeleteTopics, CreatePartitions --------------------------------------


def create_topics(
    authorization: RequestAuthorization, ctx: RequestContext, request: CreateTopicsRequest
) -> Gate[CreateTopicsRequest, Any]:
    """CREATE on the cluster (its denial not audited) or on each topic; a created
    topic's configs are returned only with DESCRIBE_CONFIGS on it (else
    topic_config_error_code TOPIC_AUTHORIZATION_FAILED). Duplicated names are the
    handler's (INVALID_REQUEST whatever the ACLs)."""
    counts = Counter(topic.name for topic in request.topics)
    names = [n for n in counts if counts[n] == 1 and n != CLUSTER_METADATA_TOPIC]
    if allows_quietly(authorization, Op.CREATE, CLUSTER):
        permitted = set(names)
    else:
        permitted = allowed_names(authorization, Op.CREATE, TOPIC, names)
    denied = [n for n in names if n not in permitted]
    describable = allowed_names(
        authorization, Op.DESCRIBE_CONFIGS, TOPIC, names, audit_denial=False
    )
    request.topics = [t for t in request.topics if t.name not in denied]
    entries = [
        CreateTopicsResponseTopic(
            name=name, error_code=TOPIC_AUTHORIZATION_FAILED, error_message="Authorization failed."
        )
        for name in denied
    ]

    def complete(response: CreateTopicsResponse) -> CreateTopicsResponse:
        for topic in response.topics:
            if topic.error_code == 0 and topic.name not in describable:
                topic.topic_config_error_code = TOPIC_AUTHORIZATION_FAILED
                topic.configs = []
        response.topics.extend(entries)
        return response

    return Gate(request, complete=complete)


def delete_topics(
    authorization: RequestAuthorization, ctx: RequestContext, request: DeleteTopicsRequest
) -> Gate[DeleteTopicsRequest, Any]:
    """DELETE on the cluster (its denial not audited) or on each topic. A name the
    session may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED before its existence is
    looked at (then an unknown one is the handler's UNKNOWN_TOPIC_OR_PARTITION); by
    id, the refusal names the topic only to a session that may describe it.
    Duplicates and malformed entries are the handler's."""
    if allows_quietly(authorization, Op.DELETE, CLUSTER):
        return allowed(request)
    by_name = ctx.api_version < 6
    entries = (
        [(name, ZERO_UUID) for name in request.topic_names]
        if by_name
        else [(t.name, t.topic_id) for t in request.topics]
    )
    counts = Counter(entries)
    refusals: dict[tuple[str | None, uuid.UUID], DeleteTopicsResponseResponse] = {}
    for name, topic_id in counts:
        if counts[(name, topic_id)] > 1:
            continue
        refusal = _delete_refusal(authorization, ctx, name, topic_id)
        if refusal is not None:
            refusals[(name, topic_id)] = refusal
    if not refusals:
        return allowed(request)
    if by_name:
        request.topic_names = [n for n in request.topic_names if (n, ZERO_UUID) not in refusals]
    else:
        request.topics = [t for t in request.topics if (t.name, t.topic_id) not in refusals]
    return served_with(request, appending("responses", list(refusals.values())))


def _delete_refusal(
    authorization: RequestAuthorization, ctx: RequestContext, name: str | None, topic_id: uuid.UUID
) -> DeleteTopicsResponseResponse | None:
    controller = ctx.broker.controller
    if name is not None and topic_id == ZERO_UUID:
        if not authorization.allows_topic(Op.DESCRIBE, name):
            return _deleted(name, ZERO_UUID)
        if controller.topic(name) is None:
            return None  # the handler's UNKNOWN_TOPIC_OR_PARTITION
        return None if authorization.allows_topic(Op.DELETE, name) else _deleted(name, ZERO_UUID)
    if name is None and topic_id != ZERO_UUID:
        record = controller.topic_by_id(topic_id)
        if record is None or authorization.allows_topic(Op.DELETE, record.name):
            return None
        describable = authorization.allows_topic(Op.DESCRIBE, record.name)
        return _deleted(record.name if describable else None, topic_id)
    return None  # neither or both given: the handler's INVALID_REQUEST


def _deleted(name: str | None, topic_id: uuid.UUID) -> DeleteTopicsResponseResponse:
    return DeleteTopicsResponseResponse(
        name=name, topic_id=topic_id, error_code=TOPIC_AUTHORIZATION_FAILED
    )


def create_partitions(
    authorization: RequestAuthorization, ctx: RequestContext, request: CreatePartitionsRequest
) -> Gate[CreatePartitionsRequest, Any]:
    """ALTER on each topic (duplicated names are the handler's)."""
    counts = Counter(topic.name for topic in request.topics)
    names = [n for n in counts if counts[n] == 1]
    permitted = allowed_names(authorization, Op.ALTER, TOPIC, names)
    denied = [n for n in names if n not in permitted]
    if not denied:
        return allowed(request)
    request.topics = [t for t in request.topics if t.name not in denied]
    entries = [
        CreatePartitionsResponseResult(name=name, error_code=TOPIC_AUTHORIZATION_FAILED)
        for name in denied
    ]
    return served_with(request, appending("results", entries))


# -- DescribeConfigs, AlterConfigs, IncrementalAlterConfigs ----------------------------

CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER = 2, 4, 8
CONFIG_CLIENT_METRICS, CONFIG_GROUP = 16, 32


def _config_refusal(
    authorization: RequestAuthorization, operation: AclOperation, resource_type: int, name: str
) -> int | None:
    """The error refusing `operation` on a config resource; None when allowed (or
    of a type the handler refuses itself)."""
    if resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_CLIENT_METRICS):
        return None if authorization.allows_cluster(operation) else CLUSTER_AUTHORIZATION_FAILED
    if resource_type == CONFIG_TOPIC:
        return None if authorization.allows_topic(operation, name) else TOPIC_AUTHORIZATION_FAILED
    if resource_type == CONFIG_GROUP:
        return None if authorization.allows_group(operation, name) else GROUP_AUTHORIZATION_FAILED
    return None


def describe_configs(
    authorization: RequestAuthorization, ctx: RequestContext, request: DescribeConfigsRequest
) -> Gate[DescribeConfigsRequest, Any]:
    """DESCRIBE_CONFIGS on each resource (a broker's, a broker logger's and client
    metrics': the cluster's)."""
    entries, kept = [], []
    for resource in request.resources:
        error = _config_refusal(
            authorization, Op.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
        )
        if error is None:
            kept.append(resource)
        else:
            entries.append(
                DescribeConfigsResponseResult(
                    error_code=error,
                    error_message=ERROR_MESSAGES[error],
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
    if not entries:
        return allowed(request)
    request.resources = kept
    return served_with(request, appending("results", entries))


def alter_configs(
    authorization: RequestAuthorization, ctx: RequestContext, request: AlterConfigsRequest
) -> Gate[AlterConfigsRequest, Any]:
    """ALTER_CONFIGS on each resource (a broker's: the cluster's)."""
    return _alter_configs(authorization, request, AlterConfigsResponseResponse)


def incremental_alter_configs(
    authorization: RequestAuthorization,
    ctx: RequestContext,
    request: IncrementalAlterConfigsRequest,
) -> Gate[IncrementalAlterConfigsRequest, Any]:
    """ALTER_CONFIGS on each resource (a broker's or broker logger's: the cluster's)."""
    return _alter_configs(authorization, request, IncrementalAlterConfigsResponseResponse)


def _alter_configs(
    authorization: RequestAuthorization,
    request: AlterConfigsRequest | IncrementalAlterConfigsRequest,
    entry_type: type[AlterConfigsResponseResponse] | type[IncrementalAlterConfigsResponseResponse],
) -> Gate[Any, Any]:
    entries, kept = [], []
    for resource in request.resources:
        error = _config_refusal(
            authorization, Op.ALTER_CONFIGS, resource.resource_type, resource.resource_name
        )
        if error is None:
            kept.append(resource)
        else:
            entries.append(
                entry_type(
                    error_code=error,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
    if not entries:
        return allowed(request)
    request.resources = kept  # type: ignore[assignment]
    return served_with(request, appending("responses", entries))


# -- DescribeCluster, ElectLeaders, partition reassignments ----------------------------


def describe_cluster(
    authorization: RequestAuthorization, ctx: RequestContext, request: Any
) -> Gate[Any, Any]:
    """Anyone may ask; the authorized operations are the handler's (KIP-430)."""
    return allowed(request)


def elect_leaders(
    authorization: RequestAuthorization, ctx: RequestContext, request: ElectLeadersRequest
) -> Gate[ElectLeadersRequest, Any]:
    """ALTER on the cluster; refused, the top-level error and each named partition's."""
    if authorization.allows_cluster(Op.ALTER):
        return allowed(request)
    return refused(
        ElectLeadersResponse(
            error_code=CLUSTER_AUTHORIZATION_FAILED,
            replica_election_results=[
                ElectLeadersResponseReplicaElectionResult(
                    topic=topic.topic,
                    partition_result=[
                        ElectLeadersResponsePartitionResult(
                            partition_id=index, error_code=CLUSTER_AUTHORIZATION_FAILED
                        )
                        for index in topic.partitions
                    ],
                )
                for topic in request.topic_partitions or []
            ],
        )
    )


def alter_partition_reassignments(
    authorization: RequestAuthorization,
    ctx: RequestContext,
    request: AlterPartitionReassignmentsRequest,
) -> Gate[AlterPartitionReassignmentsRequest, Any]:
    """ALTER on the cluster; refused, the top-level error and each partition's."""
    if authorization.allows_cluster(Op.ALTER):
        return allowed(request)
    message = ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED]
    return refused(
        AlterPartitionReassignmentsResponse(
            error_code=CLUSTER_AUTHORIZATION_FAILED,
            error_message=message,
            responses=[
                AlterPartitionReassignmentsResponseResponse(
                    name=topic.name,
                    partitions=[
                        AlterPartitionReassignmentsResponsePartition(
                            partition_index=p.partition_index,
                            error_code=CLUSTER_AUTHORIZATION_FAILED,
                            error_message=message,
                        )
                        for p in topic.partitions
                    ],
                )
                for topic in request.topics
            ],
        )
    )


def list_partition_reassignments(
    authorization: RequestAuthorization,
    ctx: RequestContext,
    request: ListPartitionReassignmentsRequest,
) -> Gate[ListPartitionReassignmentsRequest, Any]:
    """DESCRIBE on the cluster."""
    if authorization.allows_cluster(Op.DESCRIBE):
        return allowed(request)
    return refused(
        ListPartitionReassignmentsResponse(
            error_code=CLUSTER_AUTHORIZATION_FAILED,
            error_message=ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED],
        )
    )


def unrestricted(
    authorization: RequestAuthorization, ctx: RequestContext, request: Any
) -> Gate[Any, Any]:
    """ApiVersions and the SASL exchange: Kafka authorizes neither (they come
    before, or are, authentication)."""
    return allowed(request)
