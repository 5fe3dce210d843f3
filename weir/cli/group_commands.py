"""`weir group list|describe|delete|reset-offsets`: consumer groups over the Kafka protocol.

Requests go to the group coordinator (found with FindCoordinator). `describe` shows
each member's client, host and assigned partitions (decoded from the classic
consumer protocol's assignment bytes, or read from ConsumerGroupDescribe for KIP-848
groups), and each partition's committed offset, log end (high watermark, from
ListOffsets) and lag, with the field names of `GET /v1/groups/{id}`. `reset-offsets`
prints its plan and commits it only with `--execute`, and only for a group without
active members (the coordinator refuses the commit otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from weir.cli.cluster import Cluster, TopicMetadata
from weir.cli.errors import (
    DELETE_GROUP,
    DESCRIBE_GROUP,
    RESET_GROUP_OFFSETS,
    BrokerProtocolError,
    CliError,
    GroupAction,
    KafkaCodeError,
    failed_to,
    group_error,
    kafka_error,
    with_code,
)
from weir.cli.formatting import counted, render_table
from weir.cli.kafka_client import KafkaClient
from weir.cli.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, list_offsets
from weir.format.errors import ErrorCode
from weir.format.primitives import DecodeError
from weir.wire.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment
from weir.wire.protocol import ApiKey

# FindCoordinator is asked again while the coordinator is loading or not there yet.
COORDINATOR_WAIT_MS = 5_000
CLASSIC = "classic"
CONSUMER = "consumer"
DEAD_STATE = "Dead"
NO_GENERATION = -1
# The coordinator refuses an admin commit with these while the group has members.
ACTIVE_GROUP_ERRORS = (
    ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.STALE_MEMBER_EPOCH,
    ErrorCode.NON_EMPTY_GROUP,
)

Assignment = list[dict[str, Any]]  # [{"topic": name, "partitions": [index, ...]}]


def _coordinator(cluster: Cluster, group_id: str, action: GroupAction) -> KafkaClient:
    try:
        return cluster.group_coordinator(group_id, wait_ms=COORDINATOR_WAIT_MS)
    except KafkaCodeError as exc:
        raise group_error(exc.code, group_id, action) from None


# -- list ---------------------------------------------------------------------------


def list_groups(cluster: Cluster) -> dict[str, Any]:
    """Every group of the cluster: each broker lists the groups it coordinates, so
    ListGroups is asked of every broker (as Kafka's admin client does)."""
    cluster.metadata([])
    groups: dict[str, dict[str, Any]] = {}
    for node_id in cluster.node_ids():
        response = cluster.broker(node_id).request(ApiKey.LIST_GROUPS, {})
        error = int(response["error_code"])
        if error != ErrorCode.NONE:
            raise failed_to(f"list the groups of broker {node_id}", error)
        for g in response["groups"]:
            groups[str(g["group_id"])] = {
                "group_id": g["group_id"],
                "type": g.get("group_type") or CLASSIC,
                "state": g.get("group_state", ""),
                "protocol_type": g["protocol_type"],
            }
    return {"groups": [groups[group_id] for group_id in sorted(groups)]}


def render_group_list(document: dict[str, Any]) -> str:
    rows = [(g["group_id"], g["type"], g["state"]) for g in document["groups"]]
    return render_table(("GROUP-ID", "TYPE", "STATE"), rows) if rows else "no groups\n"


# -- describe -------------------------------------------------------------------------


def describe_group(cluster: Cluster, group_id: str) -> dict[str, Any]:
    coordinator = _coordinator(cluster, group_id, DESCRIBE_GROUP)
    group = _describe(coordinator, group_id)
    committed = _committed(coordinator, group_id, DESCRIBE_GROUP)
    if group["state"] == DEAD_STATE and not committed:
        raise group_error(ErrorCode.GROUP_ID_NOT_FOUND, group_id, DESCRIBE_GROUP)
    owners = _owners(group["members"])
    rows = []
    for topic_name, partitions in sorted(_by_topic([*committed, *owners]).items()):
        ends = _latest(cluster, topic_name, partitions)
        for partition in sorted(partitions):
            offset = committed.get((topic_name, partition))
            end = ends.get(partition)
            lag = max(0, end - offset) if end is not None and offset is not None else None
            rows.append(
                {
                    "topic": topic_name,
                    "partition": partition,
                    "committed_offset": offset,
                    "log_end_offset": end,
                    "lag": lag,
                    "member_id": owners.get((topic_name, partition)),
                }
            )
    return {**group, "offsets": rows, "lag": sum(r["lag"] or 0 for r in rows)}


def _describe(coordinator: KafkaClient, group_id: str) -> dict[str, Any]:
    """The group's type, state and members: ConsumerGroupDescribe for a KIP-848 group
    (when the broker has it), else DescribeGroups."""
    return _describe_consumer_group(coordinator, group_id) or _describe_classic_group(
        coordinator, group_id
    )


def _describe_consumer_group(coordinator: KafkaClient, group_id: str) -> dict[str, Any] | None:
    try:
        coordinator.version(ApiKey.CONSUMER_GROUP_DESCRIBE)
    except BrokerProtocolError:
        return None  # a broker without KIP-848 groups
    response = coordinator.request(
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        {"group_ids": [group_id], "include_authorized_operations": False},
    )
    described = response["groups"][0]
    error = int(described["error_code"])
    if error == ErrorCode.GROUP_ID_NOT_FOUND:
        return None  # not a consumer group: maybe a classic one
    if error != ErrorCode.NONE:
        raise group_error(error, group_id, DESCRIBE_GROUP, described.get("error_message"))
    members = [
        {
            "member_id": m["member_id"],
            "instance_id": m.get("instance_id"),
            "client_id": m["client_id"],
            "client_host": m["client_host"],
            "assignment": [
                {"topic": tp["topic_name"], "partitions": sorted(tp["partitions"])}
                for tp in sorted(m["assignment"]["topic_partitions"], key=lambda t: t["topic_name"])
            ],
        }
        for m in sorted(described["members"], key=lambda m: m["member_id"])
    ]
    return {
        "group_id": group_id,
        "type": CONSUMER,
        "state": described["group_state"],
        "protocol_type": CONSUMER_PROTOCOL_TYPE,
        "assignor": described["assignor_name"] or None,
        "generation": int(described["group_epoch"]),
        "members": members,
    }


def _describe_classic_group(coordinator: KafkaClient, group_id: str) -> dict[str, Any]:
    described = coordinator.request(ApiKey.DESCRIBE_GROUPS, {"groups": [group_id]})["groups"][0]
    error = int(described["error_code"])
    if error != ErrorCode.NONE:
        raise group_error(error, group_id, DESCRIBE_GROUP)
    protocol_type = described["protocol_type"]
    members = [
        {
            "member_id": m["member_id"],
            "instance_id": m.get("group_instance_id"),
            "client_id": m["client_id"],
            "client_host": m["client_host"],
            "assignment": _classic_assignment(protocol_type, m["member_assignment"]),
        }
        for m in sorted(described["members"], key=lambda m: m["member_id"])
    ]
    return {
        "group_id": group_id,
        "type": CLASSIC,
        "state": described["group_state"],
        "protocol_type": protocol_type,
        "assignor": described["protocol_data"] or None,
        "generation": None,  # DescribeGroups does not tell
        "members": members,
    }


def _classic_assignment(protocol_type: str, data: bytes) -> Assignment | None:
    """A consumer's assigned partitions, from the bytes its group's leader chose; None
    when the group is not a consumer group (Connect, streams) or the bytes are not an
    assignment this CLI can read."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    if not data:
        return []  # joined, not yet synced
    try:
        assignment = decode_assignment(data)
    except DecodeError:
        return None
    return [
        {"topic": tp.topic, "partitions": sorted(tp.partitions)}
        for tp in sorted(assignment.assigned_partitions, key=lambda tp: tp.topic)
    ]


def _owners(members: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], str]:
    """Which member each assigned partition belongs to."""
    return {
        (topic["topic"], partition): member["member_id"]
        for member in members
        for topic in member["assignment"] or ()
        for partition in topic["partitions"]
    }


def render_group_description(document: dict[str, Any]) -> str:
    members = document["members"]
    kind = document["type"] + (f" ({document['assignor']})" if document["assignor"] else "")
    lines = [
        f"group '{document['group_id']}': {document['state']}, {kind}, "
        f"{counted(len(members), 'member')}, total lag {document['lag']}\n"
    ]
    if members:
        rows = [
            (
                m["member_id"],
                m["client_id"] or None,
                m["client_host"] or None,
                _assignment_text(m["assignment"]),
            )
            for m in members
        ]
        lines.append(render_table(("MEMBER-ID", "CLIENT-ID", "CLIENT-HOST", "ASSIGNMENT"), rows))
    offsets = [
        (
            r["topic"],
            r["partition"],
            r["committed_offset"],
            r["log_end_offset"],
            r["lag"],
            r["member_id"],
        )
        for r in document["offsets"]
    ]
    if offsets:
        headers = ("TOPIC", "PARTITION", "COMMITTED-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID")
        lines.append(render_table(headers, offsets))
    else:
        lines.append("no committed offsets\n")
    return "".join(lines)


def _assignment_text(assignment: Assignment | None) -> str:
    """`orders:0,1;audit:3`, `-` when nothing is assigned, `?` when unreadable."""
    if assignment is None:
        return "?"
    parts = [f"{t['topic']}:{','.join(str(p) for p in t['partitions'])}" for t in assignment]
    return ";".join(parts) or "-"


def _committed(
    coordinator: KafkaClient, group_id: str, action: GroupAction
) -> dict[tuple[str, int], int]:
    response = coordinator.request(ApiKey.OFFSET_FETCH, {"group_id": group_id, "topics": None})
    error = int(response.get("error_code", ErrorCode.NONE))
    if error != ErrorCode.NONE:
        raise group_error(error, group_id, action)
    return {
        (t["name"], int(p["partition_index"])): int(p["committed_offset"])
        for t in response["topics"]
        for p in t["partitions"]
        if int(p["committed_offset"]) >= 0
    }


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, set[int]]:
    topics: dict[str, set[int]] = {}
    for topic_name, partition in partitions:
        topics.setdefault(topic_name, set()).add(partition)
    return topics


def _latest(cluster: Cluster, topic_name: str, partitions: set[int]) -> dict[int, int]:
    metadata = cluster.metadata([topic_name])
    if not metadata or metadata[0].error_code != ErrorCode.NONE:
        return {}
    found = list_offsets(cluster, metadata[0], partitions, LATEST_TIMESTAMP)
    return {p: lookup.offset for p, lookup in found.items() if lookup.offset is not None}


# -- delete ---------------------------------------------------------------------------


def delete_group(cluster: Cluster, group_id: str) -> dict[str, Any]:
    coordinator = _coordinator(cluster, group_id, DELETE_GROUP)
    response = coordinator.request(ApiKey.DELETE_GROUPS, {"groups_names": [group_id]})
    error = int(response["results"][0]["error_code"])
    if error != ErrorCode.NONE:
        raise group_error(error, group_id, DELETE_GROUP)
    return {"group_id": group_id, "deleted": True}


def render_group_deleted(document: dict[str, Any]) -> str:
    return f"deleted group '{document['group_id']}'\n"


# -- reset-offsets ----------------------------------------------------------------------


@dataclass(frozen=True)
class ResetTarget:
    """Where to move the group: earliest, latest, a fixed offset, a time, or a shift."""

    kind: str  # "earliest" | "latest" | "offset" | "datetime" | "shift"
    offset: int = 0
    timestamp_ms: int = 0
    shift: int = 0


def parse_reset_target(
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_timestamp_ms: int | None,
    shift_by: int | None,
) -> ResetTarget:
    chosen = [to_earliest, to_latest, to_offset is not None, to_timestamp_ms is not None,
              shift_by is not None]  # fmt: skip
    if sum(chosen) != 1:
        raise CliError(
            "group reset-offsets: give exactly one of --to-earliest, --to-latest, "
            "--to-offset N, --to-datetime ISO-8601, --shift-by N"
        )
    if to_earliest:
        return ResetTarget("earliest")
    if to_latest:
        return ResetTarget("latest")
    if to_offset is not None:
        return ResetTarget("offset", offset=to_offset)
    if shift_by is not None:
        return ResetTarget("shift", shift=shift_by)
    assert to_timestamp_ms is not None
    return ResetTarget("datetime", timestamp_ms=to_timestamp_ms)


def reset_offsets(
    cluster: Cluster,
    group_id: str,
    topic_name: str | None,
    target: ResetTarget,
    *,
    execute: bool,
) -> dict[str, Any]:
    """The new offset of every partition in scope (`topic_name`'s, or with None every
    partition the group has committed an offset for), committed with `execute`."""
    coordinator = _coordinator(cluster, group_id, RESET_GROUP_OFFSETS)
    current = _committed(coordinator, group_id, RESET_GROUP_OFFSETS)
    scope = _reset_scope(cluster, group_id, topic_name, current)
    plan = []
    for topic, partitions in scope:
        new_offsets = _targets(cluster, topic, partitions, target, current, group_id)
        plan += [
            {
                "topic": topic.name,
                "partition": p,
                "current_offset": current.get((topic.name, p)),
                "new_offset": new_offsets[p],
            }
            for p in sorted(partitions)
        ]
    members = _describe(coordinator, group_id)["members"]
    if execute:
        if members:
            raise group_error(ErrorCode.NON_EMPTY_GROUP, group_id, RESET_GROUP_OFFSETS)
        _commit_plan(coordinator, group_id, plan)
    return {
        "group_id": group_id,
        "executed": execute,
        "active_members": len(members),
        "plan": plan,
    }


def _reset_scope(
    cluster: Cluster, group_id: str, topic_name: str | None, current: Mapping[tuple[str, int], int]
) -> list[tuple[TopicMetadata, list[int]]]:
    if topic_name is not None:
        topic = cluster.topic(topic_name)
        return [(topic, [p.partition for p in topic.partitions])]
    if not current:
        raise CliError(
            f"group '{group_id}' has no committed offsets, so --all-topics finds nothing "
            "to reset; name a topic with --topic"
        )
    return [
        (cluster.topic(name), sorted(partitions))
        for name, partitions in sorted(_by_topic(current).items())
    ]


def _targets(
    cluster: Cluster,
    topic: TopicMetadata,
    partitions: list[int],
    target: ResetTarget,
    current: Mapping[tuple[str, int], int],
    group_id: str,
) -> dict[int, int]:
    earliest = list_offsets(cluster, topic, partitions, EARLIEST_TIMESTAMP)
    latest = list_offsets(cluster, topic, partitions, LATEST_TIMESTAMP)
    at_time = {}
    if target.kind == "datetime":
        at_time = list_offsets(cluster, topic, partitions, target.timestamp_ms)
    result = {}
    for p in partitions:
        low, high = earliest[p].offset, latest[p].offset
        if low is None or high is None:
            code = earliest[p].error_code if low is None else latest[p].error_code
            raise kafka_error(code, topic=topic.name, partition=p, action="look up offsets of")
        if target.kind == "earliest":
            result[p] = low
        elif target.kind == "latest":
            result[p] = high
        elif target.kind == "offset":
            result[p] = min(max(target.offset, low), high)
        elif target.kind == "shift":
            committed = current.get((topic.name, p))
            if committed is None:
                raise CliError(
                    f"group '{group_id}' has no committed offset on topic '{topic.name}' "
                    f"partition {p}, so there is nothing to shift; reset it with "
                    "--to-earliest, --to-latest or --to-offset"
                )
            result[p] = min(max(committed + target.shift, low), high)
        else:
            found = at_time[p].offset
            result[p] = high if found is None or found < 0 else found
    return result


def _commit_plan(coordinator: KafkaClient, group_id: str, plan: list[dict[str, Any]]) -> None:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for row in plan:
        by_topic.setdefault(row["topic"], []).append(
            {
                "partition_index": row["partition"],
                "committed_offset": row["new_offset"],
                "committed_metadata": "",
            }
        )
    body = {
        "group_id": group_id,
        "generation_id_or_member_epoch": NO_GENERATION,
        "member_id": "",
        "topics": [{"name": name, "partitions": rows} for name, rows in by_topic.items()],
    }
    response = coordinator.request(ApiKey.OFFSET_COMMIT, body)
    for topic in response["topics"]:
        for partition in topic["partitions"]:
            error = int(partition["error_code"])
            if error in ACTIVE_GROUP_ERRORS:
                raise with_code(
                    f"group '{group_id}' has active members again; stop them (or wait for "
                    "their session to expire) before resetting its offsets",
                    error,
                )
            if error != ErrorCode.NONE:
                raise kafka_error(
                    error,
                    topic=topic["name"],
                    partition=int(partition["partition_index"]),
                    action=f"commit the offsets of group '{group_id}' on",
                )


def render_reset_plan(document: dict[str, Any]) -> str:
    rows = [
        (r["topic"], r["partition"], r["current_offset"], r["new_offset"]) for r in document["plan"]
    ]
    table = render_table(("TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"), rows)
    if document["executed"]:
        return table + f"committed the new offsets of group '{document['group_id']}'\n"
    note = "dry run: nothing changed (add --execute to commit these offsets)\n"
    if document["active_members"]:
        note += (
            f"note: the group has {counted(document['active_members'], 'active member')}; "
            "--execute needs them stopped first\n"
        )
    return table + note
