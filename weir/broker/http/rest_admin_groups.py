"""Consumer groups in Confluent REST Proxy v3's shapes (`KafkaConsumerGroup`,
`KafkaConsumer`, `KafkaConsumerLag`, `KafkaConsumerGroupLagSummary`), classic and
KIP-848 groups alike: listed by every broker (ListGroups), described by their
coordinator (ConsumerGroupDescribe, else DescribeGroups), their committed offsets
(OffsetFetch) set against each partition's high watermark (ListOffsets on its
leader): lag = high watermark - committed offset, at least 0."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from weir.broker.http.group_views import decode_consumer_assignment
from weir.broker.http.rest_admin_base import (
    AdminCall,
    Endpoint,
    RestError,
    bad_request,
    check_kafka,
    collection,
    int_text,
    json_response,
    no_content,
    not_found,
    related,
    resource,
    resource_name,
    topic_name,
)
from weir.broker.http.rest_admin_group_list import (
    LOOKED_UP_FIELDS,
    SORT_FIELDS,
    SORT_KEYS,
    add_looked_up_fields,
    group_id_of,
    listed_row,
)
from weir.broker.http.rest_admin_group_reset import (
    INACTIVE_STATES,
    active_group,
    commit_planned,
    log_bounds,
    planned_rows,
    reset_partitions,
    reset_request,
)
from weir.broker.http.rest_admin_lookups import (
    KEY_TYPE_GROUP,
    ListedGroup,
    coordinator,
    end_offsets,
    listed_groups,
)
from weir.broker.http.rest_admin_paging import (
    PageRequest,
    cut_page,
    page_metadata,
    page_request,
    paging_query,
)
from weir.format.errors import ErrorCode
from weir.groupcoord.offset_reset import STRATEGIES, ResetRefusedError, plan_reset
from weir.wire.protocol import ApiKey

CONSUMER_GROUP_DESCRIBE_VERSION = 0
DESCRIBE_GROUPS_VERSION = 5
OFFSET_FETCH_VERSION = 9
CONSUMER_GROUP_TYPES = ["classic", "consumer"]
DEAD = "Dead"
DELETE_GROUPS_VERSION = 2
SHARE_GROUP_DESCRIBE_VERSION = 1


@dataclass
class Member:
    consumer_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    assignments: list[tuple[str, int]]


@dataclass
class Group:
    group_id: str
    group_type: str
    state: str
    assignor: str
    protocol_type: str
    coordinator: int
    members: list[Member]


async def describe_group(call: AdminCall, group_id: str) -> Group:
    node_id = await coordinator(call, group_id, KEY_TYPE_GROUP, f"group {group_id!r}")
    response = await call.send(
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        CONSUMER_GROUP_DESCRIBE_VERSION,
        {"group_ids": [group_id], "include_authorized_operations": False},
        node_id=node_id,
    )
    described = response.groups[0]
    if described.error_code == ErrorCode.NONE:
        return Group(
            group_id,
            "consumer",
            described.group_state,
            described.assignor_name,
            "consumer",
            node_id,
            [
                Member(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    sorted(
                        (tp.topic_name, p)
                        for tp in m.assignment.topic_partitions
                        for p in tp.partitions
                    ),
                )
                for m in described.members
            ],
        )
    if described.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
        check_kafka(described.error_code, described.error_message, f"describe group {group_id!r}")
    return await _describe_classic(call, group_id, node_id)


async def _describe_classic(call: AdminCall, group_id: str, node_id: int) -> Group:
    response = await call.send(
        ApiKey.DESCRIBE_GROUPS,
        DESCRIBE_GROUPS_VERSION,
        {"groups": [group_id], "include_authorized_operations": False},
        node_id=node_id,
    )
    described = response.groups[0]
    check_kafka(described.error_code, None, f"describe group {group_id!r}")
    if described.group_state == DEAD or described.protocol_type == "share":
        raise not_found(f"no consumer group {group_id!r}")
    members = []
    for m in described.members:
        decoded = (
            decode_consumer_assignment(bytes(m.member_assignment or b""))
            if described.protocol_type == "consumer"
            else None
        )
        assignments = sorted((a["topic"], p) for a in decoded or [] for p in a["partitions"])
        members.append(
            Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, assignments)
        )
    return Group(
        group_id,
        "classic",
        described.group_state,
        described.protocol_data,
        described.protocol_type,
        node_id,
        members,
    )


def group_resource(call: AdminCall, group: Group) -> dict[str, Any]:
    base = ("consumer-groups", group.group_id)
    return resource(
        "KafkaConsumerGroup",
        call.url(*base),
        cluster_id=call.cluster_id,
        consumer_group_id=group.group_id,
        type=group.group_type,
        is_simple=group.protocol_type == "" and not group.members,
        partition_assignor=group.assignor,
        state=group.state.upper(),
        coordinator=related(call.url("brokers", group.coordinator)),
        consumers=related(call.url(*base, "consumers")),
        lag_summary=related(call.url(*base, "lag-summary")),
    )


def consumer_resource(call: AdminCall, group_id: str, member: Member) -> dict[str, Any]:
    return resource(
        "KafkaConsumer",
        call.url("consumer-groups", group_id, "consumers", member.consumer_id),
        cluster_id=call.cluster_id,
        consumer_group_id=group_id,
        consumer_id=member.consumer_id,
        instance_id=member.instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        assignments=[{"topic_name": t, "partition_id": p} for t, p in member.assignments],
    )


async def list_groups(call: AdminCall) -> Response:
    """Every group, in Confluent's shape; with any paging parameter, one page of
    them (`rest_admin_paging`, `rest_admin_group_list`), each row with its member
    count and total lag."""
    paging = page_request(call, SORT_FIELDS)
    groups, silent = await listed_groups(call, CONSUMER_GROUP_TYPES)
    if paging is not None:
        return await _list_groups_page(call, groups, silent, paging)
    data = [
        resource(
            "KafkaConsumerGroup",
            call.url("consumer-groups", g.group_id),
            cluster_id=call.cluster_id,
            consumer_group_id=g.group_id,
            type=g.group_type,
            state=g.state.upper(),
            coordinator=related(call.url("brokers", g.coordinator)),
            consumers=related(call.url("consumer-groups", g.group_id, "consumers")),
            lag_summary=related(call.url("consumer-groups", g.group_id, "lag-summary")),
        )
        for g in groups
    ]
    document = collection("KafkaConsumerGroupList", call.url("consumer-groups"), data)
    document["brokers_not_answering"] = silent
    return json_response(document)


async def _list_groups_page(
    call: AdminCall, groups: list[ListedGroup], silent: list[int], paging: PageRequest
) -> Response:
    rows = [listed_row(g) for g in groups]
    if paging.sort in LOOKED_UP_FIELDS:
        await add_looked_up_fields(call, [r for r in rows if paging.matches(group_id_of(r))])
        page, total = cut_page(rows, paging, group_id_of, SORT_KEYS)
    else:
        page, total = cut_page(rows, paging, group_id_of, SORT_KEYS)
        await add_looked_up_fields(call, page)
    data = [
        resource(
            "KafkaConsumerGroup",
            call.url("consumer-groups", row["consumer_group_id"]),
            cluster_id=call.cluster_id,
            **row,
            coordinator=related(call.url("brokers", row["coordinator_id"])),
            consumers=related(call.url("consumer-groups", row["consumer_group_id"], "consumers")),
            lag_summary=related(
                call.url("consumer-groups", row["consumer_group_id"], "lag-summary")
            ),
        )
        for row in page
    ]
    document = collection("KafkaConsumerGroupList", call.url("consumer-groups"), data)
    document["metadata"].update(page_metadata(call, paging, total))
    document["brokers_not_answering"] = silent
    return json_response(document)


def _group_id(call: AdminCall) -> str:
    return resource_name(call.path("consumer_group_id"), "consumer_group_id")


async def get_group(call: AdminCall) -> Response:
    return json_response(group_resource(call, await describe_group(call, _group_id(call))))


async def list_consumers(call: AdminCall) -> Response:
    group = await describe_group(call, _group_id(call))
    return json_response(
        collection(
            "KafkaConsumerList",
            call.url("consumer-groups", group.group_id, "consumers"),
            [consumer_resource(call, group.group_id, m) for m in group.members],
        )
    )


async def get_consumer(call: AdminCall) -> Response:
    group = await describe_group(call, _group_id(call))
    consumer_id = call.path("consumer_id")
    for member in group.members:
        if member.consumer_id == consumer_id:
            return json_response(consumer_resource(call, group.group_id, member))
    raise not_found(f"group {group.group_id!r} has no consumer {consumer_id!r}")


async def committed_offsets(call: AdminCall, group: Group) -> dict[tuple[str, int], int]:
    response = await call.send(
        ApiKey.OFFSET_FETCH,
        OFFSET_FETCH_VERSION,
        {
            "groups": [
                {"group_id": group.group_id, "member_id": None, "member_epoch": -1, "topics": None}
            ],
            "require_stable": False,
        },
        node_id=group.coordinator,
    )
    fetched = response.groups[0]
    check_kafka(fetched.error_code, None, f"read the offsets of group {group.group_id!r}")
    return {
        (topic.name, part.partition_index): part.committed_offset
        for topic in fetched.topics
        for part in topic.partitions
        if part.error_code == ErrorCode.NONE and part.committed_offset >= 0
    }


async def group_lags(call: AdminCall) -> tuple[Group, list[dict[str, Any]]]:
    group = await describe_group(call, _group_id(call))
    committed = await committed_offsets(call, group)
    ends = await end_offsets(call, committed)
    owners = {tp: m for m in group.members for tp in m.assignments}
    lags = []
    for (topic, partition), offset in sorted(committed.items()):
        end = ends.get((topic, partition))
        owner = owners.get((topic, partition))
        lags.append(
            resource(
                "KafkaConsumerLag",
                call.url("consumer-groups", group.group_id, "lags", topic, "partitions", partition),
                cluster_id=call.cluster_id,
                consumer_group_id=group.group_id,
                topic_name=topic,
                partition_id=partition,
                current_offset=offset,
                log_end_offset=end,
                lag=None if end is None else max(0, end - offset),
                consumer_id=owner.consumer_id if owner else "",
                instance_id=owner.instance_id if owner else None,
                client_id=owner.client_id if owner else "",
            )
        )
    return group, lags


async def list_lags(call: AdminCall) -> Response:
    group, lags = await group_lags(call)
    return json_response(
        collection(
            "KafkaConsumerLagList", call.url("consumer-groups", group.group_id, "lags"), lags
        )
    )


async def get_lag(call: AdminCall) -> Response:
    topic = topic_name(call.path("topic_name"))
    partition = int_text(call.path("partition_id"), "partition_id")
    group, lags = await group_lags(call)
    for lag in lags:
        if (lag["topic_name"], lag["partition_id"]) == (topic, partition):
            return json_response(lag)
    raise not_found(f"group {group.group_id!r} has no offset committed on {topic}-{partition}")


async def lag_summary(call: AdminCall) -> Response:
    group, lags = await group_lags(call)
    known = [lag for lag in lags if lag["lag"] is not None]
    worst = max(known, key=lambda lag: lag["lag"], default=None)
    base = ("consumer-groups", group.group_id)
    return json_response(
        resource(
            "KafkaConsumerGroupLagSummary",
            call.url(*base, "lag-summary"),
            cluster_id=call.cluster_id,
            consumer_group_id=group.group_id,
            max_lag_consumer_id=worst["consumer_id"] if worst else "",
            max_lag_instance_id=worst["instance_id"] if worst else None,
            max_lag_client_id=worst["client_id"] if worst else "",
            max_lag_topic_name=worst["topic_name"] if worst else "",
            max_lag_partition_id=worst["partition_id"] if worst else 0,
            max_lag=worst["lag"] if worst else 0,
            total_lag=sum(lag["lag"] for lag in known),
            max_lag_consumer=related(call.url(*base, "consumers", worst["consumer_id"]))
            if worst and worst["consumer_id"]
            else None,
            max_lag_partition=related(
                call.url("topics", worst["topic_name"], "partitions", worst["partition_id"])
            )
            if worst
            else None,
        )
    )


# -- reset offsets and delete --------------------------------------------------------------


async def reset_offsets(call: AdminCall) -> Response:
    """Kafka's `kafka-consumer-groups.sh --reset-offsets`: the plan (`dry_run`, the
    default, as Kafka's without --execute), or the plan applied; only while the
    group has no members. A group that does not exist gets the offsets (Kafka's)."""
    group_id = _group_id(call)
    request = reset_request(await call.json_body())
    try:
        group = await describe_group(call, group_id)
    except RestError as error:
        if error.status != 404:
            raise
        group = await _new_group(call, group_id)
    if group.state.upper() not in INACTIVE_STATES or group.members:
        raise active_group(group_id, group.state.upper())
    committed = await committed_offsets(call, group)
    partitions, leaders = await reset_partitions(call, request, committed)
    bounds = await log_bounds(call, partitions, leaders, request.timestamp_ms)
    try:
        planned = plan_reset(request.strategy, request.value, partitions, committed, bounds)
    except ResetRefusedError as exc:
        raise bad_request(str(exc)) from None
    if not request.dry_run and planned:
        await commit_planned(call, group_id, group.coordinator, planned)
    return json_response(
        resource(
            "KafkaConsumerGroupOffsetReset",
            call.url("consumer-groups", group_id, "reset-offsets"),
            cluster_id=call.cluster_id,
            consumer_group_id=group_id,
            strategy=request.strategy,
            dry_run=request.dry_run,
            offsets=planned_rows(planned),
        )
    )


async def _new_group(call: AdminCall, group_id: str) -> Group:
    """A group id no consumer group has: a new group to store offsets under, unless
    it is a share group's (a queue's offsets are not reset this way)."""
    node_id = await coordinator(call, group_id, KEY_TYPE_GROUP, f"group {group_id!r}")
    response = await call.send(
        ApiKey.SHARE_GROUP_DESCRIBE,
        SHARE_GROUP_DESCRIBE_VERSION,
        {"group_ids": [group_id], "include_authorized_operations": False},
        node_id=node_id,
    )
    if response.groups[0].error_code != ErrorCode.GROUP_ID_NOT_FOUND:
        check_kafka(response.groups[0].error_code, None, f"describe group {group_id!r}")
        raise not_found(f"{group_id!r} is a share group, not a consumer group")
    return Group(group_id, "classic", DEAD, "", "", node_id, [])


async def delete_group(call: AdminCall) -> Response:
    """DeleteGroups: the group and its committed offsets; only a group with no
    members (409 otherwise, Kafka's NON_EMPTY_GROUP)."""
    group = await describe_group(call, _group_id(call))
    response = await call.send(
        ApiKey.DELETE_GROUPS,
        DELETE_GROUPS_VERSION,
        {"groups_names": [group.group_id]},
        node_id=group.coordinator,
    )
    (result,) = response.results
    if result.error_code == ErrorCode.NON_EMPTY_GROUP:
        raise RestError(
            409, f"group {group.group_id!r} has members: stop its consumers before deleting it"
        )
    if result.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        raise not_found(f"no consumer group {group.group_id!r}")
    check_kafka(result.error_code, None, f"delete group {group.group_id!r}")
    return no_content()


RESET_OFFSETS_BODY = {
    "type": "object",
    "required": ["strategy"],
    "additionalProperties": False,
    "properties": {
        "strategy": {"type": "string", "enum": list(STRATEGIES)},
        "timestamp_ms": {
            "type": "integer",
            "minimum": 0,
            "description": "strategy timestamp: the first offset at or after it",
        },
        "shift_by": {"type": "integer", "description": "strategy shift_by: N, may be negative"},
        "offset": {"type": "integer", "minimum": 0, "description": "strategy offset"},
        "topics": {
            "type": "array",
            "description": "the topics to reset (default: every partition the group has an "
            "offset on)",
            "items": {
                "type": "object",
                "required": ["topic_name"],
                "properties": {
                    "topic_name": {"type": "string"},
                    "partition_ids": {"type": "array", "items": {"type": "integer"}},
                },
            },
        },
        "dry_run": {
            "type": "boolean",
            "default": True,
            "description": "only answer the new offsets (the default); false applies them",
        },
    },
}


LIST_PARAMS = paging_query(SORT_FIELDS)
GROUPS = "/v3/clusters/{cluster_id}/consumer-groups"
GROUP = f"{GROUPS}/{{consumer_group_id}}"
ENDPOINTS = [
    Endpoint(
        "GET",
        GROUPS,
        list_groups,
        "Every consumer group of the cluster; with any of q, sort, order, page or "
        "page_size, one page of them, each with members_count and total_lag",
        query=LIST_PARAMS,
        tag="consumer groups",
    ),
    Endpoint("GET", GROUP, get_group, "One consumer group", tag="consumer groups"),
    Endpoint(
        "GET", f"{GROUP}/consumers", list_consumers, "A group's consumers", tag="consumer groups"
    ),
    Endpoint(
        "GET",
        f"{GROUP}/consumers/{{consumer_id}}",
        get_consumer,
        "One consumer",
        tag="consumer groups",
    ),
    Endpoint(
        "GET", f"{GROUP}/lags", list_lags, "A group's lag per partition", tag="consumer groups"
    ),
    Endpoint(
        "GET",
        f"{GROUP}/lags/{{topic_name}}/partitions/{{partition_id}}",
        get_lag,
        "A group's lag on one partition",
        tag="consumer groups",
    ),
    Endpoint(
        "GET",
        f"{GROUP}/lag-summary",
        lag_summary,
        "A group's largest and total lag",
        tag="consumer groups",
    ),
    Endpoint(
        "POST",
        f"{GROUP}/reset-offsets",
        reset_offsets,
        "Reset a group's offsets (earliest, latest, a timestamp, shift by N, an offset); "
        "a dry run by default; only a group with no members",
        body=RESET_OFFSETS_BODY,
        responses={200: "The new offsets (applied unless dry_run)", 409: "The group has members"},
        tag="consumer groups",
    ),
    Endpoint(
        "DELETE",
        GROUP,
        delete_group,
        "Delete a group and its committed offsets (only a group with no members)",
        responses={204: "Deleted", 409: "The group has members"},
        tag="consumer groups",
    ),
]
