"""The transaction APIs byte for byte, laid out by hand from Kafka 4.4's message specs
(flexible versions: compact strings and arrays as uvarint length + 1, a tag buffer
after every struct), and their place in the registry: declared, encodable and
decodable, but not advertised until served."""

from __future__ import annotations

import struct

import pytest

from weir.format.primitives import FrameIO
from weir.format.schema import Message
from weir.wire.apis.transactions import (
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    LIST_TRANSACTIONS,
    WRITE_TXN_MARKERS,
)
from weir.wire.protocol import (
    APIS,
    DECLARED_APIS,
    DECLARED_NOT_SERVED,
    SUPPORTED_VERSIONS,
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)

from .sample_bodies import plain

NO_TAGS = b"\x00"
PRODUCER_ID = 4000
EPOCH = 7


def s(text: str) -> bytes:
    """A compact string."""
    data = text.encode()
    return bytes([len(data) + 1]) + data


def legacy_s(text: str) -> bytes:
    """A non-flexible string: int16 length."""
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def array(*items: bytes) -> bytes:
    """A compact array of already-encoded items."""
    return bytes([len(items) + 1]) + b"".join(items)


def check(message: Message, version: int, body: dict[str, object], expected: bytes) -> None:
    """`body` (fields of `version` only) encodes as `expected`, which decodes to it."""
    assert message.build(body, version) == expected
    assert plain(message.parse(FrameIO(expected), version)) == plain(message.value_of(body))


TRANSACTION_KEYS = {
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.WRITE_TXN_MARKERS: (1, 2),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
}


def test_transaction_apis_are_declared_with_the_versions_kafka_4_4_serves() -> None:
    assert {key: DECLARED_APIS[key].versions for key in TRANSACTION_KEYS} == TRANSACTION_KEYS
    assert SUPPORTED_VERSIONS[ApiKey.PRODUCE] == (3, 12)


def test_declared_but_unserved_apis_are_not_advertised() -> None:
    assert set(DECLARED_NOT_SERVED).isdisjoint(SUPPORTED_VERSIONS)
    assert set(DECLARED_NOT_SERVED).isdisjoint(APIS)
    assert set(DECLARED_APIS) == set(APIS) | set(DECLARED_NOT_SERVED)


def test_an_unserved_api_still_encodes_requests_and_decodes_responses() -> None:
    body = {"transactional_id": "t", "producer_id": PRODUCER_ID, "producer_epoch": EPOCH}
    frame = encode_request(ApiKey.END_TXN, 5, 11, "c", {**body, "committed": True})
    view = memoryview(frame)[4:]
    header = parse_request_header(view)
    assert header.body_offset == 2 + 2 + 4 + 2 + 1 + 1  # header v2: a tag buffer after "c"
    assert decode_request(header, view).committed is True

    response = {"error_code": 0, "producer_id": PRODUCER_ID, "producer_epoch": EPOCH + 1}
    frame = encode_response(ApiKey.END_TXN, 5, 11, response)
    correlation_id, decoded = decode_response(ApiKey.END_TXN, 5, memoryview(frame)[4:])
    assert (correlation_id, decoded.producer_epoch) == (11, EPOCH + 1)


def test_add_partitions_v3_request_is_one_transaction_at_the_top_level() -> None:
    body = {
        "v3_and_below_transactional_id": "tx",
        "v3_and_below_producer_id": PRODUCER_ID,
        "v3_and_below_producer_epoch": EPOCH,
        "v3_and_below_topics": [{"name": "t", "partitions": [0, 2]}],
    }
    topic = s("t") + array(i32(0), i32(2)) + NO_TAGS
    expected = s("tx") + i64(PRODUCER_ID) + i16(EPOCH) + array(topic) + NO_TAGS
    check(ADD_PARTITIONS_TO_TXN.request, 3, body, expected)


def test_add_partitions_v0_request_is_not_flexible() -> None:
    body = {
        "v3_and_below_transactional_id": "tx",
        "v3_and_below_producer_id": PRODUCER_ID,
        "v3_and_below_producer_epoch": EPOCH,
        "v3_and_below_topics": [{"name": "t", "partitions": [1]}],
    }
    topic = legacy_s("t") + i32(1) + i32(1)
    expected = legacy_s("tx") + i64(PRODUCER_ID) + i16(EPOCH) + i32(1) + topic
    check(ADD_PARTITIONS_TO_TXN.request, 0, body, expected)


def test_add_partitions_v4_request_batches_transactions_with_verify_only() -> None:
    body = {
        "transactions": [
            {
                "transactional_id": "tx",
                "producer_id": PRODUCER_ID,
                "producer_epoch": EPOCH,
                "verify_only": True,
                "topics": [{"name": "t", "partitions": [3]}],
            }
        ]
    }
    topic = s("t") + array(i32(3)) + NO_TAGS
    transaction = s("tx") + i64(PRODUCER_ID) + i16(EPOCH) + b"\x01" + array(topic) + NO_TAGS
    check(ADD_PARTITIONS_TO_TXN.request, 4, body, array(transaction) + NO_TAGS)


def test_add_partitions_responses_before_and_after_v4() -> None:
    partition = i32(3) + i16(48) + NO_TAGS  # INVALID_TXN_STATE
    topic = s("t") + array(partition) + NO_TAGS
    topic_result = {
        "name": "t",
        "results_by_partition": [{"partition_index": 3, "partition_error_code": 48}],
    }
    v3 = {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [topic_result]}
    check(ADD_PARTITIONS_TO_TXN.response, 3, v3, i32(0) + array(topic) + NO_TAGS)
    v4 = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "results_by_transaction": [{"transactional_id": "tx", "topic_results": [topic_result]}],
    }
    by_transaction = s("tx") + array(topic) + NO_TAGS
    check(ADD_PARTITIONS_TO_TXN.response, 4, v4, i32(0) + i16(0) + array(by_transaction) + NO_TAGS)


@pytest.mark.parametrize("version", [3, 4])
def test_end_txn_response_before_v5_has_no_producer(version: int) -> None:
    check(
        END_TXN.response, version, {"throttle_time_ms": 0, "error_code": 0}, i32(0, 0)[:6] + NO_TAGS
    )


def test_end_txn_v5_response_returns_the_producer_id_and_bumped_epoch() -> None:
    body = {"throttle_time_ms": 0, "error_code": 0, "producer_id": PRODUCER_ID, "producer_epoch": 8}
    expected = i32(0) + i16(0) + i64(PRODUCER_ID) + i16(8) + NO_TAGS
    check(END_TXN.response, 5, body, expected)
    decoded = END_TXN.response.parse(FrameIO(i32(0) + i16(0) + NO_TAGS), 4)
    assert (decoded.producer_id, decoded.producer_epoch) == (-1, -1)


def _marker(version: int) -> dict[str, object]:
    marker: dict[str, object] = {
        "producer_id": PRODUCER_ID,
        "producer_epoch": EPOCH,
        "transaction_result": False,
        "topics": [{"name": "t", "partition_indexes": [0]}],
        "coordinator_epoch": 3,
    }
    if version >= 2:
        marker["transaction_version"] = 2
    return {"markers": [marker]}


def test_write_txn_markers_v1_and_v2_differ_only_by_the_transaction_version() -> None:
    marker_v1 = i64(PRODUCER_ID) + i16(EPOCH) + b"\x00" + array(s("t") + array(i32(0)) + NO_TAGS)
    marker_v1 += i32(3)
    check(WRITE_TXN_MARKERS.request, 1, _marker(1), array(marker_v1 + NO_TAGS) + NO_TAGS)
    marker_v2 = marker_v1 + b"\x02"
    check(WRITE_TXN_MARKERS.request, 2, _marker(2), array(marker_v2 + NO_TAGS) + NO_TAGS)


def test_write_txn_markers_v2_defaults_to_a_legacy_marker() -> None:
    decoded = WRITE_TXN_MARKERS.request.parse(
        FrameIO(WRITE_TXN_MARKERS.request.build(_marker(1), 1)), 1
    )
    assert decoded.markers[0].transaction_version == 0


def test_list_transactions_filters_by_version() -> None:
    states, producers = array(s("Ongoing")), array(i64(PRODUCER_ID))
    body: dict[str, object] = {"state_filters": ["Ongoing"], "producer_id_filters": [PRODUCER_ID]}
    check(LIST_TRANSACTIONS.request, 0, body, states + producers + NO_TAGS)
    body["duration_filter"] = 60_000
    check(LIST_TRANSACTIONS.request, 1, body, states + producers + i64(60_000) + NO_TAGS)
    body["transactional_id_pattern"] = "app-.*"
    expected = states + producers + i64(60_000) + s("app-.*") + NO_TAGS
    check(LIST_TRANSACTIONS.request, 2, body, expected)
    # null pattern: compact nullable string 0; no duration filter: -1
    no_filters = array() + array() + i64(-1) + b"\x00" + NO_TAGS
    check(LIST_TRANSACTIONS.request, 2, {}, no_filters)


def test_produce_v12_has_the_fields_of_v11() -> None:
    produce = DECLARED_APIS[ApiKey.PRODUCE]
    request = {
        "transactional_id": "tx",
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"batch"}]}],
    }
    assert produce.request.build(request, 12) == produce.request.build(request, 11)
    response = {
        "responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": 5}]}],
        "throttle_time_ms": 0,
    }
    assert produce.response.build(response, 12) == produce.response.build(response, 11)
