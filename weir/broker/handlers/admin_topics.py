"""CreateTopics v2–v7, DeleteTopics v1–v6, CreatePartitions v0–v3.

Each topic in a request succeeds or fails on its own, with an error code and a
message. The controller validates and persists (`plan_topic`,
`plan_partition_increase`); this module adds Kafka's request-level rules
(duplicates, the shape of manual assignments, name collisions) and applies the
plans to the broker unless the request is `validate_only`.

`timeout_ms` is honored trivially: on a single node every change is complete
(persisted, logs opened or removed) before the response is sent, as a KRaft
controller does, so no request ever times out.

The handlers decide at once; each change that touches the disk is a Deferred
that awaits the broker's `topic_changes` (file work on the disk executor,
changes applied one at a time and checked again there), answered in order.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Hashable
from functools import partial
from typing import TypeVar

from weir.broker.broker import Broker
from weir.broker.handlers.admin_configs import topic_config_entries
from weir.broker.handlers.context import Deferred, ItemAnswer, RequestContext, answer_in_order
from weir.controller.controller import ControllerError, is_internal_topic, validate_topic_name
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.wire.messages.topics import (
    CreatePartitionsRequest,
    CreatePartitionsRequestTopic,
    CreatePartitionsResponse,
    CreatePartitionsResponseResult,
    CreateTopicsRequest,
    CreateTopicsRequestAssignment,
    CreateTopicsRequestTopic,
    CreateTopicsResponse,
    CreateTopicsResponseConfig,
    CreateTopicsResponseTopic,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicsResponseResponse,
)

ZERO_UUID = uuid.UUID(int=0)
# Kafka reserves it for the KRaft metadata log.
CLUSTER_METADATA_TOPIC_NAME = "__cluster_metadata"


class TopicRequestError(Exception):
    def __init__(self, error_code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _request_error(exc: ControllerError) -> TopicRequestError:
    return TopicRequestError(exc.error_code, exc.message)


# -- CreateTopics ----------------------------------------------------------------------


def handle_create_topics(
    ctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse | Deferred[CreateTopicsResponse]:
    broker = ctx.broker
    validate_only = request.validate_only  # False before v1
    topics = list(request.topics)
    counts = Counter(topic.name for topic in topics)
    results: list[ItemAnswer[CreateTopicsResponseTopic]] = []
    reported_duplicates: set[str] = set()
    for topic in topics:
        name = topic.name
        if counts[name] > 1:
            # One answer per duplicated name (the response is keyed by name).
            if name not in reported_duplicates:
                reported_duplicates.add(name)
                results.append(
                    _create_error(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                )
            continue
        try:
            record = _plan_topic(broker, topic)
        except TopicRequestError as exc:
            results.append(_create_error(name, exc.error_code, exc.message))
            continue
        if validate_only:
            results.append(_created(record, validate_only))
        else:
            results.append(partial(_create, broker, topic))
    return answer_in_order(
        results,
        CreateTopicsResponseTopic,
        lambda done: CreateTopicsResponse(throttle_time_ms=0, topics=done),
    )


def _plan_topic(broker: Broker, topic: CreateTopicsRequestTopic) -> TopicRecord:
    controller = broker.controller
    name = topic.name
    if name == CLUSTER_METADATA_TOPIC_NAME or is_internal_topic(name):
        # Also when it exists or the request only validates: the broker alone
        # creates internal topics, with its own settings.
        raise TopicRequestError(
            ErrorCode.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited."
        )
    try:
        validate_topic_name(name)
    except ControllerError as exc:
        raise _request_error(exc) from None
    if controller.topic(name) is not None:
        raise TopicRequestError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    num_partitions = topic.num_partitions
    replication_factor = topic.replication_factor
    assignments = _manual_assignments(broker, topic.assignments)
    if assignments and (num_partitions != -1 or replication_factor != -1):
        raise TopicRequestError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions or "
            "replicationFactor was not set to -1.",
        )
    if num_partitions == 0 or num_partitions < -1:
        raise TopicRequestError(
            ErrorCode.INVALID_PARTITIONS,
            f"Number of partitions was set to an invalid non-positive value: {num_partitions}.",
        )
    if replication_factor == 0 or replication_factor < -1:
        raise TopicRequestError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value, "
            f"not {replication_factor}.",
        )
    configs: dict[str, str] = {}
    null_configs = []
    for config in topic.configs:
        if config.value is None:
            null_configs.append(config.name)
        else:
            configs[config.name] = config.value
    if null_configs:
        raise TopicRequestError(
            ErrorCode.INVALID_CONFIG,
            f"Null value not supported for topic configs: {','.join(null_configs)}",
        )
    _check_collision(broker, name)
    try:
        record = controller.plan_topic(
            name, num_partitions, replication_factor, assignments=assignments, configs=configs
        )
        broker.check_descriptor_budget(record.partition_count)
    except ControllerError as exc:
        raise _request_error(exc) from None
    return record


def _manual_assignments(
    broker: Broker, assignments: list[CreateTopicsRequestAssignment]
) -> list[list[int]]:
    """The replica lists by partition index; checks Kafka's rules for their shape."""
    by_index: dict[int, list[int]] = {}
    for assignment in assignments or ():
        index = assignment.partition_index
        if index in by_index:
            raise TopicRequestError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {index}",
            )
        replicas = list(assignment.broker_ids)
        check_replica_list(broker, replicas)
        by_index[index] = replicas
    if sorted(by_index) != list(range(len(by_index))):
        raise TopicRequestError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Partitions should be a consecutive 0-based integer sequence, not {sorted(by_index)}",
        )
    return [by_index[index] for index in range(len(by_index))]


def check_replica_list(broker: Broker, replicas: list[int]) -> None:
    if not replicas:
        raise TopicRequestError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    seen: set[int] = set()
    for broker_id in replicas:
        if broker_id in seen:
            raise TopicRequestError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        seen.add(broker_id)
        if broker_id not in _registered_brokers(broker):
            raise TopicRequestError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.",
            )


def _registered_brokers(broker: Broker) -> set[int]:
    if broker.cluster is None:
        return {broker.config.node_id}
    return {b.node_id for b in broker.cluster.live_brokers()}


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


def _check_collision(broker: Broker, name: str) -> None:
    """'.' and '_' map to the same metric names, so Kafka refuses topics that differ
    only by them."""
    key = _collision_key(name)
    for existing in broker.controller.topics():
        if existing.name != name and _collision_key(existing.name) == key:
            raise TopicRequestError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {existing.name}",
            )


async def _create(broker: Broker, topic: CreateTopicsRequestTopic) -> CreateTopicsResponseTopic:
    """Planned again once the broker takes the change: another request may have
    created the name (TOPIC_ALREADY_EXISTS) or used the budget meanwhile."""
    try:
        record = await broker.topic_changes.create_topic(partial(_plan_topic, broker, topic))
    except TopicRequestError as exc:
        return _create_error(topic.name, exc.error_code, exc.message)
    except ControllerError as exc:
        return _create_error(topic.name, exc.error_code, exc.message)
    except OSError as exc:
        return _create_error(
            topic.name,
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"creating topic '{topic.name}' failed: {exc}",
        )
    return _created(record, False)


def _created(record: TopicRecord, validate_only: bool) -> CreateTopicsResponseTopic:
    configs = [
        CreateTopicsResponseConfig(
            name=entry.name,
            value=entry.value,
            read_only=entry.read_only,
            config_source=entry.config_source,
            is_sensitive=entry.is_sensitive,
        )
        for entry in topic_config_entries(record)
    ]
    return CreateTopicsResponseTopic(
        name=record.name,
        # A validated topic does not exist, so it has no id yet.
        topic_id=ZERO_UUID if validate_only else record.topic_id,
        error_code=ErrorCode.NONE,
        error_message=None,
        num_partitions=record.partition_count,
        replication_factor=record.replication_factor,
        configs=configs,
    )


def _create_error(name: str, error: ErrorCode, message: str | None) -> CreateTopicsResponseTopic:
    return CreateTopicsResponseTopic(
        name=name,
        topic_id=ZERO_UUID,
        error_code=error,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=[],
    )


# -- DeleteTopics ----------------------------------------------------------------------


def handle_delete_topics(
    ctx: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse | Deferred[DeleteTopicsResponse]:
    """By name (v1–v5 `topic_names`, v6 `topics[].name`) or by id (v6)."""
    broker = ctx.broker
    responses: list[ItemAnswer[DeleteTopicsResponseResponse]] = []
    names: list[str] = []
    ids: list[uuid.UUID] = []
    if ctx.api_version >= 6:
        for topic in request.topics:
            name = topic.name
            topic_id = topic.topic_id
            if name is None and topic_id == ZERO_UUID:
                responses.append(
                    _deleted(None, ZERO_UUID, ErrorCode.INVALID_REQUEST,
                             "Neither topic name nor id were specified.")
                )  # fmt: skip
            elif name is not None and topic_id != ZERO_UUID:
                responses.append(
                    _deleted(name, topic_id, ErrorCode.INVALID_REQUEST,
                             "You may not specify both topic name and topic id.")
                )  # fmt: skip
            elif name is not None:
                names.append(name)
            else:
                ids.append(topic_id)
    else:
        names.extend(request.topic_names)
    name_counts = Counter(names)
    id_counts = Counter(ids)
    for name in _unique(names):
        if name_counts[name] > 1:
            responses.append(
                _deleted(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            )
    for topic_id in _unique(ids):
        if id_counts[topic_id] > 1:
            responses.append(
                _deleted(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
            )
    targets: dict[uuid.UUID, TopicRecord] = {}
    for topic_id in _unique(ids):
        if id_counts[topic_id] > 1:
            continue
        record = broker.controller.topic_by_id(topic_id)
        if record is None:
            responses.append(
                _deleted(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID,
                         "This server does not host this topic ID.")
            )  # fmt: skip
        else:
            targets[topic_id] = record
    for name in _unique(names):
        if name_counts[name] > 1:
            continue
        record = broker.controller.topic(name)
        if record is None:
            responses.append(
                _deleted(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         "This server does not host this topic-partition.")
            )  # fmt: skip
        elif record.topic_id in targets:
            responses.append(
                _deleted(name, record.topic_id, ErrorCode.INVALID_REQUEST,
                         "The provided topic name maps to an ID that was already supplied.")
            )  # fmt: skip
            del targets[record.topic_id]
        else:
            targets[record.topic_id] = record
    for record in targets.values():
        if record.is_internal or is_internal_topic(record.name):
            responses.append(_deleted(
                record.name, record.topic_id, ErrorCode.INVALID_REQUEST,
                f"Topic {record.name} is an internal topic and cannot be deleted.",
            ))  # fmt: skip
        else:
            responses.append(partial(_delete, broker, record))
    return answer_in_order(
        responses,
        DeleteTopicsResponseResponse,
        lambda done: DeleteTopicsResponse(throttle_time_ms=0, responses=done),
    )


async def _delete(broker: Broker, record: TopicRecord) -> DeleteTopicsResponseResponse:
    """A deletion that ran first (another request) answers UNKNOWN_TOPIC_OR_PARTITION."""
    try:
        await broker.topic_changes.delete_topic(record.name)
    except ControllerError as exc:
        return _deleted(record.name, record.topic_id, exc.error_code, exc.message)
    except OSError as exc:
        return _deleted(
            record.name, record.topic_id, ErrorCode.KAFKA_STORAGE_ERROR,
            f"deleting topic '{record.name}' failed: {exc}",
        )  # fmt: skip
    return _deleted(record.name, record.topic_id, ErrorCode.NONE, None)


def _deleted(
    name: str | None, topic_id: uuid.UUID, error: ErrorCode, message: str | None
) -> DeleteTopicsResponseResponse:
    return DeleteTopicsResponseResponse(
        name=name, topic_id=topic_id, error_code=error, error_message=message
    )


ItemT = TypeVar("ItemT", bound=Hashable)


def _unique(items: list[ItemT]) -> list[ItemT]:
    return list(dict.fromkeys(items))


# -- CreatePartitions ------------------------------------------------------------------


def handle_create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse | Deferred[CreatePartitionsResponse]:
    broker = ctx.broker
    validate_only = request.validate_only
    topics = list(request.topics)
    counts = Counter(topic.name for topic in topics)
    results: list[ItemAnswer[CreatePartitionsResponseResult]] = []
    reported_duplicates: set[str] = set()
    for topic in topics:
        name = topic.name
        if counts[name] > 1:
            if name not in reported_duplicates:
                reported_duplicates.add(name)
                results.append(
                    _partitions_result(
                        name, ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
                    )
                )
            continue
        try:
            _check_increase(broker, topic)
        except TopicRequestError as exc:
            results.append(_partitions_result(name, exc.error_code, exc.message))
        else:
            if validate_only:
                results.append(_partitions_result(name, ErrorCode.NONE, None))
            else:
                results.append(partial(_increase_partitions, broker, topic))
    return answer_in_order(
        results,
        CreatePartitionsResponseResult,
        lambda done: CreatePartitionsResponse(throttle_time_ms=0, results=done),
    )


async def _increase_partitions(
    broker: Broker, topic: CreatePartitionsRequestTopic
) -> CreatePartitionsResponseResult:
    """Checked again once the broker takes the change (another request may have
    added partitions or deleted the topic meanwhile)."""
    try:
        await broker.topic_changes.increase_partitions(
            topic.name,
            topic.count,
            partial(_check_increase, broker, topic),
            [list(a.broker_ids) for a in topic.assignments or ()],
        )
    except TopicRequestError as exc:
        return _partitions_result(topic.name, exc.error_code, exc.message)
    except ControllerError as exc:
        return _partitions_result(topic.name, exc.error_code, exc.message)
    except OSError as exc:
        return _partitions_result(
            topic.name, ErrorCode.KAFKA_STORAGE_ERROR,
            f"adding partitions to '{topic.name}' failed: {exc}",
        )  # fmt: skip
    return _partitions_result(topic.name, ErrorCode.NONE, None)


def _check_increase(broker: Broker, topic: CreatePartitionsRequestTopic) -> None:
    name = topic.name
    count = topic.count
    if is_internal_topic(name):
        # Groups (and later transactions) are placed by its partition count.
        raise TopicRequestError(
            ErrorCode.INVALID_REQUEST,
            f"Topic {name} is an internal topic: only the broker sets its partition count.",
        )
    record = broker.controller.topic(name)
    if record is None:
        raise TopicRequestError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        )
    if count < record.partition_count:
        raise TopicRequestError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {record.partition_count} partitions, which is higher than "
            f"the requested {count}.",
        )
    if count == record.partition_count:
        raise TopicRequestError(
            ErrorCode.INVALID_PARTITIONS, f"Topic already has {record.partition_count} partitions."
        )
    assignments: list[list[int]] = []
    if topic.assignments is not None:
        assignments = [list(a.broker_ids) for a in topic.assignments]
        added = count - record.partition_count
        if len(assignments) != added:
            raise TopicRequestError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {added} additional partition(s), but only "
                f"{len(assignments)} assignment(s) were specified.",
            )
        for replicas in assignments:
            check_replica_list(broker, replicas)
            if len(replicas) != record.replication_factor:
                raise TopicRequestError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes a partition with "
                    f"{len(replicas)} replica(s), but this is not consistent with previous "
                    f"partitions, which have {record.replication_factor} replica(s).",
                )
    try:
        broker.controller.plan_partition_increase(name, count, assignments)
        broker.check_descriptor_budget(count - record.partition_count)
    except ControllerError as exc:
        raise _request_error(exc) from None


def _partitions_result(
    name: str, error: ErrorCode, message: str | None
) -> CreatePartitionsResponseResult:
    return CreatePartitionsResponseResult(name=name, error_code=error, error_message=message)
