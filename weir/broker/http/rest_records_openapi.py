"""The OpenAPI 3 path items of the records API (weir.broker.http.rest_records), as
a dict the served document (weir.broker.http.openapi) merges: `RECORDS_OPENAPI_PATHS`."""

from __future__ import annotations

from typing import Any

_ERROR = {
    "type": "object",
    "required": ["error_code", "message"],
    "properties": {"error_code": {"type": "integer"}, "message": {"type": "string"}},
}


def _path_param(name: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": schema or {"type": "string"}}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def _errors(*statuses: int) -> dict[str, Any]:
    return {
        str(status): {
            "description": "an error (`error_code`: Confluent's code where it has one)",
            "content": {"application/json": {"schema": _ERROR}},
        }
        for status in statuses
    }


_DATA = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["BINARY", "JSON", "STRING"], "default": "JSON"},
        "data": {"description": "any JSON (JSON), base64 (BINARY) or text (STRING); null: null"},
    },
}

_PRODUCE_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "partition_id": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
        "headers": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "value": {"type": "string", "format": "byte", "nullable": True},
                },
            },
        },
        "key": _DATA,
        "value": _DATA,
        "timestamp": {"type": "string", "format": "date-time"},
    },
}

_SIZE = {
    "type": "object",
    "properties": {"type": {"type": "string"}, "size": {"type": "integer"}},
}

_PRODUCE_RESPONSE = {
    "type": "object",
    "required": ["error_code"],
    "properties": {
        "error_code": {"type": "integer", "description": "200: written; else the record's error"},
        "message": {"type": "string"},
        "cluster_id": {"type": "string"},
        "topic_name": {"type": "string"},
        "partition_id": {"type": "integer"},
        "offset": {"type": "integer", "format": "int64"},
        "timestamp": {"type": "string", "format": "date-time"},
        "key": _SIZE,
        "value": _SIZE,
    },
}

_READ_DATA = {
    "type": "object",
    "nullable": True,
    "properties": {"type": {"type": "string", "enum": ["BINARY", "JSON", "STRING"]}, "data": {}},
}

_RECORD = {
    "type": "object",
    "properties": {
        "partition_id": {"type": "integer"},
        "offset": {"type": "integer", "format": "int64"},
        "timestamp": {"type": "string", "format": "date-time"},
        "timestamp_ms": {"type": "integer", "format": "int64"},
        "key": _READ_DATA,
        "value": _READ_DATA,
        "headers": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "value": {"type": "string", "format": "byte", "nullable": True},
                },
            },
        },
    },
}

_READ_RESPONSE = {
    "type": "object",
    "properties": {
        "cluster_id": {"type": "string"},
        "topic_name": {"type": "string"},
        "partition_id": {"type": "integer"},
        "records": {"type": "array", "items": _RECORD},
        "next_offset": {"type": "integer", "format": "int64"},
        "high_watermark": {"type": "integer", "format": "int64"},
        "log_start_offset": {"type": "integer", "format": "int64"},
        "scanned_records": {
            "type": "integer",
            "description": "records read, matched by the filter or not",
        },
        "stopped": {
            "type": "string",
            "enum": ["max_records", "max_bytes", "scan_limit", "end"],
            "description": (
                "why the read ended: enough records or bytes, the scan bounds of a filtered "
                "read, or the end of what the partition holds now; go on from next_offset"
            ),
        },
    },
}

_FORMAT = _query(
    "format",
    {"type": "string", "enum": ["auto", "json", "string", "binary"], "default": "auto"},
    "auto: JSON when they parse, else text when UTF-8, else base64",
)
_ISOLATION = _query(
    "isolation_level",
    {
        "type": "string",
        "enum": ["read_uncommitted", "read_committed"],
        "default": "read_uncommitted",
    },
    "read_committed leaves out aborted transactions and stops at the last stable offset",
)
_OFFSET = _query("offset", {"type": "integer", "minimum": 0}, "the first offset to read")
_TIMESTAMP = _query(
    "timestamp",
    {"type": "integer", "minimum": 0},
    "read from the first record at or after this time (ms since the epoch)",
)
_MAX_BYTES = _query(
    "max_bytes",
    {"type": "integer", "minimum": 1, "maximum": 16 * 1024 * 1024},
    "about the most key and value bytes",
)

_TEXT = {"type": "string", "maxLength": 1024}
_FILTERS = [
    _query("key", _TEXT, "only records whose key is this text (its UTF-8 bytes), exactly"),
    _query("header_name", _TEXT, "only records with a header of this name"),
    _query("header_value", _TEXT, "with header_name: only where that header's value is this text"),
    _query("value_contains", _TEXT, "only records whose value holds this text (UTF-8 bytes)"),
]
_SCAN_BOUNDS = [
    _query(
        "scan_max_records",
        {"type": "integer", "minimum": 1, "maximum": 100_000, "default": 10_000},
        "a filtered read scans at most this many records (matching or not)",
    ),
    _query(
        "scan_max_bytes",
        {"type": "integer", "minimum": 1, "maximum": 16 * 1024 * 1024, "default": 4 * 1024 * 1024},
        "a filtered read scans at most about this many key, value and header bytes",
    ),
]

_LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "example": "1:5"},
    "description": "an EventSource's last event id (partition:offset): resume after it",
}

_CLUSTER = _path_param("cluster_id")
_TOPIC = _path_param("topic_name")
_PARTITION = _path_param("partition_id", {"type": "integer", "minimum": 0})


def _stream_get(operation_id: str, summary: str, params: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "get": {
            "operationId": operation_id,
            "summary": summary,
            "description": (
                "Server-sent events: `event: record` (id `partition:offset`, data one record "
                "as JSON), a `: keep-alive` comment while the topic is quiet, and a last "
                "`event: error` if the topic can no longer be read."
            ),
            "parameters": params,
            "responses": {
                "200": {
                    "description": "the event stream",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                **_errors(400, 401, 403, 404),
            },
        }
    }


_START = _query(
    "from",
    {"type": "string", "enum": ["beginning", "end"], "default": "end"},
    "where to start without offset or timestamp",
)

_PARTITION_RECORDS = (
    "/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/records"
)

RECORDS_OPENAPI_PATHS: dict[str, Any] = {
    "/v3/clusters/{cluster_id}/topics/{topic_name}/records": {
        "post": {
            "operationId": "produceRecord",
            "summary": "Produce records (Confluent REST Proxy v3)",
            "description": (
                "One record, answered with its delivery report; or, with `Transfer-Encoding: "
                "chunked`, concatenated JSON records answered by a stream of delivery reports, one "
                "per record, in order. Needs WRITE on the topic (and DESCRIBE to find it)."
            ),
            "parameters": [_CLUSTER, _TOPIC],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _PRODUCE_REQUEST}},
            },
            "responses": {
                "200": {
                    "description": "the delivery report(s)",
                    "content": {"application/json": {"schema": _PRODUCE_RESPONSE}},
                },
                **_errors(400, 401, 403, 404, 408, 413, 415, 422, 500, 503),
            },
        }
    },
    _PARTITION_RECORDS: {
        "get": {
            "operationId": "readRecords",
            "summary": "Read a partition from an offset or a timestamp (Weir)",
            "description": "Needs READ on the topic; or `Accept: text/event-stream`: a stream.",
            "parameters": [
                _CLUSTER,
                _TOPIC,
                _PARTITION,
                _OFFSET,
                _TIMESTAMP,
                _query(
                    "max_records",
                    {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100},
                    "the most records",
                ),
                _MAX_BYTES,
                _FORMAT,
                _ISOLATION,
                *_FILTERS,
                *_SCAN_BOUNDS,
            ],
            "responses": {
                "200": {
                    "description": "the records",
                    "content": {"application/json": {"schema": _READ_RESPONSE}},
                },
                **_errors(400, 401, 403, 404, 422, 500, 503),
            },
        }
    },
    _PARTITION_RECORDS + "/stream": _stream_get(
        "followPartitionRecords",
        "Follow a partition live (Weir)",
        [
            _CLUSTER,
            _TOPIC,
            _PARTITION,
            _OFFSET,
            _TIMESTAMP,
            _START,
            _FORMAT,
            _ISOLATION,
            *_FILTERS,
            _LAST_EVENT_ID,
        ],
    ),
    "/v3/clusters/{cluster_id}/topics/{topic_name}/records/stream": _stream_get(
        "followTopicRecords",
        "Follow every partition of a topic live (Weir)",
        [_CLUSTER, _TOPIC, _TIMESTAMP, _START, _FORMAT, _ISOLATION, *_FILTERS],
    ),
}
