"""The embedded "consumer" protocol: ConsumerProtocolSubscription / Assignment v0-3."""

from __future__ import annotations

import random
import struct

import pytest

from weir.format.primitives import DECODE_ELEMENTS_MAX, DecodeError, EncodeError
from weir.wire.consumer_protocol import (
    ASSIGNMENT_VERSION_MAX,
    SUBSCRIPTION_VERSION_MAX,
    Assignment,
    Subscription,
    TopicPartitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    protocol_version,
)

ORDERS_0_2 = TopicPartitions("orders", (0, 2))
PAYMENTS_1 = TopicPartitions("payments", (1,))

FULL_SUBSCRIPTION = Subscription(
    topics=("orders", "payments"),
    user_data=b"\x01\x02",
    owned_partitions=(ORDERS_0_2,),
    generation_id=7,
    rack_id="rack-a",
)

# kafka-python 3.0.12: ConsumerProtocolSubscription(topics=["orders", "payments"],
# user_data=b"\x01\x02", owned_partitions=[TopicPartition(topic="orders",
# partitions=[0, 2])], generation_id=7, rack_id="rack-a").encode(version=v)
KAFKA_PYTHON_SUBSCRIPTIONS = {
    0: "00000000000200066f726465727300087061796d656e7473000000020102",
    1: "00010000000200066f726465727300087061796d656e74730000000201020000000100066f7264657273"
    "000000020000000000000002",
    2: "00020000000200066f726465727300087061796d656e74730000000201020000000100066f7264657273"
    "00000002000000000000000200000007",
    3: "00030000000200066f726465727300087061796d656e74730000000201020000000100066f7264657273"
    "0000000200000000000000020000000700067261636b2d61",
}

# kafka-python 3.0.12: ConsumerProtocolAssignment(assigned_partitions=[orders [0, 2],
# payments [1]], user_data=None).encode(version=3)
KAFKA_PYTHON_ASSIGNMENT_V3 = (
    "00030000000200066f726465727300000002000000000000000200087061796d656e7473000000010000"
    "0001ffffffff"
)

# aiokafka 0.14: ConsumerProtocolMemberMetadata(0, ["orders", "payments"], b"ud") and
# ConsumerProtocolMemberAssignment(0, [("orders", [0, 2]), ("payments", [1])], b"")
AIOKAFKA_SUBSCRIPTION_V0 = "00000000000200066f726465727300087061796d656e7473000000027564"
AIOKAFKA_ASSIGNMENT_V0 = (
    "00000000000200066f726465727300000002000000000000000200087061796d656e7473000000010000"
    "000100000000"
)


def _expected_subscription(full: Subscription, version: int) -> Subscription:
    """What survives encoding `full` as `version`: newer fields take Kafka's defaults."""
    return Subscription(
        topics=full.topics,
        user_data=full.user_data,
        owned_partitions=full.owned_partitions if version >= 1 else (),
        generation_id=full.generation_id if version >= 2 else -1,
        rack_id=full.rack_id if version >= 3 else None,
    )


def _random_partitions(rng: random.Random) -> tuple[TopicPartitions, ...]:
    return tuple(
        TopicPartitions(
            f"topic-{rng.randint(0, 999)}-é",
            tuple(rng.randint(-(2**31), 2**31 - 1) for _ in range(rng.randint(0, 4))),
        )
        for _ in range(rng.randint(0, 3))
    )


def _random_subscription(rng: random.Random) -> Subscription:
    return Subscription(
        topics=tuple(f"t{rng.randint(0, 99)}漢" for _ in range(rng.randint(0, 4))),
        user_data=None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20)),
        owned_partitions=_random_partitions(rng),
        generation_id=rng.randint(-(2**31), 2**31 - 1),
        rack_id=None if rng.random() < 0.3 else f"rack-{rng.randint(0, 9)}",
    )


def _random_assignment(rng: random.Random) -> Assignment:
    return Assignment(
        assigned_partitions=_random_partitions(rng),
        user_data=None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20)),
    )


# Round trips -----------------------------------------------------------------------


@pytest.mark.parametrize("version", range(SUBSCRIPTION_VERSION_MAX + 1))
@pytest.mark.parametrize("seed", range(5))
def test_subscription_round_trips_in_every_version(version: int, seed: int) -> None:
    subscription = _random_subscription(random.Random(f"sub-{version}-{seed}"))
    encoded = encode_subscription(subscription, version)
    assert protocol_version(encoded) == version
    assert decode_subscription(encoded) == _expected_subscription(subscription, version)


@pytest.mark.parametrize("version", range(ASSIGNMENT_VERSION_MAX + 1))
@pytest.mark.parametrize("seed", range(5))
def test_assignment_round_trips_in_every_version(version: int, seed: int) -> None:
    assignment = _random_assignment(random.Random(f"assign-{version}-{seed}"))
    encoded = encode_assignment(assignment, version)
    assert protocol_version(encoded) == version
    assert decode_assignment(encoded) == assignment


def test_defaults_are_kafkas() -> None:
    decoded = decode_subscription(encode_subscription(Subscription(topics=("t",))))
    assert decoded == Subscription(topics=("t",))
    assert decoded.user_data is None and decoded.rack_id is None
    assert decoded.generation_id == -1 and decoded.owned_partitions == ()
    assert decode_assignment(encode_assignment(Assignment())) == Assignment((), None)


def test_encoding_defaults_to_the_newest_version() -> None:
    assert protocol_version(encode_subscription(Subscription())) == SUBSCRIPTION_VERSION_MAX
    assert protocol_version(encode_assignment(Assignment())) == ASSIGNMENT_VERSION_MAX


def test_empty_and_null_user_data_differ() -> None:
    for user_data in (None, b""):
        sub = Subscription(topics=("t",), user_data=user_data)
        assert decode_subscription(encode_subscription(sub, 0)).user_data == user_data
        assignment = Assignment(user_data=user_data)
        assert decode_assignment(encode_assignment(assignment, 0)).user_data == user_data


@pytest.mark.parametrize("version", [-1, SUBSCRIPTION_VERSION_MAX + 1])
def test_encoding_an_unknown_version_is_refused(version: int) -> None:
    with pytest.raises(EncodeError):
        encode_subscription(Subscription(), version)
    with pytest.raises(EncodeError):
        encode_assignment(Assignment(), version)


def test_non_utf8_free_text_cannot_be_encoded() -> None:
    with pytest.raises(EncodeError):
        encode_subscription(Subscription(topics=("bad\udc80",)))


# Bytes from other clients ----------------------------------------------------------


@pytest.mark.parametrize("version", sorted(KAFKA_PYTHON_SUBSCRIPTIONS))
def test_kafka_python_subscription_bytes(version: int) -> None:
    data = bytes.fromhex(KAFKA_PYTHON_SUBSCRIPTIONS[version])
    expected = _expected_subscription(FULL_SUBSCRIPTION, version)
    assert decode_subscription(data) == expected
    assert encode_subscription(FULL_SUBSCRIPTION, version) == data


def test_kafka_python_assignment_bytes() -> None:
    data = bytes.fromhex(KAFKA_PYTHON_ASSIGNMENT_V3)
    expected = Assignment((ORDERS_0_2, PAYMENTS_1), None)
    assert decode_assignment(data) == expected
    assert encode_assignment(expected, 3) == data


def test_aiokafka_bytes() -> None:
    subscription = decode_subscription(bytes.fromhex(AIOKAFKA_SUBSCRIPTION_V0))
    assert subscription == Subscription(topics=("orders", "payments"), user_data=b"ud")
    assignment = decode_assignment(bytes.fromhex(AIOKAFKA_ASSIGNMENT_V0))
    assert assignment == Assignment((ORDERS_0_2, PAYMENTS_1), b"")
    assert encode_assignment(assignment, 0).hex() == AIOKAFKA_ASSIGNMENT_V0


@pytest.mark.parametrize("version", range(4))
@pytest.mark.parametrize("seed", range(3))
def test_kafka_python_codec_agrees(version: int, seed: int) -> None:
    metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
    theirs_sub = metadata.ConsumerProtocolSubscription
    theirs_assign = metadata.ConsumerProtocolAssignment
    rng = random.Random(f"kp-{version}-{seed}")

    subscription = _random_subscription(rng)
    ours = encode_subscription(subscription, version)
    decoded = theirs_sub.decode(ours)
    assert decoded.encode(version=version) == ours
    assert list(decoded.topics) == list(subscription.topics)
    their_bytes = theirs_sub(
        topics=list(subscription.topics),
        user_data=subscription.user_data,
        owned_partitions=[
            theirs_sub.TopicPartition(topic=tp.topic, partitions=list(tp.partitions))
            for tp in subscription.owned_partitions
        ],
        generation_id=subscription.generation_id,
        rack_id=subscription.rack_id,
    ).encode(version=version)
    assert their_bytes == ours
    assert decode_subscription(their_bytes) == _expected_subscription(subscription, version)

    assignment = _random_assignment(rng)
    ours = encode_assignment(assignment, version)
    assert theirs_assign.decode(ours).encode(version=version) == ours
    assert decode_assignment(ours) == assignment


# Newer versions (Kafka reads the fields it knows) ----------------------------------


@pytest.mark.parametrize("version", [4, 9, 0x7FFF])
def test_a_newer_subscription_version_is_read_as_the_newest_known(version: int) -> None:
    v3 = bytes.fromhex(KAFKA_PYTHON_SUBSCRIPTIONS[3])
    newer = struct.pack(">h", version) + v3[2:] + b"\x00\x00\x00\x2afuture fields"
    assert protocol_version(newer) == version
    assert decode_subscription(newer) == FULL_SUBSCRIPTION


@pytest.mark.parametrize("version", [4, 0x7FFF])
def test_a_newer_assignment_version_is_read_as_the_newest_known(version: int) -> None:
    v3 = bytes.fromhex(KAFKA_PYTHON_ASSIGNMENT_V3)
    newer = struct.pack(">h", version) + v3[2:] + b"\x01future"
    assert decode_assignment(newer) == Assignment((ORDERS_0_2, PAYMENTS_1), None)


def test_bytes_after_the_known_fields_are_ignored() -> None:
    v0 = bytes.fromhex(KAFKA_PYTHON_SUBSCRIPTIONS[0])
    assert decode_subscription(v0 + b"\xff\xff") == _expected_subscription(FULL_SUBSCRIPTION, 0)


def test_inputs_of_any_buffer_type() -> None:
    data = bytes.fromhex(KAFKA_PYTHON_SUBSCRIPTIONS[3])
    for buffer in (bytearray(data), memoryview(data), memoryview(b"xx" + data)[2:]):
        assert decode_subscription(buffer) == FULL_SUBSCRIPTION


# Hostile input ---------------------------------------------------------------------


@pytest.mark.parametrize("version", sorted(KAFKA_PYTHON_SUBSCRIPTIONS))
def test_every_truncation_of_a_subscription_is_an_error(version: int) -> None:
    data = bytes.fromhex(KAFKA_PYTHON_SUBSCRIPTIONS[version])
    for end in range(len(data)):
        with pytest.raises(DecodeError):
            decode_subscription(data[:end])


def test_every_truncation_of_an_assignment_is_an_error() -> None:
    data = bytes.fromhex(KAFKA_PYTHON_ASSIGNMENT_V3)
    for end in range(len(data)):
        with pytest.raises(DecodeError):
            decode_assignment(data[:end])


def test_a_negative_version_is_an_error() -> None:
    data = bytes.fromhex(KAFKA_PYTHON_SUBSCRIPTIONS[0])
    with pytest.raises(DecodeError, match="version"):
        decode_subscription(b"\xff\xff" + data[2:])
    with pytest.raises(DecodeError, match="version"):
        decode_assignment(b"\x80\x00" + bytes.fromhex(KAFKA_PYTHON_ASSIGNMENT_V3)[2:])
    with pytest.raises(DecodeError):
        protocol_version(b"\x00")


HUGE = [0x7FFFFFFF, 0x10000000, 1000]


@pytest.mark.parametrize("count", HUGE)
def test_huge_topic_count_is_an_error_before_allocation(count: int) -> None:
    data = struct.pack(">hi", 0, count) + b"\x00\x01t" * 3
    with pytest.raises(DecodeError, match="exceeds"):
        decode_subscription(data)


@pytest.mark.parametrize("count", HUGE)
def test_huge_partition_count_is_an_error_before_allocation(count: int) -> None:
    data = struct.pack(">hih", 3, 1, 1) + b"t" + struct.pack(">i", count) + b"\x00" * 64
    with pytest.raises(DecodeError, match="exceeds"):
        decode_assignment(data)
    owned = struct.pack(">hiii", 1, 0, -1, 1) + struct.pack(">h", 1) + b"t"
    with pytest.raises(DecodeError, match="exceeds"):
        decode_subscription(owned + struct.pack(">i", count) + b"\x00" * 64)


@pytest.mark.parametrize("size", [0x7FFFFFFF, 100])
def test_huge_user_data_length_is_an_error(size: int) -> None:
    with pytest.raises(DecodeError, match="exceeds"):
        decode_subscription(struct.pack(">hii", 0, 0, size) + b"\x00" * 10)
    with pytest.raises(DecodeError, match="exceeds"):
        decode_assignment(struct.pack(">hii", 0, 0, size) + b"\x00" * 10)


def test_huge_string_length_is_an_error() -> None:
    with pytest.raises(DecodeError, match="exceeds"):
        decode_subscription(struct.pack(">hih", 0, 1, 0x7FFF) + b"t" * 10)
    with pytest.raises(DecodeError, match="exceeds"):
        decode_subscription(struct.pack(">hiih", 3, 0, -1, 0) + struct.pack(">ih", -1, 0x7FFF))


@pytest.mark.parametrize(
    "data",
    [
        struct.pack(">hi", 0, -1) + b"\xff\xff\xff\xff",  # null topics
        struct.pack(">hi", 0, -2) + b"\xff\xff\xff\xff",  # negative count
        struct.pack(">hih", 0, 1, -1) + b"\xff\xff\xff\xff",  # null topic name
        struct.pack(">hiii", 1, 0, -1, -1),  # null owned partitions
    ],
    ids=["null-topics", "count-2", "null-topic", "null-owned"],
)
def test_nulls_where_kafka_has_none_are_errors(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_subscription(data)


def test_any_negative_user_data_length_is_null_as_in_kafka() -> None:
    assert decode_subscription(struct.pack(">hii", 0, 0, -2)).user_data is None


def test_invalid_utf8_topic_is_an_error() -> None:
    with pytest.raises(DecodeError):
        decode_subscription(struct.pack(">hih", 0, 1, 2) + b"\xc3\x28" + b"\xff\xff\xff\xff")


def test_too_many_elements_in_one_blob_is_an_error() -> None:
    count = DECODE_ELEMENTS_MAX + 1
    data = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", count) + b"\x00" * (4 * count)
    with pytest.raises(DecodeError, match="elements"):
        decode_assignment(data + b"\xff\xff\xff\xff")
