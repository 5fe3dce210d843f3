"""`weir group list|describe|delete|reset-offsets`: consumer groups over the Kafka protocol.

Requests go to the group coordinator, which on a single node is the bootstrap
broker (found with FindCoordinator). `describe` shows each partition's committed
offset, log end (high watermark, from ListOffsets) and lag, so the lag shown
here and by `GET /v1/groups/{id}` agree. `reset-offsets` prints its plan and
commits it only with `--execute`, and only for a group without active members
(the coordinator refuses the commit otherwise).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from weir.cli.cluster import Cluster
from weir.cli.errors import CliError, kafka_error
from weir.cli.formatting import render_table
from weir.cli.kafka_client import KafkaClient
from weir.cli.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, list_offsets
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

NO_OFFSET = -1
COORDINATOR_KEY_TYPE_GROUP = 0


def _coordinator(cluster: Cluster, group_id: str) -> KafkaClient:
    client = cluster.any_broker()
    response = client.request(
        ApiKey.FIND_COORDINATOR,
        {"key": group_id, "key_type": COORDINATOR_KEY_TYPE_GROUP, "coordinator_keys": [group_id]},
    )
    found = response["coordinators"][0] if "coordinators" in response else response
    error = int(found["error_code"])
    if error != ErrorCode.NONE:
        raise kafka_error(error, action=f"find the coordinator of group {group_id!r}")
    cluster.metadata([])  # learn the brokers' addresses
    return cluster.broker(int(found["node_id"]))


# -- list ---------------------------------------------------------------------------


def list_groups(cluster: Cluster) -> dict[str, Any]:
    response = cluster.any_broker().request(ApiKey.LIST_GROUPS, {})
    error = int(response["error_code"])
    if error != ErrorCode.NONE:
        raise kafka_error(error, action="list groups")
    groups = [
        {
            "group": g["group_id"],
            "type": g.get("group_type") or "classic",
            "state": g.get("group_state", ""),
            "protocol_type": g["protocol_type"],
        }
        for g in response["groups"]
    ]
    return {"groups": sorted(groups, key=lambda g: g["group"])}


def render_group_list(document: dict[str, Any]) -> str:
    rows = [(g["group"], g["type"], g["state"]) for g in document["groups"]]
    return render_table(("group", "type", "state"), rows) if rows else "no groups\n"


# -- describe -------------------------------------------------------------------------


def describe_group(cluster: Cluster, group_id: str) -> dict[str, Any]:
    coordinator = _coordinator(cluster, group_id)
    described = coordinator.request(ApiKey.DESCRIBE_GROUPS, {"groups": [group_id]})["groups"][0]
    error = int(described["error_code"])
    if error != ErrorCode.NONE:
        raise kafka_error(error, action=f"describe group {group_id!r}")
    offsets = _committed(coordinator, group_id)
    if described["group_state"] == "Dead" and not offsets:
        raise CliError(f"group {group_id!r} does not exist")
    rows = []
    for topic_name, partitions in sorted(_by_topic(offsets).items()):
        ends = _latest(cluster, topic_name, partitions)
        for partition in sorted(partitions):
            committed = offsets[(topic_name, partition)]
            end = ends.get(partition)
            lag = max(0, end - committed) if end is not None and committed >= 0 else None
            rows.append(
                {
                    "topic": topic_name,
                    "partition": partition,
                    "committed_offset": committed,
                    "log_end_offset": end,
                    "lag": lag,
                }
            )
    return {
        "group": group_id,
        "state": described["group_state"],
        "protocol_type": described["protocol_type"],
        "members": [
            {"member_id": m["member_id"], "client_id": m["client_id"], "host": m["client_host"]}
            for m in described["members"]
        ],
        "offsets": rows,
        "lag": sum(r["lag"] or 0 for r in rows),
    }


def render_group_description(document: dict[str, Any]) -> str:
    lines = [
        f"group {document['group']}: {document['state']}, "
        f"{len(document['members'])} member(s), total lag {document['lag']}\n"
    ]
    if document["members"]:
        members = [(m["member_id"], m["client_id"], m["host"]) for m in document["members"]]
        lines.append(render_table(("member", "client", "host"), members))
    offsets = [
        (r["topic"], r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"])
        for r in document["offsets"]
    ]
    if offsets:
        lines.append(render_table(("topic", "partition", "committed", "log-end", "lag"), offsets))
    else:
        lines.append("no committed offsets\n")
    return "".join(lines)


def _committed(coordinator: KafkaClient, group_id: str) -> dict[tuple[str, int], int]:
    response = coordinator.request(ApiKey.OFFSET_FETCH, {"group_id": group_id, "topics": None})
    error = int(response.get("error_code", ErrorCode.NONE))
    if error != ErrorCode.NONE:
        raise kafka_error(error, action=f"fetch the offsets of group {group_id!r}")
    return {
        (t["name"], int(p["partition_index"])): int(p["committed_offset"])
        for t in response["topics"]
        for p in t["partitions"]
    }


def _by_topic(offsets: dict[tuple[str, int], int]) -> dict[str, set[int]]:
    topics: dict[str, set[int]] = {}
    for topic_name, partition in offsets:
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
    coordinator = _coordinator(cluster, group_id)
    response = coordinator.request(ApiKey.DELETE_GROUPS, {"groups_names": [group_id]})
    error = int(response["results"][0]["error_code"])
    if error != ErrorCode.NONE:
        raise kafka_error(error, action=f"delete group {group_id!r}")
    return {"group": group_id, "deleted": True}


def render_group_deleted(document: dict[str, Any]) -> str:
    return f"deleted group '{document['group']}'\n"


# -- reset-offsets ----------------------------------------------------------------------


@dataclass(frozen=True)
class ResetTarget:
    """Where to move the group: earliest, latest, a fixed offset, or a time."""

    kind: str  # "earliest" | "latest" | "offset" | "datetime"
    offset: int = 0
    timestamp_ms: int = 0


def parse_reset_target(
    to_earliest: bool, to_latest: bool, to_offset: int | None, to_datetime: str | None
) -> ResetTarget:
    chosen = [to_earliest, to_latest, to_offset is not None, to_datetime is not None]
    if sum(chosen) != 1:
        raise CliError(
            "group reset-offsets: give exactly one of --to-earliest, --to-latest, "
            "--to-offset N, --to-datetime ISO-8601"
        )
    if to_earliest:
        return ResetTarget("earliest")
    if to_latest:
        return ResetTarget("latest")
    if to_offset is not None:
        return ResetTarget("offset", offset=to_offset)
    assert to_datetime is not None
    try:
        moment = datetime.datetime.fromisoformat(to_datetime)
    except ValueError:
        raise CliError(f"group reset-offsets: {to_datetime!r} is not an ISO-8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return ResetTarget("datetime", timestamp_ms=int(moment.timestamp() * 1000))


def reset_offsets(
    cluster: Cluster, group_id: str, topic_name: str, target: ResetTarget, *, execute: bool
) -> dict[str, Any]:
    metadata = cluster.metadata([topic_name])
    if not metadata or metadata[0].error_code != ErrorCode.NONE:
        raise kafka_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic=topic_name)
    topic = metadata[0]
    partitions = [p.partition for p in topic.partitions]
    coordinator = _coordinator(cluster, group_id)
    current = _committed(coordinator, group_id)
    new_offsets = _targets(cluster, topic, partitions, target)
    plan = [
        {
            "topic": topic_name,
            "partition": p,
            "current_offset": current.get((topic_name, p), NO_OFFSET),
            "new_offset": new_offsets[p],
        }
        for p in sorted(partitions)
    ]
    if execute:
        _commit_plan(coordinator, group_id, plan)
    return {"group": group_id, "executed": execute, "plan": plan}


def _targets(
    cluster: Cluster, topic: Any, partitions: list[int], target: ResetTarget
) -> dict[int, int]:
    earliest = list_offsets(cluster, topic, partitions, EARLIEST_TIMESTAMP)
    latest = list_offsets(cluster, topic, partitions, LATEST_TIMESTAMP)
    if target.kind == "datetime":
        at_time = list_offsets(cluster, topic, partitions, target.timestamp_ms)
    result = {}
    for p in partitions:
        low, high = earliest[p].offset, latest[p].offset
        if low is None or high is None:
            raise kafka_error(latest[p].error_code, topic=topic.name, partition=p)
        if target.kind == "earliest":
            result[p] = low
        elif target.kind == "latest":
            result[p] = high
        elif target.kind == "offset":
            result[p] = min(max(target.offset, low), high)
        else:
            found = at_time[p].offset
            result[p] = high if found is None or found < 0 else found
    return result


def _commit_plan(coordinator: KafkaClient, group_id: str, plan: list[dict[str, Any]]) -> None:
    body = {
        "group_id": group_id,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": plan[0]["topic"],
                "partitions": [
                    {
                        "partition_index": row["partition"],
                        "committed_offset": row["new_offset"],
                        "committed_metadata": "",
                    }
                    for row in plan
                ],
            }
        ],
    }
    response = coordinator.request(ApiKey.OFFSET_COMMIT, body)
    for topic in response["topics"]:
        for partition in topic["partitions"]:
            error = int(partition["error_code"])
            if error != ErrorCode.NONE:
                raise kafka_error(
                    error,
                    topic=topic["name"],
                    partition=int(partition["partition_index"]),
                    action=f"reset the offsets of group {group_id!r} (is it still active?)",
                )


def render_reset_plan(document: dict[str, Any]) -> str:
    rows = [
        (r["topic"], r["partition"], r["current_offset"], r["new_offset"]) for r in document["plan"]
    ]
    table = render_table(("topic", "partition", "current", "new"), rows)
    if document["executed"]:
        return table + f"committed the new offsets of group '{document['group']}'\n"
    return table + "dry run: nothing changed (add --execute to commit these offsets)\n"
