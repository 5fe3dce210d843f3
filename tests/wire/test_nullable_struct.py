"""Nullable structs (ConsumerGroupHeartbeat's assignment): int8 -1 for null, 1 then the struct."""

from __future__ import annotations

import uuid

import pytest

from weir.format.primitives import DecodeError, FrameIO
from weir.wire.protocol import APIS, ApiKey

RESPONSE = APIS[ApiKey.CONSUMER_GROUP_HEARTBEAT].response


def encode(body: dict[str, object], compiled: bool) -> bytes:
    stream = FrameIO(b"")
    stream.seek(0)
    construct = RESPONSE.compiled_for(1) if compiled else RESPONSE.construct_for(1)
    construct.build_stream(RESPONSE.value_of(body), stream)
    return stream.getvalue()


def body(assignment: object) -> dict[str, object]:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "member_id": "m",
        "member_epoch": 3,
        "heartbeat_interval_ms": 5000,
        "assignment": assignment,
    }


@pytest.mark.parametrize("compiled", [False, True])
def test_null_and_present_assignments_round_trip(compiled: bool) -> None:
    topic_id = uuid.uuid4()
    present = {"topic_partitions": [{"topic_id": topic_id, "partitions": [0, 2]}]}
    for assignment in (None, present):
        data = encode(body(assignment), compiled)
        parsed = RESPONSE.compiled_for(1).parse_stream(FrameIO(data))
        if assignment is None:
            assert parsed.assignment is None
            assert data.endswith(b"\xff\x00")  # null marker, then the empty tag buffer
        else:
            [tp] = parsed.assignment.topic_partitions
            assert (tp.topic_id, list(tp.partitions)) == (topic_id, [0, 2])


def test_truncated_nullable_struct_raises_decode_error() -> None:
    data = encode(body(None), compiled=True)
    with pytest.raises(DecodeError):
        RESPONSE.compiled_for(1).parse_stream(FrameIO(data[:-2]))
