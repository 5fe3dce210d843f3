"""ListOffsets against partition leaders: earliest (log start) and latest (high watermark)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from weir.cli.cluster import NO_LEADER, Cluster, TopicMetadata
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED = 0
NO_LEADER_EPOCH = -1


@dataclass(frozen=True)
class OffsetLookup:
    partition: int
    offset: int | None
    error_code: int


def list_offsets(
    cluster: Cluster, topic: TopicMetadata, partitions: Iterable[int], timestamp: int
) -> dict[int, OffsetLookup]:
    """The offset for `timestamp` (EARLIEST/LATEST or a time) of each partition, by partition.

    Partitions without a leader get LEADER_NOT_AVAILABLE instead of an offset.
    """
    wanted = list(partitions)
    by_leader: dict[int, list[int]] = defaultdict(list)
    results: dict[int, OffsetLookup] = {}
    leaders = {p.partition: p.leader for p in topic.partitions}
    for partition in wanted:
        leader = leaders.get(partition, NO_LEADER)
        if leader == NO_LEADER:
            results[partition] = OffsetLookup(partition, None, ErrorCode.LEADER_NOT_AVAILABLE)
        else:
            by_leader[leader].append(partition)
    for leader, leader_partitions in by_leader.items():
        body = {
            "replica_id": CONSUMER_REPLICA_ID,
            "isolation_level": READ_UNCOMMITTED,
            "topics": [
                {
                    "name": topic.name,
                    "partitions": [
                        {
                            "partition_index": p,
                            "current_leader_epoch": NO_LEADER_EPOCH,
                            "timestamp": timestamp,
                        }
                        for p in leader_partitions
                    ],
                }
            ],
        }
        response = cluster.broker(leader).request(ApiKey.LIST_OFFSETS, body)
        for answered_topic in response["topics"]:
            if answered_topic["name"] != topic.name:
                continue
            for answer in answered_topic["partitions"]:
                error = int(answer["error_code"])
                offset = int(answer["offset"]) if error == ErrorCode.NONE else None
                index = int(answer["partition_index"])
                results[index] = OffsetLookup(index, offset, error)
    for partition in wanted:
        results.setdefault(partition, OffsetLookup(partition, None, ErrorCode.UNKNOWN_SERVER_ERROR))
    return results
