"""The embedded consumer protocol of classic groups (protocol type "consumer"): the
subscription a member sends in JoinGroup, the assignment the leader sends in SyncGroup,
and the range assignor (Kafka's default) the CLI runs when it leads.

Only the fields every version starts with are read (version, topics; topic and
partitions); later versions append fields (owned partitions, generation, rack) that
the range assignor does not need. Lengths come from other members, so every one is
checked against the bytes that remain before anything is allocated.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

PROTOCOL_TYPE = "consumer"
RANGE_ASSIGNOR = "range"
SUBSCRIPTION_VERSION = 0
ASSIGNMENT_VERSION = 0

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class ProtocolDataError(ValueError):
    """A member's subscription or an assignment is malformed."""


def encode_subscription(topics: Sequence[str]) -> bytes:
    out = bytearray(_INT16.pack(SUBSCRIPTION_VERSION))
    out += _INT32.pack(len(topics))
    for topic in topics:
        out += _string(topic)
    out += _INT32.pack(-1)  # no user data
    return bytes(out)


def encode_assignment(partitions_by_topic: Mapping[str, Sequence[int]]) -> bytes:
    out = bytearray(_INT16.pack(ASSIGNMENT_VERSION))
    out += _INT32.pack(len(partitions_by_topic))
    for topic, partitions in partitions_by_topic.items():
        out += _string(topic)
        out += _INT32.pack(len(partitions))
        for partition in partitions:
            out += _INT32.pack(partition)
    out += _INT32.pack(-1)
    return bytes(out)


def decode_subscription(data: bytes) -> list[str]:
    reader = _Reader(data)
    reader.int16()
    return [reader.string() for _ in range(reader.count(minimum_item_bytes=2))]


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """An empty assignment (no bytes: a member without partitions) is {}."""
    if not data:
        return {}
    reader = _Reader(data)
    reader.int16()
    assignment: dict[str, list[int]] = {}
    for _ in range(reader.count(minimum_item_bytes=6)):
        topic = reader.string()
        partitions = [reader.int32() for _ in range(reader.count(minimum_item_bytes=4))]
        assignment.setdefault(topic, []).extend(partitions)
    return assignment


def assign_range(
    subscriptions: Mapping[str, Sequence[str]], partition_counts: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, its subscribers in member-id order each take a
    contiguous range, the first `count % members` one partition more."""
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


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return _INT16.pack(len(data)) + data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def _take(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise ProtocolDataError(f"consumer protocol data ends early ({len(self.data)} bytes)")
        chunk = self.data[self.position : self.position + size]
        self.position += size
        return chunk

    def int16(self) -> int:
        value: int = _INT16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self._take(4))[0]
        return value

    def count(self, *, minimum_item_bytes: int) -> int:
        """An array length that the remaining bytes can hold (-1, null, is empty)."""
        count = self.int32()
        if count < 0:
            return 0
        if count * minimum_item_bytes > len(self.data) - self.position:
            raise ProtocolDataError(f"consumer protocol array of {count} does not fit its data")
        return count

    def string(self) -> str:
        size = self.int16()
        try:
            return self._take(size).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolDataError("consumer protocol string is not UTF-8") from None
