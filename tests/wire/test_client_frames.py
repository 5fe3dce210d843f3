"""Decode request frames exactly as real clients sent them, and re-encode them identically."""

from __future__ import annotations

import pytest

from weir.format.compression import Codec
from weir.format.record_batch import decode_records, iter_batch_headers, verify_crc
from weir.wire.messages.api_versions import ApiVersionsRequest
from weir.wire.protocol import ApiKey, decode_request, encode_request, parse_request_header

from . import client_frames as frames

HELLO = b"hello " * 20

ALL_FRAMES = {
    name: getattr(frames, name) for name in dir(frames) if name.isupper() and "_V" in name
}


@pytest.mark.parametrize("name", sorted(ALL_FRAMES))
def test_client_frame_decodes_and_re_encodes_byte_for_byte(name: str) -> None:
    frame = ALL_FRAMES[name]
    header = parse_request_header(memoryview(frame))
    if header.api_key == ApiKey.API_VERSIONS and header.api_version > 3:
        pytest.skip("answered with a v0 response, never decoded (KIP-511)")
    body = decode_request(header, memoryview(frame))
    again = encode_request(
        header.api_key, header.api_version, header.correlation_id, header.client_id, body
    )
    assert again[4:] == frame


def test_librdkafka_api_versions_v3_request() -> None:
    frame = memoryview(frames.LIBRDKAFKA_API_VERSIONS_V3)
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 3, 1)
    assert header.client_id == "rdkafka"
    assert header.body_offset == 18  # header v2: 8 + 2 + len("rdkafka") + 1 (tags)
    body = decode_request(header, frame)
    assert body.client_software_name == "confluent-kafka-python"
    assert body.client_software_version == "2.16.1-rdkafka-2.16.0"


def test_kafka_python_api_versions_v4_header_parses_though_unsupported() -> None:
    header = parse_request_header(memoryview(frames.KAFKA_PYTHON_API_VERSIONS_V4))
    assert (header.api_key, header.api_version, header.client_id) == (18, 4, "kpy")


def test_aiokafka_api_versions_v0_request_has_an_empty_body() -> None:
    frame = memoryview(frames.AIOKAFKA_API_VERSIONS_V0)
    header = parse_request_header(frame)
    assert (header.api_version, header.client_id) == (0, "aiok")
    assert decode_request(header, frame) == ApiVersionsRequest()  # every field its default


def test_librdkafka_metadata_v12_request() -> None:
    frame = memoryview(frames.LIBRDKAFKA_METADATA_V12)
    body = decode_request(parse_request_header(frame), frame)
    assert [(t.name, t.topic_id.int) for t in body.topics] == [("t", 0)]
    assert body.allow_auto_topic_creation is True
    assert body.include_topic_authorized_operations is False


def test_kafka_python_fetch_v12_request() -> None:
    frame = memoryview(frames.KAFKA_PYTHON_FETCH_V12)
    body = decode_request(parse_request_header(frame), frame)
    assert body.replica_id == -1 and body.max_wait_ms == 500
    assert body.session_id == 0 and body.session_epoch == 0  # opens a fetch session
    assert body.cluster_id is None
    (topic,) = body.topics
    assert topic.topic == "t"
    assert [p.partition for p in topic.partitions] == [0]


def test_librdkafka_fetch_v12_request() -> None:
    frame = memoryview(frames.LIBRDKAFKA_FETCH_V12)
    body = decode_request(parse_request_header(frame), frame)
    (topic,) = body.topics
    (partition,) = topic.partitions
    assert (topic.topic, partition.partition, partition.fetch_offset) == ("t", 0, 0)


def test_list_offsets_requests() -> None:
    for raw, version in (
        (frames.KAFKA_PYTHON_LIST_OFFSETS_V7, 7),
        (frames.AIOKAFKA_LIST_OFFSETS_V3, 3),
    ):
        frame = memoryview(raw)
        header = parse_request_header(frame)
        assert header.api_version == version
        body = decode_request(header, frame)
        (topic,) = body.topics
        assert topic.name == "t"
        assert topic.partitions[0].timestamp in (-1, -2)


PRODUCE_FRAMES = [
    ("LIBRDKAFKA_PRODUCE_V9_UNCOMPRESSED", Codec.NONE, 2),
    ("LIBRDKAFKA_PRODUCE_V9_GZIP", Codec.GZIP, 2),
    ("LIBRDKAFKA_PRODUCE_V9_SNAPPY", Codec.SNAPPY, 2),
    ("LIBRDKAFKA_PRODUCE_V9_ZSTD", Codec.ZSTD, 2),
    ("KAFKA_PYTHON_PRODUCE_V9_LZ4", Codec.LZ4, 2),
    ("AIOKAFKA_PRODUCE_V7_SNAPPY", Codec.SNAPPY, 1),
]


@pytest.mark.parametrize(("name", "codec", "records_count"), PRODUCE_FRAMES)
def test_produce_records_are_zero_copy_slices_of_client_batches(
    name: str, codec: Codec, records_count: int
) -> None:
    raw = getattr(frames, name)
    frame = memoryview(raw)
    body = decode_request(parse_request_header(frame), frame)
    assert body.acks in (-1, 1)
    assert body.transactional_id is None
    (topic,) = body.topic_data
    (partition,) = topic.partition_data
    records = partition.records
    assert isinstance(records, memoryview)
    assert records.obj is raw  # a slice of the frame, not a copy
    ((pos, header),) = list(iter_batch_headers(records))
    assert header.compression == codec
    assert verify_crc(records, pos, header)
    decoded = list(decode_records(records, uncompressed_bytes_max=1 << 20))
    assert len(decoded) == records_count
    assert (decoded[0].key, decoded[0].value, decoded[0].headers) == (b"k1", HELLO, [("h1", b"v1")])
    if records_count == 2:
        assert (decoded[1].key, decoded[1].value, decoded[1].offset) == (None, b"world", 1)
