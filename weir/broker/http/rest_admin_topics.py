"""Topics, partitions and replicas in Confluent REST Proxy v3's shapes (`KafkaTopic`,
`KafkaPartition`, `KafkaReplica`), through the Kafka API as the HTTP caller:
Metadata to list and describe, CreateTopics and DeleteTopics to change, ListOffsets
(on each partition's leader) for the offsets a partition shows besides Confluent's
fields: `log_start_offset`, `high_watermark` (what read_uncommitted consumers may
read) and `last_stable_offset` (what read_committed consumers may read)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from starlette.responses import Response

from weir.broker.http.rest_admin_base import (
    INT16_MAX,
    INT32_MAX,
    AdminCall,
    Endpoint,
    bad_request,
    bounded_int,
    check_kafka,
    collection,
    int_text,
    json_response,
    no_content,
    not_found,
    related,
    require,
    resource,
    resource_name,
    topic_name,
)
from weir.broker.http.rest_admin_paging import (
    cut_page,
    page_metadata,
    page_request,
    paging_query,
)
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

METADATA_VERSION = 12
CREATE_TOPICS_VERSION = 7
DELETE_TOPICS_VERSION = 6
LIST_OFFSETS_VERSION = 9
DESCRIBE_CONFIGS_VERSION = 4
RESOURCE_TYPE_TOPIC = 2
TOPIC_CHANGE_TIMEOUT_MS = 30_000
NO_LEADER = -1
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
CONFIGS_PER_TOPIC_MAX = 1_000
ZERO_UUID = uuid.UUID(int=0)


async def metadata(call: AdminCall, topics: list[str] | None) -> Any:
    return await call.send(
        ApiKey.METADATA,
        METADATA_VERSION,
        {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )


async def described_topic(call: AdminCall, name: str) -> Any:
    """The Metadata entry of topic `name` (404 when there is none)."""
    response = await metadata(call, [name])
    for topic in response.topics:
        if topic.name == name:
            if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise not_found(f"no topic {name!r}")
            check_kafka(topic.error_code, None, f"describe topic {name!r}")
            return topic
    raise not_found(f"no topic {name!r}")


def topic_resource(call: AdminCall, topic: Any) -> dict[str, Any]:
    partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
    name = topic.name
    return resource(
        "KafkaTopic",
        call.url("topics", name),
        cluster_id=call.cluster_id,
        topic_name=name,
        topic_id=str(topic.topic_id),
        is_internal=bool(topic.is_internal),
        replication_factor=len(partitions[0].replica_nodes) if partitions else 0,
        partitions_count=len(partitions),
        partitions=related(call.url("topics", name, "partitions")),
        configs=related(call.url("topics", name, "configs")),
    )


TOPIC_SORT_FIELDS = ("topic_name", "partitions_count", "replication_factor", "is_internal")
_TOPIC_SORT_KEYS: dict[str, Callable[[Any], Any]] = {
    "topic_name": lambda t: t.name,
    "partitions_count": lambda t: len(t.partitions),
    "replication_factor": lambda t: max((len(p.replica_nodes) for p in t.partitions), default=0),
    "is_internal": lambda t: bool(t.is_internal),
}
RETENTION_CONFIGS = ("retention.ms", "retention.bytes")


async def list_topics(call: AdminCall) -> Response:
    paging = page_request(call, TOPIC_SORT_FIELDS)
    response = await metadata(call, None)
    topics = sorted(
        (t for t in response.topics if t.error_code == ErrorCode.NONE), key=lambda t: t.name
    )
    if paging is None:
        return json_response(
            collection(
                "KafkaTopicList", call.url("topics"), [topic_resource(call, t) for t in topics]
            )
        )
    rows, total = cut_page(topics, paging, lambda t: str(t.name), _TOPIC_SORT_KEYS)
    retention = await _retention(call, [t.name for t in rows])
    document = collection(
        "KafkaTopicList",
        call.url("topics"),
        [{**topic_resource(call, t), **retention.get(t.name, {})} for t in rows],
    )
    document["metadata"].update(page_metadata(call, paging, total))
    return json_response(document)


async def _retention(call: AdminCall, names: list[str]) -> dict[str, dict[str, int | None]]:
    """retention_ms and retention_bytes of each topic of a page (one DescribeConfigs;
    a topic whose configs the caller may not describe is left out)."""
    if not names:
        return {}
    response = await call.send(
        ApiKey.DESCRIBE_CONFIGS,
        DESCRIBE_CONFIGS_VERSION,
        {
            "resources": [
                {
                    "resource_type": RESOURCE_TYPE_TOPIC,
                    "resource_name": name,
                    "configuration_keys": list(RETENTION_CONFIGS),
                }
                for name in names
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    found: dict[str, dict[str, int | None]] = {}
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            continue
        values = {c.name: c.value for c in result.configs}
        found[result.resource_name] = {
            name.replace(".", "_"): _int_or_none(values.get(name)) for name in RETENTION_CONFIGS
        }
    return found


def _int_or_none(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


async def get_topic(call: AdminCall) -> Response:
    name = topic_name(call.path("topic_name"))
    return json_response(topic_resource(call, await described_topic(call, name)))


def _create_configs(document: dict[str, Any]) -> list[dict[str, str | None]]:
    configs = document.get("configs") or []
    if not isinstance(configs, list) or len(configs) > CONFIGS_PER_TOPIC_MAX:
        raise bad_request(f"configs must be a list of at most {CONFIGS_PER_TOPIC_MAX} entries")
    entries: list[dict[str, str | None]] = []
    for entry in configs:
        if not isinstance(entry, dict):
            raise bad_request("each of configs must be an object with name and value")
        value = entry.get("value")
        if value is not None and not isinstance(value, str):
            raise bad_request("a config's value must be a string or null")
        entries.append(
            {"name": resource_name(entry.get("name"), "a config's name"), "value": value}
        )
    return entries


async def create_topic(call: AdminCall) -> Response:
    document = await call.json_body()
    name = topic_name(require(document, "topic_name"))
    partitions = document.get("partitions_count")
    replication = document.get("replication_factor")
    validate_only = document.get("validate_only", False)
    if not isinstance(validate_only, bool):
        raise bad_request("validate_only must be true or false")
    call.extend_deadline(TOPIC_CHANGE_TIMEOUT_MS / 1000)
    response = await call.send(
        ApiKey.CREATE_TOPICS,
        CREATE_TOPICS_VERSION,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": -1
                    if partitions is None
                    else bounded_int(partitions, "partitions_count", 1, INT32_MAX),
                    "replication_factor": -1
                    if replication is None
                    else bounded_int(replication, "replication_factor", 1, INT16_MAX),
                    "assignments": [],
                    "configs": _create_configs(document),
                }
            ],
            "timeout_ms": TOPIC_CHANGE_TIMEOUT_MS,
            "validate_only": validate_only,
        },
    )
    created = response.topics[0]
    check_kafka(created.error_code, created.error_message, f"create topic {name!r}")
    return json_response(
        resource(
            "KafkaTopic",
            call.url("topics", name),
            cluster_id=call.cluster_id,
            topic_name=name,
            topic_id=str(created.topic_id),
            is_internal=False,
            replication_factor=created.replication_factor,
            partitions_count=created.num_partitions,
            partitions=related(call.url("topics", name, "partitions")),
            configs=related(call.url("topics", name, "configs")),
        ),
        status=201,
    )


async def delete_topic(call: AdminCall) -> Response:
    name = topic_name(call.path("topic_name"))
    call.extend_deadline(TOPIC_CHANGE_TIMEOUT_MS / 1000)
    response = await call.send(
        ApiKey.DELETE_TOPICS,
        DELETE_TOPICS_VERSION,
        {"topics": [{"name": name, "topic_id": ZERO_UUID}], "timeout_ms": TOPIC_CHANGE_TIMEOUT_MS},
    )
    deleted = response.responses[0]
    if deleted.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise not_found(f"no topic {name!r}")
    check_kafka(deleted.error_code, deleted.error_message, f"delete topic {name!r}")
    return no_content()


# -- partitions ------------------------------------------------------------------------------


def list_offsets_body(
    partitions: Iterable[tuple[str, int]], timestamp: int, isolation_level: int = READ_UNCOMMITTED
) -> dict[str, Any]:
    """A ListOffsets request (as a client sends it: replica -1, no leader epoch) for
    `partitions` (topic, index), all at `timestamp` (an offset spec or milliseconds)."""
    wanted = sorted(set(partitions))
    return {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                    for t, p in wanted
                    if t == name
                ],
            }
            for name in sorted({t for t, _ in wanted})
        ],
    }


async def partition_offsets(
    call: AdminCall, topic: str, partitions: list[Any]
) -> dict[int, dict[str, int | None]]:
    """Per partition: log_start_offset, high_watermark, last_stable_offset, each asked
    of the partition's leader (None when it did not answer)."""
    by_leader: dict[int, list[int]] = {}
    for partition in partitions:
        if partition.leader_id != NO_LEADER:
            by_leader.setdefault(partition.leader_id, []).append(partition.partition_index)
    found: dict[int, dict[str, int | None]] = {
        p.partition_index: dict.fromkeys(
            ("log_start_offset", "high_watermark", "last_stable_offset")
        )
        for p in partitions
    }
    lookups = (
        ("log_start_offset", EARLIEST_TIMESTAMP, READ_UNCOMMITTED),
        ("high_watermark", LATEST_TIMESTAMP, READ_UNCOMMITTED),
        ("last_stable_offset", LATEST_TIMESTAMP, READ_COMMITTED),
    )
    for leader, indexes in sorted(by_leader.items()):
        for field_name, timestamp, isolation in lookups:
            body = list_offsets_body(((topic, i) for i in indexes), timestamp, isolation)
            response = await call.send(
                ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, node_id=leader
            )
            for answered in response.topics:
                for part in answered.partitions:
                    if part.error_code == ErrorCode.NONE and part.partition_index in found:
                        found[part.partition_index][field_name] = part.offset
    return found


def partition_resource(
    call: AdminCall, topic: str, partition: Any, offsets: dict[str, int | None]
) -> dict[str, Any]:
    index = partition.partition_index
    base = ("topics", topic, "partitions", index)
    leader = partition.leader_id
    return resource(
        "KafkaPartition",
        call.url(*base),
        cluster_id=call.cluster_id,
        topic_name=topic,
        partition_id=index,
        leader=None if leader == NO_LEADER else related(call.url(*base, "replicas", leader)),
        replicas=related(call.url(*base, "replicas")),
        leader_id=None if leader == NO_LEADER else leader,
        leader_epoch=partition.leader_epoch,
        replica_ids=list(partition.replica_nodes),
        isr=list(partition.isr_nodes),
        offline_replicas=list(partition.offline_replicas),
        **offsets,
    )


async def list_partitions(call: AdminCall) -> Response:
    name = topic_name(call.path("topic_name"))
    topic = await described_topic(call, name)
    partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
    offsets = await partition_offsets(call, name, partitions)
    return json_response(
        collection(
            "KafkaPartitionList",
            call.url("topics", name, "partitions"),
            [partition_resource(call, name, p, offsets[p.partition_index]) for p in partitions],
        )
    )


async def _partition(call: AdminCall) -> tuple[str, Any]:
    name = topic_name(call.path("topic_name"))
    index = int_text(call.path("partition_id"), "partition_id")
    topic = await described_topic(call, name)
    for partition in topic.partitions:
        if partition.partition_index == index:
            return name, partition
    raise not_found(f"topic {name!r} has no partition {index}")


async def get_partition(call: AdminCall) -> Response:
    name, partition = await _partition(call)
    offsets = await partition_offsets(call, name, [partition])
    return json_response(
        partition_resource(call, name, partition, offsets[partition.partition_index])
    )


def replica_resource(call: AdminCall, topic: str, partition: Any, broker_id: int) -> dict[str, Any]:
    index = partition.partition_index
    return resource(
        "KafkaReplica",
        call.url("topics", topic, "partitions", index, "replicas", broker_id),
        cluster_id=call.cluster_id,
        topic_name=topic,
        partition_id=index,
        broker_id=broker_id,
        is_leader=broker_id == partition.leader_id,
        is_in_sync=broker_id in partition.isr_nodes,
        broker=related(call.url("brokers", broker_id)),
    )


async def list_replicas(call: AdminCall) -> Response:
    name, partition = await _partition(call)
    index = partition.partition_index
    return json_response(
        collection(
            "KafkaReplicaList",
            call.url("topics", name, "partitions", index, "replicas"),
            [replica_resource(call, name, partition, b) for b in partition.replica_nodes],
        )
    )


async def get_replica(call: AdminCall) -> Response:
    name, partition = await _partition(call)
    broker_id = int_text(call.path("broker_id"), "broker_id")
    if broker_id not in partition.replica_nodes:
        raise not_found(
            f"broker {broker_id} holds no replica of {name!r} partition {partition.partition_index}"
        )
    return json_response(replica_resource(call, name, partition, broker_id))


TOPICS = "/v3/clusters/{cluster_id}/topics"
TOPIC = f"{TOPICS}/{{topic_name}}"
PARTITION = f"{TOPIC}/partitions/{{partition_id}}"
CREATE_TOPIC_BODY = {
    "type": "object",
    "required": ["topic_name"],
    "properties": {
        "topic_name": {"type": "string", "maxLength": 249, "pattern": "^[a-zA-Z0-9._-]+$"},
        "partitions_count": {"type": "integer", "minimum": 1},
        "replication_factor": {"type": "integer", "minimum": 1},
        "configs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "value": {"type": ["string", "null"]}},
            },
        },
        "validate_only": {"type": "boolean"},
    },
}
PAGING_QUERY = paging_query(TOPIC_SORT_FIELDS)
ENDPOINTS = [
    Endpoint(
        "GET",
        TOPICS,
        list_topics,
        "The topics the caller may describe; with any of q, sort, order, page, page_size: "
        "one page of them, filtered and sorted on the server, each with its retention",
        query=PAGING_QUERY,
        tag="topics",
    ),
    Endpoint(
        "POST",
        TOPICS,
        create_topic,
        "Create a topic",
        body=CREATE_TOPIC_BODY,
        responses={201: "Created (the KafkaTopic)", 409: "The topic exists"},
        tag="topics",
    ),
    Endpoint("GET", TOPIC, get_topic, "One topic", tag="topics"),
    Endpoint(
        "DELETE", TOPIC, delete_topic, "Delete a topic", responses={204: "Deleted"}, tag="topics"
    ),
    Endpoint(
        "GET",
        f"{TOPIC}/partitions",
        list_partitions,
        "A topic's partitions: leader, replicas, ISR and offsets",
        tag="topics",
    ),
    Endpoint("GET", PARTITION, get_partition, "One partition", tag="topics"),
    Endpoint("GET", f"{PARTITION}/replicas", list_replicas, "A partition's replicas", tag="topics"),
    Endpoint(
        "GET", f"{PARTITION}/replicas/{{broker_id}}", get_replica, "One replica", tag="topics"
    ),
]
