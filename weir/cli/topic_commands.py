"""`weir topic create|list|describe|delete|alter-config|add-partitions|trim`: topic
administration.

Each operation returns a plain JSON-able document; `render_*` turns it into the
human table. `--format json` prints the document itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from weir.cli.cluster import Cluster, TopicMetadata, topic_id_text
from weir.cli.errors import CliError, error_name, kafka_error, with_code
from weir.cli.formatting import counted, render_table
from weir.cli.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetLookup, list_offsets
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

DEFAULT_FROM_BROKER = -1
CREATE_TOPICS_BROKER_DEFAULTS_VERSION_MIN = 4
DELETE_TOPICS_BY_ID_VERSION_MIN = 6
RESOURCE_TYPE_TOPIC = 2
CONFIG_OPERATION_SET = 0
CONFIG_OPERATION_DELETE = 1
CONFIG_SOURCE_DEFAULT = 5
CONFIG_SOURCE_NAMES = {
    0: "unknown",
    1: "topic",
    2: "dynamic broker",
    3: "dynamic default broker",
    4: "static broker",
    5: "default",
    6: "dynamic broker logger",
    7: "client metrics",
    8: "group",
}


def create_topic(
    cluster: Cluster,
    name: str,
    *,
    partitions: int,
    replication_factor: int,
    configs: Sequence[tuple[str, str]],
    timeout_ms: int,
) -> dict[str, Any]:
    client = cluster.controller()
    if client.version(ApiKey.CREATE_TOPICS) < CREATE_TOPICS_BROKER_DEFAULTS_VERSION_MIN:
        partitions = 1 if partitions == DEFAULT_FROM_BROKER else partitions
        replication_factor = 1 if replication_factor == DEFAULT_FROM_BROKER else replication_factor
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": replication_factor,
                "assignments": [],
                "configs": [{"name": key, "value": value} for key, value in configs],
            }
        ],
        "timeout_ms": timeout_ms,
        "validate_only": False,
    }
    response = client.request(ApiKey.CREATE_TOPICS, body, wait_ms=timeout_ms)
    result = _only(response["topics"], "name", name)
    error = int(result["error_code"]) if result is not None else ErrorCode.UNKNOWN_SERVER_ERROR
    if result is None or error != ErrorCode.NONE:
        message = result.get("error_message") if result is not None else "no answer for the topic"
        raise kafka_error(error, topic=name, action="create", message=message)
    created_partitions = int(result.get("num_partitions", DEFAULT_FROM_BROKER))
    created_replication = int(result.get("replication_factor", DEFAULT_FROM_BROKER))
    if created_partitions == DEFAULT_FROM_BROKER or created_replication == DEFAULT_FROM_BROKER:
        topic = cluster.topic(name)
        created_partitions = len(topic.partitions)
        created_replication = topic.replication_factor
    return {
        "name": name,
        "topic_id": topic_id_text(result.get("topic_id")),
        "partitions": created_partitions,
        "replication_factor": created_replication,
        "configs": dict(configs),
    }


def render_created(document: dict[str, Any]) -> str:
    return (
        f"created topic '{document['name']}' ({counted(document['partitions'], 'partition')}, "
        f"replication factor {document['replication_factor']})\n"
    )


def list_topics(cluster: Cluster) -> dict[str, Any]:
    topics = sorted(cluster.metadata(None), key=lambda t: t.name)
    return {
        "topics": [
            {
                "name": t.name,
                "topic_id": t.topic_id,
                "partitions": len(t.partitions),
                "replication_factor": t.replication_factor,
                "is_internal": t.is_internal,
            }
            for t in topics
            if t.error_code == ErrorCode.NONE
        ]
    }


def render_topic_list(document: dict[str, Any]) -> str:
    rows = [
        [t["name"], t["partitions"], t["replication_factor"], t["is_internal"]]
        for t in document["topics"]
    ]
    return render_table(["TOPIC", "PARTITIONS", "REPLICATION", "INTERNAL"], rows)


def describe_topic(cluster: Cluster, name: str, *, all_configs: bool = False) -> dict[str, Any]:
    topic = cluster.topic(name)
    indexes = [p.partition for p in topic.partitions]
    starts = list_offsets(cluster, topic, indexes, EARLIEST_TIMESTAMP)
    ends = list_offsets(cluster, topic, indexes, LATEST_TIMESTAMP)
    partitions = []
    for p in topic.partitions:
        error = p.error_code or starts[p.partition].error_code or ends[p.partition].error_code
        partitions.append(
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "log_start_offset": starts[p.partition].offset,
                "log_end_offset": ends[p.partition].offset,
                "error": error_name(error) if error != ErrorCode.NONE else None,
            }
        )
    return {
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partition_count": len(topic.partitions),
        "replication_factor": topic.replication_factor,
        "partitions": partitions,
        "configs": describe_topic_configs(cluster, topic, all_configs=all_configs),
    }


def describe_topic_configs(
    cluster: Cluster, topic: TopicMetadata, *, all_configs: bool
) -> dict[str, str | None]:
    """The topic's configs that differ from the defaults (all of them with `all_configs`)."""
    client = cluster.any_broker()
    version = client.version(ApiKey.DESCRIBE_CONFIGS)
    body = {
        "resources": [
            {
                "resource_type": RESOURCE_TYPE_TOPIC,
                "resource_name": topic.name,
                "configuration_keys": None,
            }
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    response = client.request(ApiKey.DESCRIBE_CONFIGS, body)
    result = _only(response["results"], "resource_name", topic.name)
    if result is None:
        raise kafka_error(ErrorCode.UNKNOWN_SERVER_ERROR, topic=topic.name, action="describe")
    if int(result["error_code"]) != ErrorCode.NONE:
        raise kafka_error(
            int(result["error_code"]),
            topic=topic.name,
            action="describe configs of",
            message=result.get("error_message"),
        )
    configs: dict[str, str | None] = {}
    for entry in sorted(result["configs"], key=lambda e: str(e["name"])):
        if version == 0:
            is_default = bool(entry.get("is_default", False))
        else:
            is_default = int(entry.get("config_source", 0)) == CONFIG_SOURCE_DEFAULT
        if all_configs or not is_default:
            value = entry.get("value")
            configs[str(entry["name"])] = None if value is None else str(value)
    return configs


def render_description(document: dict[str, Any]) -> str:
    header = (
        f"Topic: {document['name']}  id: {document['topic_id'] or '-'}  "
        f"partitions: {document['partition_count']}  "
        f"replication factor: {document['replication_factor']}"
        + ("  internal" if document["is_internal"] else "")
        + "\n"
    )
    partitions = document["partitions"]
    with_errors = any(p["error"] for p in partitions)
    headers = ["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "LOG-END-OFFSET"]
    rows = [
        [
            p["partition"],
            p["leader"],
            p["replicas"],
            p["isr"],
            p["log_start_offset"],
            p["log_end_offset"],
        ]
        + ([p["error"]] if with_errors else [])
        for p in partitions
    ]
    text = header + render_table(headers + (["ERROR"] if with_errors else []), rows)
    configs = document["configs"]
    if configs:
        text += "Configs:\n" + "".join(
            f"  {key}={'(sensitive)' if value is None else value}\n"
            for key, value in configs.items()
        )
    else:
        text += "Configs: (all defaults)\n"
    return text


def delete_topic(cluster: Cluster, name: str, *, timeout_ms: int) -> dict[str, Any]:
    client = cluster.controller()
    if client.version(ApiKey.DELETE_TOPICS) >= DELETE_TOPICS_BY_ID_VERSION_MIN:
        body: dict[str, Any] = {"topics": [{"name": name}], "timeout_ms": timeout_ms}
    else:
        body = {"topic_names": [name], "timeout_ms": timeout_ms}
    response = client.request(ApiKey.DELETE_TOPICS, body, wait_ms=timeout_ms)
    result = _only(response["responses"], "name", name)
    if result is None:
        raise kafka_error(ErrorCode.UNKNOWN_SERVER_ERROR, topic=name, action="delete")
    error = int(result["error_code"])
    if error != ErrorCode.NONE:
        raise kafka_error(error, topic=name, action="delete", message=result.get("error_message"))
    return {"name": name, "deleted": True}


def render_deleted(document: dict[str, Any]) -> str:
    return f"deleted topic '{document['name']}'\n"


def alter_topic_config(
    cluster: Cluster, name: str, *, set_configs: Sequence[tuple[str, str]], delete: Sequence[str]
) -> dict[str, Any]:
    operations = [
        {"name": key, "config_operation": CONFIG_OPERATION_SET, "value": value}
        for key, value in set_configs
    ] + [
        {"name": key, "config_operation": CONFIG_OPERATION_DELETE, "value": None} for key in delete
    ]
    body = {
        "resources": [
            {
                "resource_type": RESOURCE_TYPE_TOPIC,
                "resource_name": name,
                "configs": operations,
            }
        ],
        "validate_only": False,
    }
    response = cluster.any_broker().request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
    result = _only(response["responses"], "resource_name", name)
    if result is None:
        raise kafka_error(ErrorCode.UNKNOWN_SERVER_ERROR, topic=name, action="alter configs of")
    error = int(result["error_code"])
    if error != ErrorCode.NONE:
        raise kafka_error(
            error, topic=name, action="alter configs of", message=result.get("error_message")
        )
    return {"name": name, "set": dict(set_configs), "deleted": list(delete)}


def render_altered(document: dict[str, Any]) -> str:
    changes = [f"set {key}={value}" for key, value in document["set"].items()]
    changes += [f"deleted {key}" for key in document["deleted"]]
    return f"updated topic '{document['name']}': {', '.join(changes)}\n"


# -- add-partitions -----------------------------------------------------------------------


def add_partitions(
    cluster: Cluster,
    name: str,
    *,
    add_count: int | None,
    total_count: int | None,
    timeout_ms: int,
) -> dict[str, Any]:
    """Grow `name` by `add_count` partitions, or to `total_count` (exactly one is given).
    Kafka never removes partitions: a total that is not larger is refused here."""
    previous_count = len(cluster.topic(name, action="add partitions to").partitions)
    if total_count is None:
        assert add_count is not None
        total_count = previous_count + add_count
    if total_count <= previous_count:
        raise with_code(
            f"topic '{name}' already has {counted(previous_count, 'partition')}: --total must be "
            f"more than {previous_count} (partitions can be added, never removed)",
            ErrorCode.INVALID_PARTITIONS,
        )
    body = {
        "topics": [{"name": name, "count": total_count, "assignments": None}],
        "timeout_ms": timeout_ms,
        "validate_only": False,
    }
    response = cluster.controller().request(ApiKey.CREATE_PARTITIONS, body, wait_ms=timeout_ms)
    result = _only(response["results"], "name", name)
    if result is None:
        raise kafka_error(ErrorCode.UNKNOWN_SERVER_ERROR, topic=name, action="add partitions to")
    error = int(result["error_code"])
    if error != ErrorCode.NONE:
        raise kafka_error(
            error, topic=name, action="add partitions to", message=result.get("error_message")
        )
    return {
        "name": name,
        "previous_partition_count": previous_count,
        "partition_count": total_count,
        "added_partition_count": total_count - previous_count,
    }


def render_partitions_added(document: dict[str, Any]) -> str:
    return (
        f"added {counted(document['added_partition_count'], 'partition')} to topic "
        f"'{document['name']}' (now {counted(document['partition_count'], 'partition')})\n"
    )


# -- trim -----------------------------------------------------------------------------------


def trim_topic(
    cluster: Cluster,
    name: str,
    *,
    before_offset: int | None,
    before_timestamp_ms: int | None,
    partition: int | None,
    timeout_ms: int,
) -> dict[str, Any]:
    """DeleteRecords: move the log start of each partition (or only `partition`) up to
    `before_offset`, or to the first record at or after `before_timestamp_ms` (every
    record when none is that new). Offsets past a partition's high watermark are
    refused before anything is deleted."""
    topic = cluster.topic(name, action="trim")
    indexes = _trimmed_partitions(topic, partition)
    starts = _offsets_or_error(cluster, topic, indexes, EARLIEST_TIMESTAMP)
    ends = _offsets_or_error(cluster, topic, indexes, LATEST_TIMESTAMP)
    if before_offset is not None:
        targets = {p: before_offset for p in indexes}
        _refuse_past_high_watermark(name, targets, ends)
    else:
        assert before_timestamp_ms is not None
        at_time = list_offsets(cluster, topic, indexes, before_timestamp_ms)
        targets = {p: _first_at_or_after(at_time[p], ends[p]) for p in indexes}
    low_watermarks = _delete_records(cluster, topic, targets, timeout_ms)
    return {
        "name": name,
        "partitions": [
            {
                "partition": p,
                "previous_log_start_offset": starts[p],
                "log_start_offset": low_watermarks[p],
                "log_end_offset": ends[p],
            }
            for p in indexes
        ],
    }


def _trimmed_partitions(topic: TopicMetadata, partition: int | None) -> list[int]:
    indexes = [p.partition for p in topic.partitions]
    if partition is None:
        return indexes
    if partition not in indexes:
        raise with_code(
            f"topic '{topic.name}' has no partition {partition} (it has "
            f"{counted(len(indexes), 'partition')}, numbered from 0)",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )
    return [partition]


def _offsets_or_error(
    cluster: Cluster, topic: TopicMetadata, indexes: list[int], timestamp: int
) -> dict[int, int]:
    found = list_offsets(cluster, topic, indexes, timestamp)
    for p in indexes:
        if found[p].offset is None:
            raise kafka_error(found[p].error_code, topic=topic.name, partition=p)
    return {p: int(found[p].offset or 0) for p in indexes}


def _refuse_past_high_watermark(
    name: str, targets: Mapping[int, int], ends: Mapping[int, int]
) -> None:
    past = [p for p, offset in targets.items() if offset > ends[p]]
    if past:
        first = past[0]
        raise with_code(
            f"cannot trim topic '{name}' before offset {targets[first]}: partition {first} "
            f"ends at offset {ends[first]} (its high watermark); give an offset up to "
            f"{ends[first]}, or pick the partition with --partition",
            ErrorCode.OFFSET_OUT_OF_RANGE,
        )


def _first_at_or_after(lookup: OffsetLookup, end_offset: int) -> int:
    """The offset of the first record at or after the time, or the partition's end when
    every record is older (ListOffsets answers -1 then)."""
    if lookup.offset is None or lookup.offset < 0:
        return end_offset
    return lookup.offset


TRIM_REFUSALS = {
    ErrorCode.POLICY_VIOLATION: (
        "its cleanup.policy does not include delete, and a compacted topic keeps every "
        "key's latest record; add delete to cleanup.policy first"
    ),
    ErrorCode.INVALID_TOPIC_EXCEPTION: "it is an internal topic, which only the broker trims",
}


def _delete_records(
    cluster: Cluster, topic: TopicMetadata, targets: Mapping[int, int], timeout_ms: int
) -> dict[int, int]:
    """Send DeleteRecords to each partition's leader; the new log start of each."""
    leaders = {p.partition: p.leader for p in topic.partitions}
    by_leader: dict[int, list[int]] = defaultdict(list)
    for p in targets:
        by_leader[leaders[p]].append(p)
    low_watermarks: dict[int, int] = {}
    for leader, partitions in sorted(by_leader.items()):
        body = {
            "topics": [
                {
                    "name": topic.name,
                    "partitions": [
                        {"partition_index": p, "offset": targets[p]} for p in partitions
                    ],
                }
            ],
            "timeout_ms": timeout_ms,
        }
        response = cluster.broker(leader).request(ApiKey.DELETE_RECORDS, body, wait_ms=timeout_ms)
        for answered in response["topics"]:
            for result in answered["partitions"]:
                index, error = int(result["partition_index"]), int(result["error_code"])
                if error != ErrorCode.NONE:
                    raise _trim_error(topic.name, index, error, len(low_watermarks))
                low_watermarks[index] = int(result["low_watermark"])
    missing = [p for p in targets if p not in low_watermarks]
    if missing:
        raise CliError(f"broker did not answer for topic '{topic.name}' partition {missing[0]}")
    return low_watermarks


def _trim_error(name: str, partition: int, code: int, trimmed_count: int) -> CliError:
    reason = next((text for c, text in TRIM_REFUSALS.items() if c == code), None)
    done = f" ({counted(trimmed_count, 'partition')} already trimmed)" if trimmed_count else ""
    if reason is not None:
        return with_code(f"cannot trim topic '{name}': {reason}{done}", code)
    return kafka_error(code, topic=name, partition=partition, action="trim", message=None)


def render_trimmed(document: dict[str, Any]) -> str:
    rows = [
        (p["partition"], p["previous_log_start_offset"], p["log_start_offset"], p["log_end_offset"])
        for p in document["partitions"]
    ]
    headers = ("PARTITION", "PREVIOUS-LOG-START-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET")
    return f"trimmed topic '{document['name']}'\n" + render_table(headers, rows)


def _only(items: Any, field: str, name: str) -> Any:
    for item in items or []:
        if item.get(field) == name:
            return item
    return None
