"""ListOffsets v8-v11 on the wire, laid out byte by byte from Kafka's message
definitions: v8, v9 and v11 only allow new special timestamps, so their frames
are v7's; v10 adds the request's trailing timeout_ms (KIP-1075)."""

from __future__ import annotations

import struct

import pytest

from weir.format.primitives import DecodeError
from weir.wire.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    decode_request,
    encode_response,
    parse_request_header,
)

CORRELATION_ID = 7
CLIENT_ID = b"java"


def request_frame(version: int, timestamp: int, timeout_ms: int | None) -> bytes:
    """A flexible (v6+) ListOffsets request for partition 0 of topic "t"."""
    header = struct.pack(">hhih", ApiKey.LIST_OFFSETS, version, CORRELATION_ID, len(CLIENT_ID))
    header += CLIENT_ID + b"\x00"  # client id, empty header tag buffer
    body = struct.pack(">ib", -1, 1)  # replica_id, isolation_level READ_COMMITTED
    body += b"\x02" + b"\x02t"  # one topic (compact array), name "t" (compact string)
    body += b"\x02" + struct.pack(">iiq", 0, 5, timestamp) + b"\x00"  # one partition
    body += b"\x00"  # topic tag buffer
    if timeout_ms is not None:
        body += struct.pack(">i", timeout_ms)
    return header + body + b"\x00"


def decode(frame: bytes) -> tuple[int, object]:
    view = memoryview(frame)
    header = parse_request_header(view)
    return header.api_version, decode_request(header, view)


def test_list_offsets_is_served_up_to_v11() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.LIST_OFFSETS] == (1, 11)


@pytest.mark.parametrize(("version", "timestamp"), [(8, -4), (9, -5)])
def test_v8_and_v9_requests_are_v7_frames_with_new_timestamps(version: int, timestamp: int) -> None:
    parsed_version, body = decode(request_frame(version, timestamp, timeout_ms=None))
    assert parsed_version == version
    [topic] = body.topics  # type: ignore[attr-defined]
    [partition] = topic.partitions
    assert (topic.name, partition.partition_index, partition.current_leader_epoch) == ("t", 0, 5)
    assert partition.timestamp == timestamp
    assert body.isolation_level == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(("version", "timestamp"), [(10, -5), (11, -6)])
def test_v10_and_later_requests_end_with_timeout_ms(version: int, timestamp: int) -> None:
    _, body = decode(request_frame(version, timestamp, timeout_ms=30_000))
    assert body.timeout_ms == 30_000  # type: ignore[attr-defined]
    [topic] = body.topics  # type: ignore[attr-defined]
    assert topic.partitions[0].timestamp == timestamp


def test_a_v10_request_without_timeout_ms_is_short() -> None:
    with pytest.raises(DecodeError, match="ListOffsetsRequest v10"):
        decode(request_frame(10, -1, timeout_ms=None))


@pytest.mark.parametrize("version", [8, 9, 10, 11])
def test_responses_from_v8_on_are_laid_out_as_v7(version: int) -> None:
    body = {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                    }
                ],
            }
        ],
    }
    assert encode_response(ApiKey.LIST_OFFSETS, version, CORRELATION_ID, body) == encode_response(
        ApiKey.LIST_OFFSETS, 7, CORRELATION_ID, body
    )
