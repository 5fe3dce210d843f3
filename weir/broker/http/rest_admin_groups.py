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
    check_kafka,
    collection,
    int_text,
    json_response,
    not_found,
    related,
    resource,
    resource_name,
    topic_name,
)
from weir.broker.http.rest_admin_lookups import (
    KEY_TYPE_GROUP,
    coordinator,
    end_offsets,
    listed_groups,
)
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

CONSUMER_GROUP_DESCRIBE_VERSION = 0
DESCRIBE_GROUPS_VERSION = 5
OFFSET_FETCH_VERSION = 9
CONSUMER_GROUP_TYPES = ["classic", "consumer"]
DEAD = "Dead"


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
    groups, silent = await listed_groups(call, CONSUMER_GROUP_TYPES)
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


GROUPS = "/v3/clusters/{cluster_id}/consumer-groups"
GROUP = f"{GROUPS}/{{consumer_group_id}}"
ENDPOINTS = [
    Endpoint(
        "GET", GROUPS, list_groups, "Every consumer group of the cluster", tag="consumer groups"
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
]
