"""Resetting a consumer group's offsets over HTTP, as Kafka's
`kafka-consumer-groups.sh --reset-offsets` does it, through the Kafka API as the
caller: the body is read and bounded here; the partitions' log start and end (and
the offset a timestamp names) are ListOffsets asked of each partition's leader;
the plan is `weir.groupcoord.offset_reset.plan_reset`; applying it is one
OffsetCommit with no member and generation -1 (the admin client's commit), which
the coordinator accepts only while the group has no members."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from weir.broker.http.rest_admin_base import (
    INT32_MAX,
    AdminCall,
    RestError,
    bad_request,
    bounded_int,
    check_kafka,
    not_found,
    retry_later,
    topic_name,
)
from weir.broker.http.rest_admin_topics import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    LIST_OFFSETS_VERSION,
    NO_LEADER,
    list_offsets_body,
    metadata,
)
from weir.format.errors import ErrorCode
from weir.groupcoord.offset_reset import (
    OFFSET,
    SHIFT_BY,
    STRATEGIES,
    TIMESTAMP,
    LogBounds,
    Partition,
    PlannedOffset,
)
from weir.wire.protocol import ApiKey

INT64_MAX = 2**63 - 1
OFFSET_COMMIT_VERSION = 9
RESET_TOPICS_MAX = 1_000
RESET_PARTITIONS_MAX = 100_000
BODY_FIELDS = ("strategy", "timestamp_ms", "shift_by", "offset", "topics", "dry_run")
# A group whose offsets may be reset: no member (Kafka's rule).
INACTIVE_STATES = ("EMPTY", "DEAD")
# The answers an OffsetCommit without a member gets from a group with members.
ACTIVE_GROUP_ERRORS = (
    ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.STALE_MEMBER_EPOCH,
    ErrorCode.REBALANCE_IN_PROGRESS,
)


@dataclass(frozen=True)
class ResetRequest:
    strategy: str
    value: int | None  # the shift or the offset
    timestamp_ms: int | None
    # None: every partition the group has an offset on; else topic -> partitions
    # (None: all of the topic's).
    topics: dict[str, list[int] | None] | None
    dry_run: bool


def reset_request(document: Mapping[str, Any]) -> ResetRequest:
    unknown = sorted(set(document) - set(BODY_FIELDS))
    if unknown:
        raise bad_request(f"unknown field(s) {unknown}; the fields are {', '.join(BODY_FIELDS)}")
    strategy = document.get("strategy")
    if strategy not in STRATEGIES:
        raise bad_request(f"strategy must be one of {', '.join(STRATEGIES)}")
    value: int | None = None
    timestamp_ms: int | None = None
    if strategy == TIMESTAMP:
        timestamp_ms = bounded_int(document.get("timestamp_ms"), "timestamp_ms", 0, INT64_MAX)
    elif strategy == SHIFT_BY:
        value = bounded_int(document.get("shift_by"), "shift_by", -INT64_MAX, INT64_MAX)
    elif strategy == OFFSET:
        value = bounded_int(document.get("offset"), "offset", 0, INT64_MAX)
    dry_run = document.get("dry_run", True)
    if not isinstance(dry_run, bool):
        raise bad_request("dry_run must be true or false")
    return ResetRequest(strategy, value, timestamp_ms, _topics(document.get("topics")), dry_run)


def _topics(value: object) -> dict[str, list[int] | None] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not 0 < len(value) <= RESET_TOPICS_MAX:
        raise bad_request(f"topics must be a list of 1 to {RESET_TOPICS_MAX} topics")
    topics: dict[str, list[int] | None] = {}
    count = 0
    for entry in value:
        if not isinstance(entry, dict) or set(entry) - {"topic_name", "partition_ids"}:
            raise bad_request("each of topics is {topic_name, partition_ids (optional)}")
        name = topic_name(entry.get("topic_name"), "topics[].topic_name")
        ids = entry.get("partition_ids")
        if ids is None:
            topics[name] = None
            continue
        if not isinstance(ids, list) or not ids:
            raise bad_request("partition_ids must be a non-empty list of partition ids")
        count += len(ids)
        if count > RESET_PARTITIONS_MAX:
            raise bad_request(f"at most {RESET_PARTITIONS_MAX} partitions")
        topics[name] = sorted({bounded_int(i, "partition_ids[]", 0, INT32_MAX) for i in ids})
    return topics


async def reset_partitions(
    call: AdminCall, request: ResetRequest, committed: Iterable[Partition]
) -> tuple[list[Partition], dict[Partition, int]]:
    """The partitions to reset (Kafka's: those the group has offsets on, or every
    named partition of the named topics), and each one's leader."""
    if request.topics is None:
        wanted = sorted(set(committed))
        topics = sorted({t for t, _ in wanted})
    else:
        topics = sorted(request.topics)
    leaders: dict[Partition, int] = {}
    if topics:
        response = await metadata(call, topics)
        for topic in response.topics:
            if request.topics is not None:
                if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise not_found(f"no topic {topic.name!r}")
                check_kafka(topic.error_code, None, f"describe topic {topic.name!r}")
            for partition in topic.partitions:
                leaders[(topic.name, partition.partition_index)] = partition.leader_id
    if request.topics is None:
        return wanted, leaders
    partitions = []
    for name, ids in sorted(request.topics.items()):
        known = sorted(p for t, p in leaders if t == name)
        for partition in known if ids is None else ids:
            if (name, partition) not in leaders:
                raise not_found(f"topic {name!r} has no partition {partition}")
            partitions.append((name, partition))
    return partitions, leaders


async def log_bounds(
    call: AdminCall,
    partitions: list[Partition],
    leaders: Mapping[Partition, int],
    timestamp_ms: int | None,
) -> dict[Partition, LogBounds]:
    """Each partition's log start and end, and the offset `timestamp_ms` names,
    asked of its leader; 503 when a partition has none or it did not answer."""
    by_leader: dict[int, list[Partition]] = {}
    for key in partitions:
        leader = leaders.get(key, NO_LEADER)
        if leader == NO_LEADER:
            raise retry_later(f"{key[0]}-{key[1]} has no leader now")
        by_leader.setdefault(leader, []).append(key)
    looked_up: dict[int, dict[Partition, int]] = {}
    kinds = [EARLIEST_TIMESTAMP, LATEST_TIMESTAMP]
    if timestamp_ms is not None:
        kinds.append(timestamp_ms)
    for kind in kinds:
        looked_up[kind] = {}
        for leader, keys in sorted(by_leader.items()):
            looked_up[kind].update(await _list_offsets(call, leader, keys, kind))
    bounds = {}
    for key in partitions:
        start = looked_up[EARLIEST_TIMESTAMP].get(key)
        end = looked_up[LATEST_TIMESTAMP].get(key)
        if start is None or end is None:
            raise retry_later(f"the leader of {key[0]}-{key[1]} did not answer its offsets")
        at = None if timestamp_ms is None else looked_up[timestamp_ms].get(key)
        bounds[key] = LogBounds(start, end, at if at is not None and at >= 0 else None)
    return bounds


async def _list_offsets(
    call: AdminCall, leader: int, keys: list[Partition], timestamp: int
) -> dict[Partition, int]:
    body = list_offsets_body(keys, timestamp)
    response = await call.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, node_id=leader)
    found = {}
    for topic in response.topics:
        for part in topic.partitions:
            if part.error_code in (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ):
                check_kafka(part.error_code, None, f"list the offsets of {topic.name}")
            if part.error_code == ErrorCode.NONE:
                found[(topic.name, part.partition_index)] = part.offset
    return found


async def commit_planned(
    call: AdminCall, group_id: str, node_id: int, planned: list[PlannedOffset]
) -> None:
    """OffsetCommit of the plan as the admin client does (no member, generation -1):
    409 when the group has members (they would overwrite it)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for offset in planned:
        topics.setdefault(offset.topic, []).append(
            {
                "partition_index": offset.partition,
                "committed_offset": offset.new_offset,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        )
    response = await call.send(
        ApiKey.OFFSET_COMMIT,
        OFFSET_COMMIT_VERSION,
        {
            "group_id": group_id,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": t, "partitions": p} for t, p in sorted(topics.items())],
        },
        node_id=node_id,
    )
    for topic in response.topics:
        for part in topic.partitions:
            if part.error_code in ACTIVE_GROUP_ERRORS:
                raise active_group(group_id, "with members")
            check_kafka(
                part.error_code,
                None,
                f"commit the offset of {topic.name}-{part.partition_index} for {group_id!r}",
            )


def active_group(group_id: str, state: str) -> RestError:
    return RestError(
        409,
        f"the offsets of group {group_id!r} can only be reset while it is inactive "
        f"(no members), but it is {state}: stop its consumers first",
    )


def planned_rows(planned: list[PlannedOffset]) -> list[dict[str, Any]]:
    return [
        {
            "topic_name": p.topic,
            "partition_id": p.partition,
            "current_offset": p.current_offset,
            "new_offset": p.new_offset,
            "log_start_offset": p.log_start_offset,
            "log_end_offset": p.log_end_offset,
        }
        for p in planned
    ]
