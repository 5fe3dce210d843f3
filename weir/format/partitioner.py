"""Kafka's default partitioner for keyed records: murmur2 of the key bytes.

Matches `org.apache.kafka.common.utils.Utils.murmur2` and `toPositive(hash) % partitions`
so a key lands on the same partition whether Weir's CLI or a Java/librdkafka
(`murmur2_random`) producer wrote it.
"""

from __future__ import annotations

MURMUR2_SEED = 0x9747B28C
MURMUR2_M = 0x5BD1E995
MURMUR2_R = 24
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of `data`, as the signed int Java returns."""
    length = len(data)
    h = (MURMUR2_SEED ^ length) & _MASK32
    blocks_end = length - length % 4
    for i in range(0, blocks_end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * MURMUR2_M) & _MASK32
        k ^= k >> MURMUR2_R
        k = (k * MURMUR2_M) & _MASK32
        h = (h * MURMUR2_M) & _MASK32
        h ^= k
    tail = length % 4
    if tail == 3:
        h ^= data[blocks_end + 2] << 16
    if tail >= 2:
        h ^= data[blocks_end + 1] << 8
    if tail >= 1:
        h ^= data[blocks_end]
        h = (h * MURMUR2_M) & _MASK32
    h ^= h >> 13
    h = (h * MURMUR2_M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partition_count: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    if partition_count <= 0:
        raise ValueError("partition_count must be positive")
    return (murmur2(key) & 0x7FFFFFFF) % partition_count
