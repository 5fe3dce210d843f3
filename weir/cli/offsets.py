"""ListOffsets against partition leaders: earliest (log start) and latest (high watermark)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from weir.cli.cluster import LEADER_MOVED_ERRORS, NO_LEADER, Cluster, TopicMetadata
from weir.cli.errors import BrokerConnectionError, CliError, kafka_error
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED = 0
NO_LEADER_EPOCH = -1
# A leader lost in a cluster is replaced within the broker session timeout (9 s by
# default): lookups are asked again for this long.
LEADER_MOVE_WAIT_MS = 20_000
LEADER_MOVE_RETRY_INTERVAL_S = 0.2
LEADER_MOVE_ERRORS = LEADER_MOVED_ERRORS | {ErrorCode.REPLICA_NOT_AVAILABLE}


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
        try:
            response = cluster.broker(leader).request(ApiKey.LIST_OFFSETS, body)
        except BrokerConnectionError:  # the leader is gone: a new one is being elected
            for p in leader_partitions:
                results[p] = OffsetLookup(p, None, ErrorCode.LEADER_NOT_AVAILABLE)
            continue
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


@dataclass(frozen=True)
class PartitionRange:
    """The offsets a partition holds: `start` (log start) up to `end` (high watermark,
    the next offset to be written), `end` excluded."""

    partition: int
    start: int
    end: int

    def describe(self) -> str:
        if self.start == self.end:
            return f"it holds no records; the next offset is {self.end}"
        return f"it holds offsets {self.start} to {self.end - 1} (the next is {self.end})"


def lookup_offsets(
    cluster: Cluster,
    topic_name: str,
    partitions: Iterable[int],
    timestamp: int,
    *,
    wait_ms: int = LEADER_MOVE_WAIT_MS,
) -> dict[int, OffsetLookup]:
    """`list_offsets`, asked again with fresh metadata while a partition's leader is
    moving (up to `wait_ms`); the last answers are returned, errors included."""
    wanted = list(partitions)
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        topic = cluster.topic(topic_name)
        found = list_offsets(cluster, topic, wanted, timestamp)
        moving = any(lookup.error_code in LEADER_MOVE_ERRORS for lookup in found.values())
        if not moving or time.monotonic() >= deadline:
            return found
        time.sleep(LEADER_MOVE_RETRY_INTERVAL_S)


def partition_ranges(
    cluster: Cluster, topic: TopicMetadata, partitions: Iterable[int]
) -> dict[int, PartitionRange]:
    """Log start and high watermark of each partition; CliError if either lookup fails."""
    wanted = list(partitions)
    starts = lookup_offsets(cluster, topic.name, wanted, EARLIEST_TIMESTAMP)
    ends = lookup_offsets(cluster, topic.name, wanted, LATEST_TIMESTAMP)
    ranges: dict[int, PartitionRange] = {}
    for partition in wanted:
        for lookup in (starts[partition], ends[partition]):
            if lookup.error_code != ErrorCode.NONE or lookup.offset is None:
                raise kafka_error(lookup.error_code, topic=topic.name, partition=partition,
                                  action="find the offsets of")  # fmt: skip
        start, end = starts[partition].offset, ends[partition].offset
        assert start is not None and end is not None
        ranges[partition] = PartitionRange(partition, start, end)
    return ranges


def out_of_range_error(topic: str, offset: int, partition_range: PartitionRange) -> CliError:
    """OFFSET_OUT_OF_RANGE with the range that is valid."""
    return CliError(
        f"offset {offset} is out of range for topic '{topic}' partition "
        f"{partition_range.partition}: {partition_range.describe()} (OFFSET_OUT_OF_RANGE)"
    )
