"""Share groups (Weir's queues) in Weir's own shape under /v3 (Confluent defines
none), as `weir queue describe|purge` shows and does them:

- listed by every broker (ListGroups, type share);
- described by their coordinator: state, members and their partitions
  (ShareGroupDescribe), and per partition the share-partition start offset and
  `queue_depth`, the records the group has not finished with
  (DescribeShareGroupOffsets' lag), with the partition's end offset; a partition
  led by the broker answering also shows its records by state (`records`:
  available, acquired, delayed, archived, dead letters pending and written, the
  oldest record's age, the delivery-count histogram; `weir.broker.http.queue_views`),
  null elsewhere, where `stored_records` has what the share coordinator stores
  (`weir.broker.http.share_stored_view`);
- purged (`POST .../share-groups/{g}/purge`): every partition's start offset
  moves to its end offset (AlterShareGroupOffsets), so nothing produced before is
  delivered; the group must have no members (409 otherwise), `dry_run` shows the
  plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from weir.broker.coordinators.share_service import ShareService
from weir.broker.http.queue_views import queue_rows
from weir.broker.http.rest_admin_base import (
    AdminCall,
    Endpoint,
    Param,
    RestError,
    bad_request,
    check_kafka,
    collection,
    json_response,
    not_found,
    related,
    resource,
    resource_name,
    retry_later,
    topic_name,
)
from weir.broker.http.rest_admin_lookups import (
    KEY_TYPE_GROUP,
    coordinator,
    end_offsets,
    listed_groups,
)
from weir.broker.http.rest_admin_paging import (
    cut_page,
    page_metadata,
    page_request,
    paging_query,
)
from weir.broker.http.rest_admin_redrive import configured_dead_letter_topic
from weir.broker.http.rest_admin_topics import metadata
from weir.broker.http.share_stored_view import stored_records
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

SHARE_GROUP_DESCRIBE_VERSION = 1
DESCRIBE_SHARE_GROUP_OFFSETS_VERSION = 1
ALTER_SHARE_GROUP_OFFSETS_VERSION = 0
# Above this many partitions in the cluster, a share group's offsets are asked of
# only the topics it is known to use (see _topics_to_ask).
SHARE_SCAN_PARTITIONS_MAX = 1_000
RECORD_FIELDS = (
    "available",
    "acquired",
    "delayed",
    "acknowledged",
    "archived",
    "dead_letter_pending",
    "dead_lettered",
    "oldest_unacknowledged_age_ms",
    "delivery_counts",
)


async def _described(call: AdminCall, group_id: str) -> tuple[int, Any]:
    node_id = await coordinator(call, group_id, KEY_TYPE_GROUP, f"share group {group_id!r}")
    response = await call.send(
        ApiKey.SHARE_GROUP_DESCRIBE,
        SHARE_GROUP_DESCRIBE_VERSION,
        {"group_ids": [group_id], "include_authorized_operations": False},
        node_id=node_id,
    )
    described = response.groups[0]
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        # No member ever joined (an SQS queue's group, whose receivers are not
        # members): a group all the same if it has share state (`get_share_group`).
        return node_id, _MEMBERLESS
    check_kafka(described.error_code, described.error_message, f"describe share group {group_id!r}")
    return node_id, described


@dataclass(frozen=True)
class _Memberless:
    """What ShareGroupDescribe would say of a group no member ever joined."""

    members: tuple[Any, ...] = ()
    group_state: str = "Empty"
    group_epoch: int = 0


_MEMBERLESS = _Memberless()


async def _describe_offsets(
    call: AdminCall, group_id: str, node_id: int, topics: list[dict[str, Any]] | None
) -> Any:
    response = await call.send(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        DESCRIBE_SHARE_GROUP_OFFSETS_VERSION,
        {"groups": [{"group_id": group_id, "topics": topics}]},
        node_id=node_id,
    )
    group = response.groups[0]
    check_kafka(group.error_code, group.error_message, f"read the offsets of {group_id!r}")
    return group


async def _topics_to_ask(
    call: AdminCall, group_id: str, node_id: int, described: Any
) -> list[dict[str, Any]]:
    """The partitions to ask the group's offsets of. Asked with no topics, the
    coordinator lists only the states its own `__share_group_state` partitions hold
    (in a cluster, not all of them): so every non-internal topic's partitions are
    asked when there are at most SHARE_SCAN_PARTITIONS_MAX of them, else those the
    coordinator lists, the members' topics and the query's `topic_name`s."""
    response = await metadata(call, None)
    partitions = {
        t.name: sorted(p.partition_index for p in t.partitions)
        for t in response.topics
        if t.error_code == ErrorCode.NONE and not t.is_internal
    }
    if sum(len(p) for p in partitions.values()) > SHARE_SCAN_PARTITIONS_MAX:
        listed = await _describe_offsets(call, group_id, node_id, None)
        names = {t.topic_name for t in listed.topics}
        names |= {n for m in described.members for n in m.subscribed_topic_names}
        names |= {topic_name(t) for t in call.request.query_params.getlist("topic_name")}
        partitions = {n: p for n, p in partitions.items() if n in names}
    return [{"topic_name": n, "partitions": p} for n, p in sorted(partitions.items())]


async def _offsets(
    call: AdminCall, group_id: str, node_id: int, described: Any
) -> list[dict[str, Any]]:
    """Per partition the group has state for: its start offset and queue depth (None
    when the coordinator holds no replica of the partition to know its end)."""
    topics = await _topics_to_ask(call, group_id, node_id, described)
    group = await _describe_offsets(call, group_id, node_id, topics)
    rows = [
        {
            "topic_name": topic.topic_name,
            "partition_id": part.partition_index,
            "start_offset": part.start_offset,
            "queue_depth": part.lag if part.lag >= 0 else None,
        }
        for topic in group.topics
        for part in topic.partitions
        if part.error_code == ErrorCode.NONE and part.start_offset >= 0
    ]
    return sorted(rows, key=lambda r: (r["topic_name"], r["partition_id"]))


def _local_records(call: AdminCall, group_id: str) -> dict[tuple[str, int], dict[str, Any]]:
    service = call.broker.shares
    if not isinstance(service, ShareService):
        return {}
    return {
        (row["topic"], row["partition"]): {name: row[name] for name in RECORD_FIELDS}
        for row in queue_rows(service, group_id)
    }


def _group_id(call: AdminCall) -> str:
    return resource_name(call.path("share_group_id"), "share_group_id")


async def list_share_groups(call: AdminCall) -> Response:
    paging = page_request(call, SHARE_GROUP_SORT_FIELDS)
    groups, silent = await listed_groups(call, ["share"])
    data = [
        resource(
            "WeirShareGroup",
            call.url("share-groups", g.group_id),
            cluster_id=call.cluster_id,
            share_group_id=g.group_id,
            state=g.state.upper(),
            coordinator=related(call.url("brokers", g.coordinator)),
        )
        for g in groups
    ]
    if paging is None:
        document = collection("WeirShareGroupList", call.url("share-groups"), data)
    else:
        totals = _local_totals(call)
        coordinators = {g.group_id: g.coordinator for g in groups}
        for row in data:
            row["records"] = totals.get(row["share_group_id"], dict.fromkeys(TOTAL_FIELDS, 0))
        sort_keys = {
            field: lambda row, field=field: _sort_value(row, field, coordinators)
            for field in SHARE_GROUP_SORT_FIELDS
        }
        page, total = cut_page(data, paging, lambda row: row["share_group_id"], sort_keys)
        document = collection("WeirShareGroupList", call.url("share-groups"), page)
        document["metadata"].update(page_metadata(call, paging, total))
        document["records_from_broker"] = call.broker.config.node_id
    document["brokers_not_answering"] = silent
    return json_response(document)


# The records totals a paged list shows per group (the share partitions led by the
# broker answering), and the fields it sorts by.
TOTAL_FIELDS = ("available", "acquired", "delayed", "dead_lettered", "partitions_led_here")
SHARE_GROUP_SORT_FIELDS = ("share_group_id", "state", "coordinator", *TOTAL_FIELDS)


def _local_totals(call: AdminCall) -> dict[str, dict[str, int]]:
    service = call.broker.shares
    if not isinstance(service, ShareService):
        return {}
    totals: dict[str, dict[str, int]] = {}
    for row in queue_rows(service):
        group = totals.setdefault(row["group"], dict.fromkeys(TOTAL_FIELDS, 0))
        for name in TOTAL_FIELDS[:-1]:
            group[name] += row[name]
        group["partitions_led_here"] += 1
    return totals


def _sort_value(row: dict[str, Any], field: str, coordinators: dict[str, int]) -> Any:
    if field == "coordinator":
        return coordinators[row["share_group_id"]]
    if field in TOTAL_FIELDS:
        return row["records"][field]
    return row[field]


async def get_share_group(call: AdminCall) -> Response:
    group_id = _group_id(call)
    node_id, described = await _described(call, group_id)
    partitions = await _offsets(call, group_id, node_id, described)
    if described is _MEMBERLESS and not partitions:
        raise not_found(f"no share group {group_id!r}")
    ends = await end_offsets(call, [(r["topic_name"], r["partition_id"]) for r in partitions])
    local = _local_records(call, group_id)
    for row in partitions:
        key = (row["topic_name"], row["partition_id"])
        row["end_offset"] = ends.get(key)
        row["leader"] = call.gateway.leader_of(*key)
        row["records"] = local.get(key)
        row["stored_records"] = (
            None
            if row["records"] is not None or row["leader"] is None
            else await stored_records(call.broker, group_id, *key, row["end_offset"])
        )
    members = [
        {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "assignments": [
                {"topic_name": tp.topic_name, "partition_id": p}
                for tp in sorted(m.assignment.topic_partitions, key=lambda tp: tp.topic_name)
                for p in sorted(tp.partitions)
            ],
        }
        for m in sorted(described.members, key=lambda m: m.member_id)
    ]
    return json_response(
        resource(
            "WeirShareGroup",
            call.url("share-groups", group_id),
            cluster_id=call.cluster_id,
            share_group_id=group_id,
            state=described.group_state.upper(),
            group_epoch=described.group_epoch,
            coordinator=related(call.url("brokers", node_id)),
            records_from_broker=call.broker.config.node_id,
            dead_letter_topic=await configured_dead_letter_topic(call, group_id),
            members=members,
            partitions=partitions,
            queue_depth=None
            if any(r["queue_depth"] is None for r in partitions)
            else sum(r["queue_depth"] for r in partitions),
        )
    )


async def purge_share_group(call: AdminCall) -> Response:
    group_id = _group_id(call)
    document = (
        await call.json_body()
        if call.request.headers.get("content-length") not in (None, "0")
        else {}
    )
    topic = document.get("topic_name")
    if topic is not None:
        topic = topic_name(topic)
    dry_run = document.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise bad_request("dry_run must be true or false")
    node_id, described = await _described(call, group_id)
    if described.members:
        raise RestError(
            409, f"share group {group_id!r} has {len(described.members)} members: stop them first"
        )
    rows = await _offsets(call, group_id, node_id, described)
    rows = [r for r in rows if topic in (None, r["topic_name"])]
    if topic is not None and not rows:
        raise not_found(f"share group {group_id!r} has no state for topic {topic!r}")
    keys = [(r["topic_name"], r["partition_id"]) for r in rows]
    ends = await end_offsets(call, keys)
    missing = sorted(set(keys) - set(ends))
    if missing:
        raise retry_later(f"the end offsets of {missing} are unknown (no leader?); retry")
    plan = [{**r, "new_start_offset": ends[(r["topic_name"], r["partition_id"])]} for r in rows]
    if not dry_run and plan:
        await _alter(call, group_id, node_id, plan)
    return json_response(
        resource(
            "WeirShareGroupPurge",
            call.url("share-groups", group_id, "purge"),
            cluster_id=call.cluster_id,
            share_group_id=group_id,
            dry_run=dry_run,
            partitions=[
                {
                    k: p[k]
                    for k in ("topic_name", "partition_id", "start_offset", "new_start_offset")
                }
                for p in plan
            ],
        )
    )


async def _alter(call: AdminCall, group_id: str, node_id: int, plan: list[dict[str, Any]]) -> None:
    topics = sorted({p["topic_name"] for p in plan})
    response = await call.send(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        ALTER_SHARE_GROUP_OFFSETS_VERSION,
        {
            "group_id": group_id,
            "topics": [
                {
                    "topic_name": name,
                    "partitions": [
                        {
                            "partition_index": p["partition_id"],
                            "start_offset": p["new_start_offset"],
                        }
                        for p in plan
                        if p["topic_name"] == name
                    ],
                }
                for name in topics
            ],
        },
        node_id=node_id,
    )
    check_kafka(response.error_code, response.error_message, f"purge share group {group_id!r}")
    for topic in response.responses:
        for part in topic.partitions:
            check_kafka(part.error_code, part.error_message, f"purge share group {group_id!r}")


SHARE_GROUPS = "/v3/clusters/{cluster_id}/share-groups"
SHARE_GROUP = f"{SHARE_GROUPS}/{{share_group_id}}"
ENDPOINTS = [
    Endpoint(
        "GET",
        SHARE_GROUPS,
        list_share_groups,
        "Every share group (queue) of the cluster; paged, sorted and filtered with q, sort "
        "(share_group_id, state, coordinator, or a records total: available, acquired, "
        "delayed, dead_lettered, partitions_led_here), order, page, page_size, each row then "
        "with its records totals over the share partitions the broker answering leads",
        query=paging_query(SHARE_GROUP_SORT_FIELDS),
        tag="queues",
    ),
    Endpoint(
        "GET",
        SHARE_GROUP,
        get_share_group,
        "One share group, with its queue depth",
        query=(
            Param(
                "topic_name",
                "A topic the group consumes (repeatable; needed only in a cluster of more "
                f"than {SHARE_SCAN_PARTITIONS_MAX} partitions, for a topic the group has no "
                "members for now)",
            ),
        ),
        tag="queues",
    ),
    Endpoint(
        "POST",
        f"{SHARE_GROUP}/purge",
        purge_share_group,
        "Purge a share group: skip every record produced so far",
        body={
            "type": "object",
            "properties": {"topic_name": {"type": "string"}, "dry_run": {"type": "boolean"}},
        },
        body_required=False,
        tag="queues",
    ),
]
