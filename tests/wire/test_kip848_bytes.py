"""KIP-848 APIs byte for byte: kafka-python has no ConsumerGroupHeartbeat or
ConsumerGroupDescribe codec, so the interop test skips them; these layouts are
assembled by hand from Kafka's message specs (all versions flexible: compact
strings and arrays as uvarint length + 1, 0 for null, a tag buffer after every
struct; nullable structs as int8 -1 or 1)."""

from __future__ import annotations

import struct
import uuid

import pytest

from weir.format.primitives import FrameIO
from weir.wire.protocol import APIS, ApiKey

from .sample_bodies import plain

HEARTBEAT = APIS[ApiKey.CONSUMER_GROUP_HEARTBEAT]
DESCRIBE = APIS[ApiKey.CONSUMER_GROUP_DESCRIBE]
TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
NO_TAGS = b"\x00"
NULL = b"\x00"  # compact nullable string or array


def s(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data


def i32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


def array(*items: bytes) -> bytes:
    return bytes([len(items) + 1]) + b"".join(items)


def check(message: object, version: int, body: dict[str, object], expected: bytes) -> None:
    assert message.build(body, version) == expected  # type: ignore[attr-defined]
    decoded = message.parse(FrameIO(expected), version)  # type: ignore[attr-defined]
    assert {k: v for k, v in plain(decoded).items() if k in body} == plain(body)


JOINING = {
    "group_id": "g",
    "member_id": "",
    "member_epoch": 0,
    "instance_id": None,
    "rack_id": "r1",
    "rebalance_timeout_ms": 300000,
    "subscribed_topic_names": ["orders"],
    "server_assignor": "uniform",
    "topic_partitions": [],
}


# group id, empty member id, epoch 0, no instance id, rack, rebalance timeout
JOINING_PREFIX = s("g") + s("") + i32(0) + NULL + s("r1") + i32(300000)


def test_joining_heartbeat_v0() -> None:
    expected = JOINING_PREFIX + array(s("orders")) + s("uniform") + array() + NO_TAGS
    check(HEARTBEAT.request, 0, JOINING, expected)


def test_v1_adds_the_regex_after_the_topic_names() -> None:
    body = {**JOINING, "subscribed_topic_names": None, "subscribed_topic_regex": "ord.*"}
    expected = JOINING_PREFIX + NULL + s("ord.*") + s("uniform") + array() + NO_TAGS
    check(HEARTBEAT.request, 1, body, expected)


@pytest.mark.parametrize("version", [0, 1])
def test_a_steady_heartbeat_sends_null_for_everything_unchanged(version: int) -> None:
    body = {"group_id": "g", "member_id": "m", "member_epoch": 5}
    nulls = NULL * (4 if version >= 1 else 3)  # topics, [regex], assignor, owned
    expected = s("g") + s("m") + i32(5) + NULL + NULL + i32(-1) + nulls + NO_TAGS
    assert HEARTBEAT.request.build(body, version) == expected
    decoded = HEARTBEAT.request.parse(FrameIO(expected), version)
    assert decoded.subscribed_topic_names is None and decoded.topic_partitions is None
    assert decoded.rebalance_timeout_ms == -1 and decoded.server_assignor is None


def test_owned_partitions_by_topic_id() -> None:
    body = {**JOINING, "topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 3]}]}
    owned = array(TOPIC_ID.bytes + array(i32(0), i32(3)) + NO_TAGS)
    expected = JOINING_PREFIX + array(s("orders")) + s("uniform") + owned + NO_TAGS
    check(HEARTBEAT.request, 0, body, expected)


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_with_and_without_assignment(version: int) -> None:
    base = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": "m",
        "member_epoch": 2,
        "heartbeat_interval_ms": 5000,
    }
    head = i32(0) + b"\x00\x00" + NULL + s("m") + i32(2, 5000)
    check(HEARTBEAT.response, version, {**base, "assignment": None}, head + b"\xff" + NO_TAGS)
    assignment = {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [1]}]}
    present = b"\x01" + array(TOPIC_ID.bytes + array(i32(1)) + NO_TAGS) + NO_TAGS
    check(HEARTBEAT.response, version, {**base, "assignment": assignment}, head + present + NO_TAGS)


def test_consumer_group_describe_v0() -> None:
    check(DESCRIBE.request, 0, {"group_ids": ["g"], "include_authorized_operations": True},
          array(s("g")) + b"\x01" + NO_TAGS)  # fmt: skip
    assignment = {
        "topic_partitions": [{"topic_id": TOPIC_ID, "topic_name": "t", "partitions": [0]}]
    }
    member = {
        "member_id": "m",
        "instance_id": None,
        "rack_id": None,
        "member_epoch": 4,
        "client_id": "c",
        "client_host": "/h",
        "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None,
        "assignment": assignment,
        "target_assignment": {"topic_partitions": []},
    }
    group = {
        "error_code": 0,
        "error_message": None,
        "group_id": "g",
        "group_state": "Stable",
        "group_epoch": 4,
        "assignment_epoch": 4,
        "assignor_name": "uniform",
        "members": [member],
        "authorized_operations": -(2**31),
    }
    member_bytes = (
        s("m")
        + NULL
        + NULL
        + i32(4)
        + s("c")
        + s("/h")
        + array(s("t"))
        + NULL
        + array(TOPIC_ID.bytes + s("t") + array(i32(0)) + NO_TAGS)
        + NO_TAGS
        + array()
        + NO_TAGS
        + NO_TAGS
    )
    group_bytes = (
        b"\x00\x00"
        + NULL
        + s("g")
        + s("Stable")
        + i32(4, 4)
        + s("uniform")
        + array(member_bytes)
        + i32(-(2**31))
        + NO_TAGS
    )
    body = {"throttle_time_ms": 0, "groups": [group]}
    check(DESCRIBE.response, 0, body, i32(0) + array(group_bytes) + NO_TAGS)
