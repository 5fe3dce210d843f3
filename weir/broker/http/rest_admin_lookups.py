"""Cluster-wide lookups the admin endpoints share, each through the Kafka API as the
caller (as Kafka's admin client makes them): the live brokers, a group's or a
transactional id's coordinator, the groups every broker coordinates, and the end
offsets of partitions, each asked of its leader."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from weir.broker.http.kafka_gateway import GatewayError
from weir.broker.http.rest_admin_base import AdminCall, check_kafka
from weir.broker.http.rest_admin_clusters import describe_cluster
from weir.broker.http.rest_admin_topics import (
    LATEST_TIMESTAMP,
    LIST_OFFSETS_VERSION,
    NO_LEADER,
    list_offsets_body,
    metadata,
)
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

FIND_COORDINATOR_VERSION = 4
LIST_GROUPS_VERSION = 5
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


async def broker_ids(call: AdminCall) -> list[int]:
    response = await describe_cluster(call)
    return sorted(b.broker_id for b in response.brokers)


async def coordinator(call: AdminCall, key: str, key_type: int, what: str) -> int:
    """The node id coordinating `key` (a group id or a transactional id)."""
    response = await call.send(
        ApiKey.FIND_COORDINATOR,
        FIND_COORDINATOR_VERSION,
        {"key_type": key_type, "coordinator_keys": [key]},
    )
    found = response.coordinators[0]
    check_kafka(found.error_code, found.error_message, f"find the coordinator of {what}")
    return int(found.node_id)


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    group_type: str
    state: str
    coordinator: int
    protocol_type: str = ""


async def listed_groups(call: AdminCall, types: list[str]) -> tuple[list[ListedGroup], list[int]]:
    """Every group of `types` of the cluster, each broker listing those it
    coordinates; and the brokers that did not answer."""
    groups: dict[str, ListedGroup] = {}
    silent = []
    for node_id in await broker_ids(call):
        try:
            response = await call.send(
                ApiKey.LIST_GROUPS,
                LIST_GROUPS_VERSION,
                {"states_filter": [], "types_filter": types},
                node_id=node_id,
            )
        except GatewayError:
            silent.append(node_id)
            continue
        check_kafka(response.error_code, None, f"list the groups of broker {node_id}")
        for group in response.groups:
            groups.setdefault(
                group.group_id,
                ListedGroup(
                    group.group_id,
                    group.group_type,
                    group.group_state,
                    node_id,
                    group.protocol_type,
                ),
            )
    return [groups[g] for g in sorted(groups)], silent


async def end_offsets(
    call: AdminCall, partitions: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """The high watermark of each partition, asked of its leader (those whose
    leader did not answer are left out)."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    topics = sorted({t for t, _ in wanted})
    response = await metadata(call, topics)
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for topic in response.topics:
        if topic.error_code != ErrorCode.NONE:
            continue
        for partition in topic.partitions:
            key = (topic.name, partition.partition_index)
            if key in wanted and partition.leader_id != NO_LEADER:
                by_leader.setdefault(partition.leader_id, []).append(key)
    found: dict[tuple[str, int], int] = {}
    for leader, keys in sorted(by_leader.items()):
        body = list_offsets_body(keys, LATEST_TIMESTAMP)
        try:
            answered = await call.send(
                ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, node_id=leader
            )
        except GatewayError:
            continue
        for topic in answered.topics:
            for part in topic.partitions:
                if part.error_code == ErrorCode.NONE:
                    found[(topic.name, part.partition_index)] = part.offset
    return found
