"""Metadata v0–v12: brokers, topics, partitions and leaders; topic auto-creation.

Internal topics are never auto-created: a missing one is UNKNOWN_TOPIC_OR_PARTITION
(the broker creates `__consumer_offsets` itself on the first FindCoordinator), and
an existing one is reported internal by its name, as Kafka does."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial

from weir.broker.broker import Broker
from weir.broker.handlers.acl_operations import (
    OPERATIONS_NOT_REQUESTED,
    cluster_operations,
    topic_operations,
)
from weir.broker.handlers.context import Deferred, ItemAnswer, RequestContext, answer_in_order
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.broker.roles import ClusterRole
from weir.controller.controller import ControllerError, is_internal_topic, validate_topic_name
from weir.controller.metadata import TopicRecord
from weir.controller.partition_state import NO_LEADER
from weir.format.errors import ErrorCode
from weir.security.acl import CLUSTER, AclOperation
from weir.wire.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

ZERO_UUID = uuid.UUID(int=0)


def handle_metadata(
    ctx: RequestContext, request: MetadataRequest
) -> MetadataResponse | Deferred[MetadataResponse]:
    broker = ctx.broker
    version = ctx.api_version
    allow_auto_create = request.allow_auto_topic_creation if version >= 4 else True
    requested = request.topics
    topics: list[ItemAnswer[MetadataResponseTopic]]
    # KIP-430: v8+ (the cluster's only up to v10: v11 dropped the field). With an
    # authorizer, each answered topic's from the ACLs (`_response`).
    authorization = ctx.authorization
    topic_ops_requested = version >= 8 and request.include_topic_authorized_operations
    topic_ops = topic_operations(topic_ops_requested and authorization is None)
    cluster_ops = cluster_operations(
        8 <= version <= 10 and request.include_cluster_authorized_operations, authorization
    )
    if requested is None or (version == 0 and len(requested) == 0):
        topics = [
            _describe_topic(broker, record, topic_ops) for record in broker.controller.topics()
        ]
    else:
        topics = [
            _lookup_topic(broker, t, allow_auto_create, topic_ops, authorization) for t in requested
        ]
    topic_ops_of = None
    if topic_ops_requested and authorization is not None:
        topic_ops_of = partial(topic_operations, True, authorization=authorization)
    return answer_in_order(
        topics, MetadataResponseTopic, partial(_response, broker, cluster_ops, topic_ops_of)
    )


def _response(
    broker: Broker,
    cluster_ops: int,
    topic_ops_of: Callable[[str | None], int] | None,
    topics: list[MetadataResponseTopic],
) -> MetadataResponse:
    if topic_ops_of is not None:
        for topic in topics:
            topic.topic_authorized_operations = topic_ops_of(topic.name)
    advertised = broker.config.advertised
    brokers = [
        MetadataResponseBroker(
            node_id=broker.config.node_id, host=advertised.host, port=advertised.port, rack=None
        )
    ]
    controller_id = broker.config.node_id
    if broker.cluster is not None:
        brokers = [
            MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in broker.cluster.live_brokers()
        ]
        controller_id = broker.cluster.controller_id
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.controller.cluster_id,
        controller_id=controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_ops,
    )


def _lookup_topic(
    broker: Broker,
    requested: MetadataRequestTopic,
    allow_auto_create: bool,
    topic_ops: int,
    authorization: RequestAuthorization | None = None,
) -> ItemAnswer[MetadataResponseTopic]:
    name = requested.name
    topic_id = requested.topic_id  # the zero UUID before v10
    # A topic id, when set, is what is asked for, whatever the name: the Java client
    # asks by id with the name left at its default "" (Kafka looks up by id whenever
    # one is set).
    if name is None or topic_id != ZERO_UUID:
        record = broker.controller.topic_by_id(topic_id) if topic_id != ZERO_UUID else None
        if record is None:
            return _topic_error(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
        return _describe_topic(broker, record, topic_ops)
    record = broker.controller.topic(name)
    if record is not None:
        return _describe_topic(broker, record, topic_ops)
    auto_create = allow_auto_create and broker.config.auto_create_topics
    if auto_create and authorization is not None and not _may_create(authorization, name):
        refused = _topic_error(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        refused.is_internal = is_internal_topic(name)
        return refused
    try:
        validate_topic_name(name)
    except ControllerError as exc:
        return _topic_error(name, ZERO_UUID, exc.error_code)
    if auto_create and not is_internal_topic(name):
        return partial(_auto_create, broker, name, topic_ops)
    return _topic_error(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def _may_create(authorization: RequestAuthorization, name: str) -> bool:
    """Kafka's rule for auto-creation: CREATE on the cluster (its denial is not
    audited: the topic's is what decides), else CREATE on the topic."""
    return authorization.allows(
        AclOperation.CREATE, CLUSTER, audit_denial=False
    ) or authorization.allows_topic(AclOperation.CREATE, name)


async def _auto_create(broker: Broker, name: str, topic_ops: int) -> MetadataResponseTopic:
    """Created on the disk executor (another request may have created it meanwhile)."""
    try:
        created = await broker.topic_changes.auto_create_topic(name)
    except ControllerError as exc:
        return _topic_error(name, ZERO_UUID, exc.error_code)
    except OSError:
        return _topic_error(name, ZERO_UUID, ErrorCode.KAFKA_STORAGE_ERROR)
    return _describe_topic(broker, created, topic_ops)


def _topic_error(name: str | None, topic_id: uuid.UUID, error: ErrorCode) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=error,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=[],
        topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


def _describe_topic(broker: Broker, record: TopicRecord, topic_ops: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=record.name,
        topic_id=record.topic_id,
        is_internal=record.is_internal or is_internal_topic(record.name),
        partitions=[
            _describe_partition(broker, record, index) for index in range(record.partition_count)
        ],
        topic_authorized_operations=topic_ops,
    )


def _describe_partition(
    broker: Broker, record: TopicRecord, index: int
) -> MetadataResponsePartition:
    """A partition whose log is damaged (offline) has no leader, as on Kafka
    when a partition's only replica is in a failed log directory."""
    node_id = broker.config.node_id
    if broker.cluster is not None:
        return _describe_cluster_partition(broker.cluster, record, index)
    offline = (record.name, index) in broker.offline_partitions
    return MetadataResponsePartition(
        error_code=ErrorCode.LEADER_NOT_AVAILABLE if offline else ErrorCode.NONE,
        partition_index=index,
        leader_id=-1 if offline else node_id,
        leader_epoch=record.leader_epochs[index],
        replica_nodes=[node_id],
        isr_nodes=[] if offline else [node_id],
        offline_replicas=[node_id] if offline else [],
    )


def _describe_cluster_partition(
    cluster: ClusterRole, record: TopicRecord, index: int
) -> MetadataResponsePartition:
    """Leader, epoch and ISR from the partition's state in etcd; replicas on brokers
    that are not registered, or that reported the replica's log failed, are offline."""
    state = cluster.partition_state(record, index)
    replicas = record.replicas(index, NO_LEADER)
    alive = {b.node_id for b in cluster.live_brokers()}
    failed = cluster.offline_holders(record.topic_id, index)
    has_leader = state.leader != NO_LEADER and state.leader in alive
    return MetadataResponsePartition(
        error_code=ErrorCode.NONE if has_leader else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=index,
        leader_id=state.leader if has_leader else NO_LEADER,
        leader_epoch=state.leader_epoch,
        replica_nodes=replicas,
        isr_nodes=list(state.isr),
        offline_replicas=[r for r in replicas if r not in alive or r in failed],
    )
