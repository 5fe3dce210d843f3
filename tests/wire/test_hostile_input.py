"""Malformed and hostile input: always DecodeError, never another exception or a big allocation."""

from __future__ import annotations

import contextlib
import random
import struct
import time

import pytest

from weir.format.primitives import FrameIO
from weir.wire.protocol import (
    APIS,
    SUPPORTED_VERSIONS,
    ApiKey,
    DecodeError,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    parse_request_header,
)

from . import client_frames as frames
from .sample_bodies import plain, sample_struct

CASES = [
    (api_key, version)
    for api_key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(low, high + 1)
]


def _decode_frame(frame: bytes) -> object:
    view = memoryview(frame)
    return decode_request(parse_request_header(view), view)


def _header(api_key: int, version: int) -> RequestHeader:
    return RequestHeader(api_key, version, 1, None, 0)


def test_truncated_client_frames_raise_decode_error() -> None:
    frame = frames.LIBRDKAFKA_PRODUCE_V9_GZIP
    for cut in range(len(frame)):
        with pytest.raises(DecodeError):
            _decode_frame(frame[:cut])


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_every_truncation_of_every_message_raises_decode_error(api_key: int, version: int) -> None:
    api = APIS[api_key]
    for kind, message in (("request", api.request), ("response", api.response)):
        encoded = message.build(
            sample_struct(message.construct_for(version), random.Random(1)), version
        )
        for cut in range(len(encoded)):
            with pytest.raises(DecodeError):
                stream = FrameIO(encoded[:cut])
                message.parse(stream, version)
                if stream.remaining() == 0:
                    # A prefix can only parse if what is missing was optional: never here.
                    raise AssertionError(f"{kind} v{version} parsed a {cut}-byte prefix")


def test_trailing_bytes_after_a_request_body_are_ignored_like_kafka() -> None:
    plain = _decode_frame(frames.LIBRDKAFKA_METADATA_V12)
    padded = _decode_frame(frames.LIBRDKAFKA_METADATA_V12 + b"\x00\x00\x00")
    assert padded == plain


def _fetch_v11_prefix() -> bytes:
    """A Fetch v11 body up to (not including) its topics array."""
    return struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)


def test_huge_array_count_with_few_bytes_left_fails_before_allocating() -> None:
    body = _fetch_v11_prefix() + struct.pack(">i", 2**31 - 1) + b"\x00" * 10
    started = time.perf_counter()
    with pytest.raises(DecodeError, match="exceeds"):
        decode_request(_header(ApiKey.FETCH, 11), memoryview(body))
    assert time.perf_counter() - started < 0.05


def test_huge_int32_array_count_fails_before_allocating() -> None:
    topic = struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
    partition = struct.pack(">iiqqii", 0, -1, 0, -1, 1 << 20, 0)
    forgotten = struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 2**31 - 1)
    body = _fetch_v11_prefix() + struct.pack(">i", 1) + topic + partition[:-4] + forgotten
    with pytest.raises(DecodeError):
        decode_request(_header(ApiKey.FETCH, 11), memoryview(body))


def test_huge_compact_array_count_fails_before_allocating() -> None:
    # Metadata v12: topics is a compact nullable array; count 2**32-2 in a 5-byte varint.
    body = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    with pytest.raises(DecodeError, match="exceeds"):
        decode_request(_header(ApiKey.METADATA, 12), memoryview(body))


def test_negative_string_length_raises_decode_error() -> None:
    # DeleteRecords v0: topics[1] with a name of length -2.
    body = struct.pack(">ih", 1, -2) + b"\x00" * 12
    with pytest.raises(DecodeError, match="null"):
        decode_request(_header(ApiKey.DELETE_RECORDS, 0), memoryview(body))


def test_null_in_a_non_nullable_string_raises_decode_error() -> None:
    body = struct.pack(">ih", 1, -1) + b"\x00" * 12
    with pytest.raises(DecodeError):
        decode_request(_header(ApiKey.DELETE_RECORDS, 0), memoryview(body))


def test_negative_array_count_raises_decode_error() -> None:
    body = struct.pack(">i", -5) + struct.pack(">i", 1000)
    with pytest.raises(DecodeError, match="invalid array count"):
        decode_request(_header(ApiKey.DELETE_RECORDS, 0), memoryview(body))


def test_string_length_beyond_the_frame_raises_decode_error() -> None:
    body = struct.pack(">ih", 1, 30000) + b"abc"
    with pytest.raises(DecodeError, match="exceeds"):
        decode_request(_header(ApiKey.DELETE_RECORDS, 0), memoryview(body))


def test_records_length_beyond_the_frame_raises_decode_error() -> None:
    body = (
        struct.pack(">hhi", -1, 1, 1000)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", 1)
        + struct.pack(">ii", 0, 2**31 - 1)
        + b"\x00" * 16
    )
    with pytest.raises(DecodeError, match="records"):
        decode_request(_header(ApiKey.PRODUCE, 3), memoryview(body))


def test_varint_longer_than_five_bytes_raises_decode_error() -> None:
    body = b"\x80\x80\x80\x80\x80\x01" + b"\x00" * 4
    with pytest.raises(DecodeError, match="longer than 5 bytes"):
        decode_request(_header(ApiKey.METADATA, 12), memoryview(body))


def test_truncated_varint_raises_decode_error() -> None:
    with pytest.raises(DecodeError, match="truncated varint"):
        decode_request(_header(ApiKey.METADATA, 12), memoryview(b"\x80\x80"))


def test_unknown_tagged_fields_are_skipped() -> None:
    api = APIS[ApiKey.API_VERSIONS]
    plain_body = api.request.build({"client_software_name": "a", "client_software_version": "b"}, 3)
    assert plain_body.endswith(b"\x00")
    # two unknown tags (7: 3 bytes, 300: 0 bytes) replace the empty tag buffer
    tagged = plain_body[:-1] + b"\x02" + b"\x07\x03xyz" + b"\xac\x02\x00"
    decoded = api.request.parse(FrameIO(tagged), 3)
    assert plain(decoded) == {"client_software_name": "a", "client_software_version": "b"}


def test_unknown_tagged_fields_in_nested_structs_and_headers_are_skipped() -> None:
    header = struct.pack(">hhih", ApiKey.API_VERSIONS, 3, 9, 1) + b"c" + b"\x01\x05\x02hi"
    body = b"\x02a\x02b\x01\x00\x01\x01"  # name, version, one tag: 0 with 1 byte
    frame = header + body
    parsed = parse_request_header(memoryview(frame))
    assert parsed.body_offset == len(header)
    decoded = decode_request(parsed, memoryview(frame))
    assert plain(decoded) == {"client_software_name": "a", "client_software_version": "b"}


def test_tagged_field_larger_than_the_frame_raises_decode_error() -> None:
    body = b"\x02a\x02b" + b"\x01\x07\xff\xff\xff\x07"
    with pytest.raises(DecodeError, match="exceeds"):
        decode_request(_header(ApiKey.API_VERSIONS, 3), memoryview(body))


def test_huge_tagged_field_count_raises_decode_error() -> None:
    body = b"\x02a\x02b" + b"\xff\xff\xff\xff\x07"
    with pytest.raises(DecodeError, match="exceeds"):
        decode_request(_header(ApiKey.API_VERSIONS, 3), memoryview(body))


def test_known_tagged_field_with_a_wrong_size_raises_decode_error() -> None:
    fetch = APIS[ApiKey.FETCH].request
    encoded = fetch.build({"cluster_id": "abc"}, 12)
    assert b"\x01\x00\x04\x04abc" in encoded  # one tag: 0, size 4, compact "abc"
    broken = encoded.replace(b"\x01\x00\x04\x04abc", b"\x01\x00\x05\x04abc\x00")
    with pytest.raises(DecodeError):
        fetch.parse(FrameIO(broken), 12)


def test_invalid_utf8_raises_decode_error() -> None:
    body = struct.pack(">ih", 1, 2) + b"\xff\xfe" + struct.pack(">i", 0) + struct.pack(">i", 0)
    with pytest.raises(DecodeError, match="UTF-8"):
        decode_request(_header(ApiKey.DELETE_RECORDS, 0), memoryview(body))


@pytest.mark.parametrize("frame", [b"", b"\x00", b"\x00\x03\x00\x01\x00\x00", b"\x00" * 9])
def test_short_request_headers_raise_decode_error(frame: bytes) -> None:
    with pytest.raises(DecodeError):
        parse_request_header(memoryview(frame))


def test_client_id_longer_than_the_frame_raises_decode_error() -> None:
    frame = struct.pack(">hhih", 3, 1, 1, 100) + b"abc"
    with pytest.raises(DecodeError):
        parse_request_header(memoryview(frame))


def test_unsupported_versions_raise_decode_error() -> None:
    with pytest.raises(DecodeError, match="unsupported"):
        decode_request(_header(ApiKey.PRODUCE, 2), memoryview(b""))
    with pytest.raises(DecodeError, match="unsupported"):
        decode_request(_header(999, 0), memoryview(b""))


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_random_garbage_raises_only_decode_error(api_key: int, version: int) -> None:
    rng = random.Random(f"{api_key}-{version}")
    for _ in range(200):
        garbage = rng.randbytes(rng.randint(0, 64))
        with contextlib.suppress(DecodeError):
            decode_request(_header(api_key, version), memoryview(garbage))
        with contextlib.suppress(DecodeError):
            decode_response(api_key, version, memoryview(garbage))


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_corrupted_valid_frames_raise_only_decode_error(api_key: int, version: int) -> None:
    api = APIS[api_key]
    rng = random.Random(version)
    body = sample_struct(api.request.construct_for(version), rng)
    frame = bytearray(encode_request(api_key, version, 1, "c", body)[4:])
    for _ in range(100):
        corrupted = bytearray(frame)
        for _ in range(rng.randint(1, 4)):
            corrupted[rng.randrange(len(corrupted))] = rng.choice([0x00, 0xFF, 0x7F, 0x80])
        with contextlib.suppress(DecodeError):
            _decode_frame(bytes(corrupted))


def test_many_tiny_array_elements_are_refused_before_becoming_objects() -> None:
    """Every element fits in the frame, but a million 2-byte topic names would be a
    million Python objects: the per-frame element budget refuses them."""
    count = 1_000_000
    body = struct.pack(">i", count) + struct.pack(">h", 0) * count  # Metadata v1: topic names
    started = time.perf_counter()
    with pytest.raises(DecodeError, match="array elements"):
        decode_request(_header(ApiKey.METADATA, 1), memoryview(body))
    assert time.perf_counter() - started < 0.5


def test_element_budget_spans_every_array_of_the_frame() -> None:
    view = memoryview(struct.pack(">i", 3) + struct.pack(">h", 0) * 3)
    stream = FrameIO(view, elements_max=2)
    with pytest.raises(DecodeError, match="array elements"):
        APIS[ApiKey.METADATA].request.compiled_for(1).parse_stream(stream)
