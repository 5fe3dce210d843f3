"""Which `__consumer_offsets` partition holds a group: Kafka's rule, so tools agree.

partition = (Java `String.hashCode(group_id)` & 0x7fffffff) % partition_count, where
hashCode runs over UTF-16 code units with 32-bit wrap-around.
"""

from __future__ import annotations


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()` as a signed 32-bit int."""
    value = 0
    encoded = text.encode("utf-16-be")
    for i in range(0, len(encoded), 2):
        value = (31 * value + ((encoded[i] << 8) | encoded[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def group_partition(group_id: str, partition_count: int) -> int:
    assert partition_count > 0
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partition_count
