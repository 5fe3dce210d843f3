"""ListOffsets against partition leaders: earliest (log start) and latest (high watermark)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from weir.cli.cluster import NO_LEADER, Cluster, TopicMetadata
from weir.cli.errors import CliError, kafka_error
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


def partition_ranges(
    cluster: Cluster, topic: TopicMetadata, partitions: Iterable[int]
) -> dict[int, PartitionRange]:
    """Log start and high watermark of each partition; CliError if either lookup fails."""
    wanted = list(partitions)
    starts = list_offsets(cluster, topic, wanted, EARLIEST_TIMESTAMP)
    ends = list_offsets(cluster, topic, wanted, LATEST_TIMESTAMP)
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
