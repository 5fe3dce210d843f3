"""The consumer group list's own part of the paging contract (rest_admin_paging:
`q`, `sort`, `order`, `page`, `page_size`): its rows, its sort fields and the
fields looked up per group.

What ListGroups answers (id, type, protocol type, state, coordinator) is known of
every group at once, so filtering and sorting by it costs nothing. A row's member
count and total lag cost lookups (DescribeGroups or ConsumerGroupDescribe,
OffsetFetch, ListOffsets), so they are looked up for the page's rows only, in
batches (one request per coordinator or per partition leader, however many
groups); sorting by them looks them up, in the same batches, for every group that
matches `q`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from weir.broker.http.kafka_gateway import GatewayError
from weir.broker.http.rest_admin_base import AdminCall
from weir.broker.http.rest_admin_lookups import ListedGroup, end_offsets
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

# Fields known from ListGroups (free to sort by), and those looked up per group.
LISTED_FIELDS = ("consumer_group_id", "type", "protocol_type", "state", "coordinator_id")
LOOKED_UP_FIELDS = ("members_count", "total_lag")
SORT_FIELDS = LISTED_FIELDS + LOOKED_UP_FIELDS
DESCRIBE_GROUPS_VERSION = 5
CONSUMER_GROUP_DESCRIBE_VERSION = 0
OFFSET_FETCH_VERSION = 9


def group_id_of(row: dict[str, Any]) -> str:
    return str(row["consumer_group_id"])


def _field(name: str) -> Callable[[dict[str, Any]], Any]:
    """A row's value in field `name` (None while a looked-up field is unknown)."""
    return lambda row: row.get(name)


SORT_KEYS = {name: _field(name) for name in SORT_FIELDS}


def listed_row(group: ListedGroup) -> dict[str, Any]:
    return {
        "consumer_group_id": group.group_id,
        "type": group.group_type,
        "protocol_type": group.protocol_type,
        "state": group.state.upper(),
        "coordinator_id": group.coordinator,
    }


async def add_looked_up_fields(call: AdminCall, rows: Sequence[dict[str, Any]]) -> None:
    """Sets each row's `members_count` and `total_lag` (None when not known: a
    coordinator or a leader not answering, a group the caller may not describe)."""
    by_coordinator: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        row["members_count"] = None
        row["total_lag"] = None
        by_coordinator.setdefault(int(row["coordinator_id"]), []).append(row)
    committed: dict[str, dict[tuple[str, int], int]] = {}
    for node_id, group_rows in sorted(by_coordinator.items()):
        await _count_members(call, node_id, group_rows)
        committed.update(
            await _committed(call, node_id, [r["consumer_group_id"] for r in group_rows])
        )
    ends = await end_offsets(call, {tp for offsets in committed.values() for tp in offsets})
    for row in rows:
        offsets = committed.get(row["consumer_group_id"])
        if offsets is None:
            continue
        lags = [max(0, ends[tp] - offset) for tp, offset in offsets.items() if tp in ends]
        row["total_lag"] = sum(lags)


async def _count_members(call: AdminCall, node_id: int, rows: list[dict[str, Any]]) -> None:
    modern = [r for r in rows if r["type"] == "consumer"]
    classic = [r for r in rows if r["type"] != "consumer"]
    try:
        if modern:
            response = await call.send(
                ApiKey.CONSUMER_GROUP_DESCRIBE,
                CONSUMER_GROUP_DESCRIBE_VERSION,
                {
                    "group_ids": [r["consumer_group_id"] for r in modern],
                    "include_authorized_operations": False,
                },
                node_id=node_id,
            )
            _set_counts(modern, response.groups)
        if classic:
            response = await call.send(
                ApiKey.DESCRIBE_GROUPS,
                DESCRIBE_GROUPS_VERSION,
                {
                    "groups": [r["consumer_group_id"] for r in classic],
                    "include_authorized_operations": False,
                },
                node_id=node_id,
            )
            _set_counts(classic, response.groups)
    except GatewayError:
        return


def _set_counts(rows: list[dict[str, Any]], described: Sequence[Any]) -> None:
    counts = {g.group_id: len(g.members) for g in described if g.error_code == ErrorCode.NONE}
    for row in rows:
        row["members_count"] = counts.get(row["consumer_group_id"])


async def _committed(
    call: AdminCall, node_id: int, group_ids: list[str]
) -> dict[str, dict[tuple[str, int], int]]:
    try:
        response = await call.send(
            ApiKey.OFFSET_FETCH,
            OFFSET_FETCH_VERSION,
            {
                "groups": [
                    {"group_id": g, "member_id": None, "member_epoch": -1, "topics": None}
                    for g in group_ids
                ],
                "require_stable": False,
            },
            node_id=node_id,
        )
    except GatewayError:
        return {}
    return {
        group.group_id: {
            (topic.name, part.partition_index): part.committed_offset
            for topic in group.topics
            for part in topic.partitions
            if part.error_code == ErrorCode.NONE and part.committed_offset >= 0
        }
        for group in response.groups
        if group.error_code == ErrorCode.NONE
    }
