"""The "consumer" embedded protocol: what classic consumer groups carry as opaque bytes.

A member of a group whose protocol type is "consumer" puts a
ConsumerProtocolSubscription in each JoinGroup protocol's `metadata`, and the leader
hands each member a ConsumerProtocolAssignment as its SyncGroup `assignment`
(DescribeGroups echoes both). Transcribed from Kafka's message specs
(ConsumerProtocolSubscription.json, ConsumerProtocolAssignment.json, both versions
0-3, never flexible) and the rules of Kafka's `ConsumerProtocol`:

- the bytes are an int16 version, then the message in that version;
- a negative version is an error; a version newer than 3 is read as version 3, so
  the fields known here are read and whatever a newer version appended is ignored
  (bytes after the known fields are ignored in every version, as in Kafka);
- `owned_partitions` (v1+), `generation_id` (v2+) and `rack_id` (v3+) are
  ignorable: encoding an older version silently leaves them out.

Decoding obeys the wire layer's bounds: every count and length is checked against
the bytes remaining before anything is allocated, at most `DECODE_ELEMENTS_MAX`
array elements per blob, and any malformed input raises `DecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weir.format.primitives import DecodeError, EncodeError, FrameIO, read_exact
from weir.format.schema import BYTES, INT32, STRING, Array, Field, Message, Struct

__all__ = [
    "ASSIGNMENT_VERSION_MAX",
    "CONSUMER_PROTOCOL_TYPE",
    "SUBSCRIPTION_VERSION_MAX",
    "Assignment",
    "Subscription",
    "TopicPartitions",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "protocol_version",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION_MAX = 3
ASSIGNMENT_VERSION_MAX = 3

_VERSION = struct.Struct(">h")


def _topic_partitions(versions: str) -> Array:
    return Array(
        Struct(Field("topic", STRING, versions), Field("partitions", Array(INT32), versions))
    )


SUBSCRIPTION_MESSAGE = Message(
    "ConsumerProtocolSubscription",
    valid=f"0-{SUBSCRIPTION_VERSION_MAX}",
    flexible="none",
    fields=[
        Field("topics", Array(STRING)),
        Field("user_data", BYTES, nullable="0+", default=None),
        Field("owned_partitions", _topic_partitions("1+"), "1+"),
        Field("generation_id", INT32, "2+", default=-1),
        Field("rack_id", STRING, "3+", nullable="3+", default=None),
    ],
)

ASSIGNMENT_MESSAGE = Message(
    "ConsumerProtocolAssignment",
    valid=f"0-{ASSIGNMENT_VERSION_MAX}",
    flexible="none",
    fields=[
        Field("assigned_partitions", _topic_partitions("0+")),
        Field("user_data", BYTES, nullable="0+", default=None),
    ],
)


@dataclass(frozen=True)
class TopicPartitions:
    """One topic and some of its partitions, in the order given."""

    topic: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class Subscription:
    """A ConsumerProtocolSubscription; defaults are Kafka's (null user data and rack,
    no owned partitions, generation -1)."""

    topics: tuple[str, ...] = ()
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartitions, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class Assignment:
    """A ConsumerProtocolAssignment; null user data by default."""

    assigned_partitions: tuple[TopicPartitions, ...] = ()
    user_data: bytes | None = None


# Decoding --------------------------------------------------------------------------


def protocol_version(data: bytes | bytearray | memoryview) -> int:
    """The int16 version that starts a subscription or assignment (DecodeError if absent)."""
    if len(data) < _VERSION.size:
        raise DecodeError("consumer protocol bytes are shorter than their version")
    (version,) = _VERSION.unpack_from(data, 0)
    return int(version)


def _parse(message: Message, version_max: int, data: bytes | bytearray | memoryview) -> Any:
    stream = FrameIO(data)
    (version,) = _VERSION.unpack(read_exact(stream, _VERSION.size))
    if version < 0:
        raise DecodeError(f"unsupported {message.name} version {version}")
    return message.parse(stream, min(version, version_max))


def _partitions(decoded: Sequence[Any]) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(item.topic, tuple(item.partitions)) for item in decoded)


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """Decode a version-prefixed ConsumerProtocolSubscription; raise DecodeError."""
    body = _parse(SUBSCRIPTION_MESSAGE, SUBSCRIPTION_VERSION_MAX, data)
    return Subscription(
        topics=tuple(body.topics),
        user_data=body.user_data,
        owned_partitions=_partitions(body.get("owned_partitions", ())),
        generation_id=body.get("generation_id", -1),
        rack_id=body.get("rack_id"),
    )


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """Decode a version-prefixed ConsumerProtocolAssignment; raise DecodeError."""
    body = _parse(ASSIGNMENT_MESSAGE, ASSIGNMENT_VERSION_MAX, data)
    return Assignment(
        assigned_partitions=_partitions(body.assigned_partitions), user_data=body.user_data
    )


# Encoding --------------------------------------------------------------------------


def _partitions_body(items: Iterable[TopicPartitions]) -> list[Mapping[str, Any]]:
    return [{"topic": item.topic, "partitions": list(item.partitions)} for item in items]


def _build(message: Message, version_max: int, version: int, body: Mapping[str, Any]) -> bytes:
    if not 0 <= version <= version_max:
        raise EncodeError(f"{message.name} has no version {version}")
    return _VERSION.pack(version) + message.build(body, version)


def encode_subscription(
    subscription: Subscription, version: int = SUBSCRIPTION_VERSION_MAX
) -> bytes:
    """The version-prefixed bytes of `subscription` (fields newer than `version` are
    left out, as Kafka does with ignorable fields); raise EncodeError."""
    body = {
        "topics": list(subscription.topics),
        "user_data": subscription.user_data,
        "owned_partitions": _partitions_body(subscription.owned_partitions),
        "generation_id": subscription.generation_id,
        "rack_id": subscription.rack_id,
    }
    return _build(SUBSCRIPTION_MESSAGE, SUBSCRIPTION_VERSION_MAX, version, body)


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION_MAX) -> bytes:
    """The version-prefixed bytes of `assignment`; raise EncodeError."""
    body = {
        "assigned_partitions": _partitions_body(assignment.assigned_partitions),
        "user_data": assignment.user_data,
    }
    return _build(ASSIGNMENT_MESSAGE, ASSIGNMENT_VERSION_MAX, version, body)
