"""Parse/build timings for the hot messages, printed (run with -s); bounds are loose."""

from __future__ import annotations

import timeit
from collections.abc import Callable
from typing import Any

from weir.format.primitives import FrameIO
from weir.wire.apis.fetch import FETCH_REQUEST
from weir.wire.protocol import (
    ApiKey,
    decode_request,
    encode_request,
    encode_response,
    encode_response_chunks,
    parse_request_header,
)

PARTITIONS = 8


def _best_us(fn: Callable[[], Any]) -> float:
    number = 300
    return min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6


def _fetch_request(version: int) -> bytes:
    partitions = [
        {
            "partition": i,
            "current_leader_epoch": 3,
            "fetch_offset": 1000 * i,
            "partition_max_bytes": 1 << 20,
        }
        for i in range(PARTITIONS)
    ]
    body = {
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 1,
        "topics": [{"topic": "bench-topic", "partitions": partitions}],
    }
    # bytes() of the frame: what the server hands over (a whole bytes object)
    return bytes(encode_request(ApiKey.FETCH, version, 1, "bench", body)[4:])


def test_fetch_request_with_8_partitions_parses_in_tens_of_microseconds() -> None:
    for version in (11, 12):
        frame = memoryview(_fetch_request(version))
        header = parse_request_header(frame)
        compiled_us = _best_us(lambda: decode_request(header, frame))  # noqa: B023
        interpreted_us = _best_us(
            lambda: FETCH_REQUEST.parse(FrameIO(frame, header.body_offset), version, compiled=False)  # noqa: B023
        )
        header_us = _best_us(lambda: parse_request_header(frame))  # noqa: B023
        print(
            f"\nFetch v{version} request, {PARTITIONS} partitions: decode {compiled_us:.1f} us "
            f"compiled, {interpreted_us:.1f} us interpreted; header {header_us:.1f} us"
        )
        assert compiled_us < 500  # loose: ~10 us on the development machine


def test_produce_request_records_are_not_copied() -> None:
    records = bytes(64 * 1024)
    body = {
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [
            {"name": "t", "partition_data": [{"index": i, "records": records} for i in range(8)]}
        ],
    }
    for version in (7, 9):
        frame = memoryview(bytes(encode_request(ApiKey.PRODUCE, version, 1, "bench", body)[4:]))
        header = parse_request_header(frame)
        decode_us = _best_us(lambda: decode_request(header, frame))  # noqa: B023
        print(f"\nProduce v{version} request, 8 x 64 KiB: decode {decode_us:.1f} us")
        parsed = decode_request(header, frame)
        assert parsed.topic_data[0].partition_data[0].records.obj is frame.obj
        assert decode_us < 2000


def test_fetch_response_build_timings() -> None:
    records = memoryview(bytes(64 * 1024))
    body = {
        "responses": [
            {
                "topic": "bench-topic",
                "partitions": [
                    {"partition_index": i, "high_watermark": 10, "records": records}
                    for i in range(PARTITIONS)
                ],
            }
        ]
    }
    for version in (11, 12):
        chunks_us = _best_us(lambda: encode_response_chunks(ApiKey.FETCH, version, 1, body))  # noqa: B023
        joined_us = _best_us(lambda: encode_response(ApiKey.FETCH, version, 1, body))  # noqa: B023
        print(
            f"\nFetch v{version} response, {PARTITIONS} x 64 KiB: encode {chunks_us:.1f} us "
            f"as chunks, {joined_us:.1f} us joined"
        )
        assert chunks_us < 2000
