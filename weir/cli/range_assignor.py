"""Kafka's RangeAssignor, which the CLI runs when it leads a classic consumer group
(`weir consume -g`). The subscriptions and assignments it reads and writes are
encoded by weir.wire.consumer_protocol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RANGE_ASSIGNOR = "range"


def assign_range(
    subscriptions: Mapping[str, Sequence[str]], partition_counts: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Per topic, its subscribers in member-id order each take a contiguous range of
    partitions, the first `count % members` one partition more."""
    assignment: dict[str, dict[str, list[int]]] = {member: {} for member in subscriptions}
    topics = sorted({t for wanted in subscriptions.values() for t in wanted})
    for topic in topics:
        members = sorted(m for m, wanted in subscriptions.items() if topic in wanted)
        count = partition_counts.get(topic, 0)
        share, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = share + (1 if index < extra else 0)
            if size:
                assignment[member][topic] = list(range(start, start + size))
            start += size
    return assignment
