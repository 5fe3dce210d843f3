"""The JSON of the records API (weir.broker.http.rest_records), pure: no Trio, no
broker. Confluent REST Proxy v3's produce request, delivery report and error
shapes; the concatenated-JSON body of its streaming mode; and Weir's JSON for a
record read back.

A produce request (one JSON object; many, concatenated, in streaming mode):

    {"partition_id": 1,                              optional
     "headers": [{"name": "h", "value": "<base64>"}], optional
     "key":   {"type": "JSON" | "BINARY" | "STRING", "data": ...},  optional
     "value": {"type": ..., "data": ...},            optional
     "timestamp": "2026-11-27T10:00:00.000Z"}        optional (ISO 8601)

`data` is any JSON value for JSON (stored as its compact encoding), base64 for
BINARY, text for STRING (stored as UTF-8); a missing `type` means JSON (Weir has
no schema registry for Confluent's schema-typed formats); `"data": null` or no
key/value at all is a null key/value.

Errors are `{"error_code": <HTTP status * 100 + subcode, or the status>, "message":
...}` with Confluent's codes where it has one (40401 unknown topic, 40402 unknown
partition, 40403 not hosted here, 40301 not authorized, 42201 record too large).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

# Headers of one record (Kafka has no limit of its own but the batch size).
RECORD_HEADERS_MAX = 1024
# Partition ids are Kafka INT32s; anything else is refused before any lookup.
PARTITION_ID_MAX = 2**31 - 1
# JSON nesting accepted in a request (Python's own parser recurses).
JSON_DEPTH_MAX = 64


class EmbeddedFormat(StrEnum):
    BINARY = "BINARY"
    JSON = "JSON"
    STRING = "STRING"


class RestError(Exception):
    """An answer other than success: the HTTP status and Confluent's error code."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return error_body(self.error_code, self.message)


def error_body(error_code: int, message: str) -> dict[str, object]:
    return {"error_code": error_code, "message": message}


def bad_request(message: str) -> RestError:
    return RestError(400, 400, message)


# Produce --------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordPart:
    """A key or a value as produced: its bytes (None: null) and the format it came in."""

    data: bytes | None
    format: EmbeddedFormat | None


NO_PART = RecordPart(None, None)


@dataclass(frozen=True)
class ProduceRecord:
    partition_id: int | None
    key: RecordPart
    value: RecordPart
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int | None


PRODUCE_FIELDS = frozenset({"partition_id", "headers", "key", "value", "timestamp", "id"})


def parse_produce_record(document: object) -> ProduceRecord:
    """One produce request's record, or RestError(400) saying what is wrong."""
    if not isinstance(document, dict):
        raise bad_request("a produce request is a JSON object")
    unknown = set(document) - PRODUCE_FIELDS
    if unknown:
        raise bad_request(f"unknown field(s) in the produce request: {sorted(unknown)}")
    return ProduceRecord(
        partition_id=_partition_id(document.get("partition_id")),
        key=parse_record_part(document.get("key"), "key"),
        value=parse_record_part(document.get("value"), "value"),
        headers=_headers(document.get("headers")),
        timestamp_ms=_timestamp(document.get("timestamp")),
    )


def _partition_id(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request("partition_id must be an integer")
    if not 0 <= value <= PARTITION_ID_MAX:
        raise bad_request(f"partition_id {value} is not a partition (0 to {PARTITION_ID_MAX})")
    return value


def parse_record_part(value: object, what: str) -> RecordPart:
    """A `key` or `value` object: {"type": ..., "data": ...}."""
    if value is None:
        return NO_PART
    if not isinstance(value, dict):
        raise bad_request(f"{what} must be an object with 'type' and 'data'")
    unknown = set(value) - {"type", "data"}
    if unknown:
        # Confluent's schema fields (schema_id, subject, ...): no schema registry here.
        raise bad_request(f"{what}: unsupported field(s) {sorted(unknown)} (no schema registry)")
    type_name = value.get("type", EmbeddedFormat.JSON.value)
    try:
        embedded = EmbeddedFormat(type_name)
    except ValueError:
        raise bad_request(
            f"{what}.type must be one of BINARY, JSON, STRING (not {type_name!r})"
        ) from None
    return RecordPart(_part_bytes(embedded, value.get("data"), what), embedded)


def _part_bytes(embedded: EmbeddedFormat, data: object, what: str) -> bytes | None:
    if data is None:
        return None
    if embedded is EmbeddedFormat.JSON:
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    if not isinstance(data, str):
        raise bad_request(f"{what}.data must be a string for type {embedded.value}")
    if embedded is EmbeddedFormat.STRING:
        return data.encode("utf-8", "surrogatepass")
    return decode_base64(data, f"{what}.data")


def decode_base64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"{what} is not valid base64") from None


def _headers(value: object) -> tuple[tuple[str, bytes | None], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request("headers must be a list of {name, value}")
    if len(value) > RECORD_HEADERS_MAX:
        raise bad_request(f"a record has at most {RECORD_HEADERS_MAX} headers")
    headers = []
    for header in value:
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            raise bad_request('a header is {"name": string, "value": base64 or null}')
        data = header.get("value")
        if data is not None and not isinstance(data, str):
            raise bad_request(f"header {header['name']!r}: value must be base64 or null")
        decoded = None if data is None else decode_base64(data, f"header {header['name']!r}")
        headers.append((header["name"], decoded))
    return tuple(headers)


def _timestamp(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad_request("timestamp must be an ISO 8601 date-time string")
    return parse_timestamp(value)


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 date-time ("Z" or an offset)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise bad_request(f"timestamp {text!r} is not an ISO 8601 date-time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def format_timestamp(timestamp_ms: int) -> str:
    """ISO 8601 in UTC with milliseconds, as Confluent's reports write it."""
    moment = datetime.fromtimestamp(timestamp_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{timestamp_ms % 1000:03d}Z"


def delivery_report(
    cluster_id: str,
    topic: str,
    partition: int,
    offset: int,
    timestamp_ms: int,
    record: ProduceRecord,
) -> dict[str, object]:
    """Confluent's ProduceResponse for a record written at `offset`."""
    report: dict[str, object] = {
        "error_code": 200,
        "cluster_id": cluster_id,
        "topic_name": topic,
        "partition_id": partition,
        "offset": offset,
        "timestamp": format_timestamp(timestamp_ms),
    }
    for name, part in (("key", record.key), ("value", record.value)):
        if part.format is not None:
            report[name] = {"type": part.format.value, "size": len(part.data or b"")}
    return report


# The streaming body: concatenated JSON objects ----------------------------------


class ConcatenatedObjects:
    """Splits a byte stream of concatenated JSON objects (whitespace between them
    allowed) into the objects, as bytes arrive. Holds at most one object's text
    plus the last chunk: an object longer than `object_bytes_max` is refused
    (413) before it is all read."""

    def __init__(self, object_bytes_max: int) -> None:
        self.object_bytes_max = object_bytes_max
        self._buffer = bytearray()
        self._scan = 0  # bytes of the buffer already scanned
        self._depth = 0
        self._in_string = False
        self._escaped = False

    def feed(self, chunk: bytes) -> list[Any]:
        """The objects completed by `chunk`, in order; bad JSON ends the list with
        a RestError (400, or 413 for an object too long), and the stream with it."""
        self._buffer += chunk
        objects: list[Any] = []
        try:
            while (end := self._object_end()) is not None:
                text = bytes(self._buffer[:end])
                del self._buffer[:end]
                self._scan = 0
                objects.append(parse_json(text))
            if len(self._buffer) > self.object_bytes_max:
                raise RestError(
                    413, 413, f"a record's JSON is longer than {self.object_bytes_max} bytes"
                )
        except RestError as error:
            self._buffer.clear()
            objects.append(error)
        return objects

    def finish(self) -> None:
        """The body ended: anything but whitespace left is a truncated object."""
        if self._buffer.strip():
            raise bad_request("the request body ends inside a JSON object")

    def _object_end(self) -> int | None:
        """The end of the first complete top-level object in the buffer, if any."""
        buffer = self._buffer
        pos = self._scan
        if self._depth == 0:
            while pos < len(buffer) and buffer[pos] in b" \t\r\n":
                pos += 1
            del buffer[:pos]
            pos = 0
            if not buffer:
                self._scan = 0
                return None
            if buffer[0] != ord("{"):
                raise bad_request("the request body is not a sequence of JSON objects")
        while pos < len(buffer):
            byte = buffer[pos]
            pos += 1
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif byte == 0x5C:  # backslash
                    self._escaped = True
                elif byte == 0x22:  # quote
                    self._in_string = False
            elif byte == 0x22:
                self._in_string = True
            elif byte in b"{[":
                self._depth += 1
                if self._depth > JSON_DEPTH_MAX:
                    raise bad_request(f"JSON nested deeper than {JSON_DEPTH_MAX}")
            elif byte in b"}]":
                self._depth -= 1
                if self._depth == 0:
                    self._scan = 0
                    return pos
        self._scan = pos
        return None


def parse_json(text: bytes) -> Any:
    """One JSON document, or RestError(400)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None


# Reading --------------------------------------------------------------------------


class ValueFormat(StrEnum):
    """How a read record's key and value are written: AUTO is JSON when the bytes
    are JSON, else STRING when UTF-8 text, else BINARY."""

    AUTO = "AUTO"
    BINARY = "BINARY"
    JSON = "JSON"
    STRING = "STRING"


def render_part(data: bytes | None, wanted: ValueFormat) -> dict[str, object] | None:
    """{"type": ..., "data": ...} for a key or value read back (None: null)."""
    if data is None:
        return None
    if wanted in (ValueFormat.AUTO, ValueFormat.JSON):
        try:
            return {"type": "JSON", "data": json.loads(data)}
        except (ValueError, RecursionError):
            if wanted is ValueFormat.JSON:
                return {"type": "BINARY", "data": base64.b64encode(data).decode()}
    if wanted in (ValueFormat.AUTO, ValueFormat.STRING):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and (wanted is ValueFormat.STRING or _is_text(text)):
            return {"type": "STRING", "data": text}
    return {"type": "BINARY", "data": base64.b64encode(data).decode()}


def _is_text(text: str) -> bool:
    """No control characters but tabs and line ends: AUTO's test for text."""
    return not any(ord(c) < 0x20 and c not in "\t\r\n" or c == "\x7f" for c in text)


def render_record(
    partition: int,
    offset: int,
    timestamp_ms: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]],
    wanted: ValueFormat,
) -> dict[str, object]:
    return {
        "partition_id": partition,
        "offset": offset,
        "timestamp": format_timestamp(timestamp_ms),
        "timestamp_ms": timestamp_ms,
        "key": render_part(key, wanted),
        "value": render_part(value, wanted),
        "headers": [
            {"name": name, "value": None if data is None else base64.b64encode(data).decode()}
            for name, data in headers
        ],
    }
