"""Which partition of `__consumer_offsets` a group lives in, computed exactly as Kafka does.

Kafka places a group in partition `Utils.abs(groupId.hashCode()) % partitionCount`, where
`hashCode` is Java's `String.hashCode` (over UTF-16 code units, 32-bit wrapping) and
`Utils.abs(x)` is `x & 0x7fffffff` (so `Integer.MIN_VALUE` maps to 0, not to itself).
Matching it keeps a group in the same partition as on a Kafka cluster with the same
partition count, which tools and migrations rely on.
"""

from __future__ import annotations

_INT32_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()` of `text`, as a signed 32-bit int."""
    data = text.encode("utf-16-be")
    value = 0
    for i in range(0, len(data), 2):
        value = (value * 31 + ((data[i] << 8) | data[i + 1])) & _INT32_MASK
    return value - (1 << 32) if value & 0x80000000 else value


def offsets_partition_for(group_id: str, partition_count: int) -> int:
    """The `__consumer_offsets` partition that holds `group_id`'s records."""
    if partition_count <= 0:
        raise ValueError(f"partition_count must be positive, got {partition_count}")
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partition_count
