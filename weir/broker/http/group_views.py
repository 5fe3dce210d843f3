"""What operators see of consumer groups: `GET /v1/groups`, `GET /v1/groups/{id}`
and the group metrics. Read-only views over the group service.

`GET /v1/groups` lists every group of the cluster: each broker coordinates some,
so the other live brokers are asked with ListGroups (as `weir group list` and
Kafka's admin client do). A group another broker coordinates shows its type
and state; its generation and members are null there (its coordinator's
`GET /v1/groups/{id}` has them).

The group metrics (`weir_group_*`, and kafka_exporter's `kafka_consumergroup_*`)
cover the groups this broker coordinates: each group is reported by one broker.

Lag of a partition = the partition's high watermark (what a consumer can read)
minus the group's committed offset, and 0 when the committed offset is at or past
it; a partition with no committed offset counts its whole readable log.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator
from typing import Any

import trio
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from weir.broker.broker import Broker
from weir.broker.cluster.peer_client import PeerConnection, PeerError, peer_security
from weir.broker.coordinators.group_service import GroupService
from weir.broker.metrics import GaugeSample
from weir.controller.partition_state import BrokerInfo
from weir.wire.messages.groups import ListGroupsRequest, ListGroupsResponse
from weir.wire.protocol import ApiKey

log = logging.getLogger(__name__)

CLASSIC = "classic"
CONSUMER = "consumer"
# A member's assignment decoded for display: at most this many topics (bounded).
ASSIGNMENT_TOPICS_MAX = 10_000
LIST_GROUPS_VERSION = 5  # the first with the group type
# How long `GET /v1/groups` waits for each other broker's ListGroups.
PEER_LIST_TIMEOUT_S = 2.0


def group_summaries(service: GroupService) -> list[dict[str, Any]]:
    summaries = [
        {
            "group_id": group_id,
            "type": CLASSIC,
            "state": group.state.value,
            "generation": group.generation_id,
            "members": len(group.members),
        }
        for group_id, group in service.classic.groups.items()
    ]
    summaries += [
        {
            "group_id": group_id,
            "type": CONSUMER,
            "state": group.state().value,
            "generation": group.group_epoch,
            "members": len(group.members),
        }
        for group_id, group in service.consumer_groups.groups.items()
    ]
    return sorted(summaries, key=lambda s: str(s["group_id"]))


async def cluster_group_summaries(broker: Broker, service: GroupService) -> dict[str, Any]:
    """`GET /v1/groups`: this broker's groups and every other live broker's, each
    with its coordinator; `brokers_not_answering` lists the brokers that were
    asked and did not answer (their groups are missing)."""
    own_id = broker.config.node_id
    summaries = {s["group_id"]: {**s, "coordinator": own_id} for s in group_summaries(service)}
    peers = [] if broker.cluster is None else broker.cluster.live_brokers()
    listed: dict[int, ListGroupsResponse | None] = {}
    async with trio.open_nursery() as nursery:
        for peer in peers:
            if peer.node_id != own_id:
                nursery.start_soon(_list_peer_groups, broker, peer, listed)
    for node_id, response in sorted(listed.items()):
        for group in response.groups if response is not None else []:
            summaries.setdefault(
                group.group_id,
                {
                    "group_id": group.group_id,
                    "type": group.group_type or CLASSIC,
                    "state": group.group_state,
                    "generation": None,
                    "members": None,
                    "coordinator": node_id,
                },
            )
    return {
        "groups": [summaries[group_id] for group_id in sorted(summaries)],
        "brokers_not_answering": sorted(n for n, r in listed.items() if r is None),
    }


async def _list_peer_groups(
    broker: Broker, peer: BrokerInfo, listed: dict[int, ListGroupsResponse | None]
) -> None:
    listed[peer.node_id] = None
    client_id = f"weir-http-{broker.config.node_id}"
    try:
        with trio.fail_after(PEER_LIST_TIMEOUT_S):
            connection = await PeerConnection.open(
                peer.host,
                peer.port,
                client_id,
                frame_bytes_max=broker.config.limits.frame_bytes_max,
                timeout_s=PEER_LIST_TIMEOUT_S,
                security=peer_security(broker.config),
            )
            try:
                response = await connection.request(
                    ApiKey.LIST_GROUPS,
                    LIST_GROUPS_VERSION,
                    ListGroupsRequest(),
                    PEER_LIST_TIMEOUT_S,
                )
            finally:
                await connection.aclose()
    except (PeerError, trio.TooSlowError) as exc:
        log.info("GET /v1/groups: broker %d did not list its groups: %s", peer.node_id, exc)
        return
    if isinstance(response, ListGroupsResponse) and response.error_code == 0:
        listed[peer.node_id] = response


def group_detail(broker: Broker, service: GroupService, group_id: str) -> dict[str, Any] | None:
    """One group: state, members and their assignments, and per partition the
    committed offset, the log end (high watermark) and the lag. None if unknown."""
    summary = next((s for s in group_summaries(service) if s["group_id"] == group_id), None)
    if summary is None:
        return None
    members = (
        _classic_members(service, group_id)
        if summary["type"] == CLASSIC
        else _consumer_members(service, group_id)
    )
    offsets = group_offsets(broker, service, group_id)
    return {
        **summary,
        "members": members,
        "offsets": offsets,
        "lag": sum(o["lag"] for o in offsets),
    }


def group_offsets(broker: Broker, service: GroupService, group_id: str) -> list[dict[str, Any]]:
    rows = []
    for (topic, partition), committed in sorted(service.committed_offsets(group_id).items()):
        replica = broker.partition(topic, partition)
        end_offset = replica.high_watermark if replica is not None else None
        lag = max(0, end_offset - committed.offset) if end_offset is not None else 0
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "committed_offset": committed.offset,
                "log_end_offset": end_offset,
                "lag": lag,
                "metadata": committed.metadata,
            }
        )
    return rows


def _classic_members(service: GroupService, group_id: str) -> list[dict[str, Any]]:
    group = service.classic.groups[group_id]
    return [
        {
            "member_id": m.member_id,
            "instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "assignment": decode_consumer_assignment(m.assignment),
        }
        for m in sorted(group.members.values(), key=lambda m: m.member_id)
    ]


def _consumer_members(service: GroupService, group_id: str) -> list[dict[str, Any]]:
    group = service.consumer_groups.groups[group_id]
    members = []
    for member_id in sorted(group.members):
        m = group.members[member_id]
        assignment = [
            {"topic": service.topic_name(topic_id) or str(topic_id), "partitions": sorted(parts)}
            for topic_id, parts in sorted(m.assigned.items(), key=lambda item: str(item[0]))
        ]
        members.append(
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "assignment": assignment,
            }
        )
    return members


def decode_consumer_assignment(data: bytes) -> list[dict[str, Any]] | None:
    """The topic partitions of a classic consumer-protocol assignment (version int16,
    then [topic string, [partition int32]]); None when it is not one."""
    try:
        return list(_read_assignment(memoryview(data)))
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def _read_assignment(view: memoryview) -> Iterable[dict[str, Any]]:
    if len(view) == 0:
        return
    position = 2  # version
    (topics_count,) = struct.unpack_from(">i", view, position)
    position += 4
    if not 0 <= topics_count <= min(ASSIGNMENT_TOPICS_MAX, len(view)):
        raise ValueError("bad topic count")
    for _ in range(topics_count):
        (name_length,) = struct.unpack_from(">h", view, position)
        position += 2
        if name_length < 0 or position + name_length > len(view):
            raise ValueError("bad topic name")
        topic = bytes(view[position : position + name_length]).decode()
        position += name_length
        (partitions_count,) = struct.unpack_from(">i", view, position)
        position += 4
        if not 0 <= partitions_count <= (len(view) - position) // 4:
            raise ValueError("bad partition count")
        partitions = list(struct.unpack_from(f">{partitions_count}i", view, position))
        position += 4 * partitions_count
        yield {"topic": topic, "partitions": partitions}


def register_group_metrics(broker: Broker, service: GroupService) -> None:
    def groups_by_state() -> Iterable[GaugeSample]:
        counts: dict[tuple[str, str], int] = {}
        for summary in group_summaries(service):
            key = (str(summary["type"]), str(summary["state"]))
            counts[key] = counts.get(key, 0) + 1
        for (group_type, state), count in sorted(counts.items()):
            yield {"type": group_type, "state": state}, float(count)

    def generations() -> Iterable[GaugeSample]:
        for summary in group_summaries(service):
            yield {"group": str(summary["group_id"])}, float(summary["generation"])

    def lags() -> Iterable[GaugeSample]:
        for group_id in service.offsets.committed_groups():
            lag = sum(row["lag"] for row in group_offsets(broker, service, group_id))
            yield {"group": group_id}, float(lag)

    metrics = broker.metrics
    metrics.register_collector(lambda: _exporter_group_families(broker, service))
    metrics.register_gauge("weir_groups", "Consumer groups, by type and state.", groups_by_state)
    metrics.register_gauge(
        "weir_group_generation",
        "Generation (classic) or group epoch (consumer); it grows by one per rebalance.",
        generations,
    )
    metrics.register_gauge(
        "weir_group_lag", "Records behind the high watermark over a group's partitions.", lags
    )


def _exporter_group_families(broker: Broker, service: GroupService) -> Iterator[Metric]:
    """kafka_exporter's group families, for the groups this broker coordinates. A
    partition's lag needs its high watermark: it is left out when this broker
    holds no replica of the partition."""
    labels = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily(
        "kafka_consumergroup_current_offset",
        "Current Offset of a ConsumerGroup at Topic/Partition",
        labels=labels,
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "Current Approximate Lag of a ConsumerGroup at Topic/Partition",
        labels=labels,
    )
    members = GaugeMetricFamily(
        "kafka_consumergroup_members",
        "Amount of members in a consumer group",
        labels=["consumergroup"],
    )
    for summary in group_summaries(service):
        members.add_metric([str(summary["group_id"])], float(summary["members"]))
    for group_id in sorted(service.offsets.groups()):
        for row in group_offsets(broker, service, group_id):
            key = [group_id, str(row["topic"]), str(row["partition"])]
            current.add_metric(key, float(row["committed_offset"]))
            if row["log_end_offset"] is not None:
                lag.add_metric(key, float(row["lag"]))
    yield from (current, lag, members)
