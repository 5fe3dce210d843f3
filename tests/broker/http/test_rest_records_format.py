"""The records API's JSON (weir.broker.http.rest_records_format): Confluent's produce
request parsed and refused with its error codes, delivery reports, the streaming
body split into records whatever the chunking, and records rendered for reading."""

from __future__ import annotations

import base64
import json

import pytest

from weir.broker.http.rest_records_format import (
    JSON_DEPTH_MAX,
    RECORD_HEADERS_MAX,
    ConcatenatedObjects,
    EmbeddedFormat,
    RestError,
    ValueFormat,
    delivery_report,
    format_timestamp,
    parse_produce_record,
    parse_timestamp,
    render_part,
)


def refusal(document: object) -> RestError:
    with pytest.raises(RestError) as caught:
        parse_produce_record(document)
    return caught.value


def test_each_embedded_format_is_stored_as_its_bytes() -> None:
    record = parse_produce_record(
        {
            "partition_id": 2,
            "key": {"type": "STRING", "data": "clé"},
            "value": {"type": "JSON", "data": {"a": [1, 2], "b": "x"}},
            "headers": [{"name": "h", "value": base64.b64encode(b"\x00\x01").decode()},
                        {"name": "n", "value": None}],
            "timestamp": "2026-11-27T10:00:00.250Z",
        }
    )  # fmt: skip
    assert record.partition_id == 2
    assert record.key.data == "clé".encode()
    assert record.value.data == b'{"a":[1,2],"b":"x"}'
    assert record.headers == (("h", b"\x00\x01"), ("n", None))
    assert record.timestamp_ms == parse_timestamp("2026-11-27T10:00:00.250+00:00")
    binary = parse_produce_record({"value": {"type": "BINARY", "data": "AAEC"}})
    assert binary.value.data == b"\x00\x01\x02"


def test_a_missing_type_is_json_and_null_data_is_a_null_value() -> None:
    record = parse_produce_record({"value": {"data": [1]}, "key": {"type": "BINARY", "data": None}})
    assert (record.value.data, record.value.format) == (b"[1]", EmbeddedFormat.JSON)
    assert record.key.data is None
    assert parse_produce_record({}).value.data is None


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ([1], "JSON object"),
        ({"value": {"type": "BINARY", "data": "not base64!"}}, "base64"),
        ({"headers": [{"name": "h", "value": "%%"}]}, "base64"),
        ({"partition_id": -1}, "not a partition"),
        ({"partition_id": 2**31}, "not a partition"),
        ({"partition_id": "1"}, "integer"),
        ({"partition_id": True}, "integer"),
        ({"value": {"type": "AVRO", "data": {}}}, "BINARY, JSON, STRING"),
        ({"value": {"schema_id": 1, "data": {}}}, "schema registry"),
        ({"value": {"type": "STRING", "data": 5}}, "must be a string"),
        ({"timestamp": 1700000000000}, "ISO 8601"),
        ({"timestamp": "yesterday"}, "ISO 8601"),
        ({"headers": {"h": "x"}}, "list"),
        ({"surprise": 1}, "unknown field"),
    ],
)
def test_a_bad_record_is_refused_with_400_saying_why(document: object, words: str) -> None:
    error = refusal(document)
    assert (error.status, error.error_code) == (400, 400)
    assert words in error.message


def test_headers_are_bounded() -> None:
    headers = [{"name": "h", "value": None}] * (RECORD_HEADERS_MAX + 1)
    assert "at most" in refusal({"headers": headers}).message


def test_a_delivery_report_has_confluents_shape() -> None:
    record = parse_produce_record(
        {"key": {"type": "STRING", "data": "k"}, "value": {"type": "BINARY", "data": "AAEC"}}
    )
    report = delivery_report("c1", "t", 3, 17, 1_700_000_000_123, record)
    assert report == {
        "error_code": 200,
        "cluster_id": "c1",
        "topic_name": "t",
        "partition_id": 3,
        "offset": 17,
        "timestamp": "2023-11-14T22:13:20.123Z",
        "key": {"type": "STRING", "size": 1},
        "value": {"type": "BINARY", "size": 3},
    }
    assert "key" not in delivery_report("c1", "t", 0, 0, 0, parse_produce_record({}))


def test_timestamps_round_trip_through_iso_8601() -> None:
    for timestamp_ms in (0, 1_700_000_000_001, 1_795_778_553_174):
        assert parse_timestamp(format_timestamp(timestamp_ms)) == timestamp_ms


def split_every(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_concatenated_objects_come_out_whole_whatever_the_chunking() -> None:
    documents = [
        {"value": {"data": 'a "quoted" } brace and a \\ backslash'}},
        {"value": {"type": "STRING", "data": "{[ not structure ]}"}},
        {"key": {"data": {"nested": [{"x": 1}]}}},
    ]
    body = ("\n".join(json.dumps(d) for d in documents) + "  \r\n").encode()
    for size in (1, 2, 3, 7, 64, len(body)):
        splitter = ConcatenatedObjects(1024 * 1024)
        out = [o for chunk in split_every(body, size) for o in splitter.feed(chunk)]
        splitter.finish()
        assert out == documents, size


def test_bad_json_ends_the_stream_after_the_good_objects_before_it() -> None:
    splitter = ConcatenatedObjects(1024 * 1024)
    out = splitter.feed(b'{"value": {"data": 1}} [1, 2]')
    assert out[0] == {"value": {"data": 1}}
    assert isinstance(out[1], RestError) and out[1].status == 400
    splitter = ConcatenatedObjects(1024 * 1024)
    [error] = splitter.feed(b'{"value": nope}')
    assert isinstance(error, RestError) and error.status == 400


def test_a_truncated_last_object_is_refused_at_the_end_of_the_body() -> None:
    splitter = ConcatenatedObjects(1024 * 1024)
    assert splitter.feed(b'{"value": {"data": 1}') == []
    with pytest.raises(RestError):
        splitter.finish()


def test_an_object_longer_than_the_bound_is_refused_before_it_ends() -> None:
    splitter = ConcatenatedObjects(object_bytes_max=100)
    assert splitter.feed(b'{"value": {"data": "' + b"x" * 60) == []
    [error] = splitter.feed(b"x" * 60)
    assert isinstance(error, RestError) and error.status == 413


def test_nesting_deeper_than_the_bound_is_refused_without_recursing() -> None:
    splitter = ConcatenatedObjects(1024 * 1024)
    [error] = splitter.feed(b"{" + b'"a":[' * (JSON_DEPTH_MAX + 1))
    assert isinstance(error, RestError) and "nested" in error.message


def test_auto_renders_json_then_text_then_base64() -> None:
    assert render_part(b'{"a":1}', ValueFormat.AUTO) == {"type": "JSON", "data": {"a": 1}}
    assert render_part(b"plain words", ValueFormat.AUTO) == {
        "type": "STRING",
        "data": "plain words",
    }
    assert render_part(b"\x00\x01", ValueFormat.AUTO) == {"type": "BINARY", "data": "AAE="}
    assert render_part(b"\xff", ValueFormat.STRING) == {"type": "BINARY", "data": "/w=="}
    assert render_part(b"1", ValueFormat.BINARY) == {"type": "BINARY", "data": "MQ=="}
    assert render_part(b"1", ValueFormat.STRING) == {"type": "STRING", "data": "1"}
    assert render_part(None, ValueFormat.AUTO) is None
