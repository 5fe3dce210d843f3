"""Decoding a classic member's assignment for display never trusts its lengths."""

from __future__ import annotations

import struct

import pytest

from weir.broker.http.group_views import decode_consumer_assignment


def assignment(*topics: tuple[str, list[int]]) -> bytes:
    data = struct.pack(">hi", 3, len(topics))
    for name, partitions in topics:
        data += struct.pack(">h", len(name)) + name.encode()
        data += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return data + struct.pack(">i", -1)  # null user data


def test_decodes_topics_and_partitions() -> None:
    decoded = decode_consumer_assignment(assignment(("a", [0, 2]), ("b", [1])))
    assert decoded == [{"topic": "a", "partitions": [0, 2]}, {"topic": "b", "partitions": [1]}]


def test_empty_assignment_is_no_partitions() -> None:
    assert decode_consumer_assignment(b"") == []


@pytest.mark.parametrize(
    "data",
    [
        struct.pack(">hi", 0, 2**31 - 1),  # huge topic count
        struct.pack(">hih", 0, 1, 100) + b"x",  # name longer than the bytes
        struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", 2**30),  # huge partition count
        b"\x00",  # truncated
    ],
)
def test_hostile_assignments_decode_to_none(data: bytes) -> None:
    assert decode_consumer_assignment(data) is None
