"""The records API over HTTP (docs/http-records.md): Confluent REST Proxy v3's
produce, with its streaming mode, and Weir's own reads of a partition and
server-sent-events streams of a topic.

- `POST /v3/clusters/{cluster_id}/topics/{topic_name}/records`: produce one record
  (or, with `Transfer-Encoding: chunked`, a stream of concatenated JSON records,
  answered by a stream of delivery reports, one per record, in order);
- `GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/records`:
  records from an offset or a timestamp, as JSON (as server-sent events when the
  request accepts `text/event-stream`);
- `GET .../partitions/{partition_id}/records/stream` and
  `GET /v3/clusters/{cluster_id}/topics/{topic_name}/records/stream`: server-sent
  events following one partition or every partition of the topic, live.

Every Kafka request goes through the Kafka gateway as the HTTP principal, so the
Kafka API's authorization rules hold (WRITE to produce, READ to read, DESCRIBE to
look the topic up), and reaches the partition's leader wherever it is.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from weir.broker.broker import Broker
from weir.broker.http.exchange import extend_deadline, stream_body
from weir.broker.http.kafka_gateway import (
    HttpCaller,
    KafkaGateway,
    gateway_of,
    http_caller,
)
from weir.broker.http.rest_records_fetched import record_bytes
from weir.broker.http.rest_records_filter import (
    RecordFilter,
    ScanBounds,
    parse_filter,
    parse_scan_bounds,
)
from weir.broker.http.rest_records_format import (
    PARTITION_ID_MAX,
    ConcatenatedObjects,
    ProduceRecord,
    RestError,
    ValueFormat,
    bad_request,
    error_body,
    parse_produce_record,
    render_record,
)
from weir.broker.http.rest_records_openapi import RECORDS_OPENAPI_PATHS
from weir.broker.http.rest_records_produce import Outcome, ProduceRound, TopicTarget, find_topic
from weir.broker.http.rest_records_read import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    PartitionRead,
    fetch_by_leader,
    fetch_one,
    list_offset,
)

__all__ = ["RECORDS_OPENAPI_PATHS", "records_routes"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]

JSON_TYPE = "application/json"
# A read's answer is built in memory (base64 makes binary values 4/3 larger).
READ_BYTES_MAX = 16 * 1024 * 1024
READ_BYTES_DEFAULT = 1024 * 1024
READ_RECORDS_MAX = 10_000
READ_RECORDS_DEFAULT = 100
# Fetches one read makes at most (each brings up to max_bytes).
READ_FETCHES_MAX = 16
# What one fetch of a server-sent-events stream brings: what the stream holds
# while its client reads (a client that does not read blocks the stream, and is
# closed at its connection's deadline).
STREAM_FETCH_BYTES_MAX = 256 * 1024
# Record lists parsed ahead of the round in flight, in a produce stream (each
# from one body chunk: at most Hypercorn's 64 KiB read, or one record).
STREAM_CHUNKS_AHEAD = 4
# Records one produce round sends at most (one batch per partition).
ROUND_RECORDS_MAX = 500
STREAM_RETRY_S = 0.5


def records_routes(broker: Broker) -> list[BaseRoute]:
    base = "/v3/clusters/{cluster_id}/topics/{topic_name}"
    partition = base + "/partitions/{partition_id}/records"
    follow_partition = _stream_endpoint(broker, one_partition=True)
    follow_topic = _stream_endpoint(broker, one_partition=False)
    return [
        Route(base + "/records", ProduceEndpoint(broker), methods=["POST"]),
        Route(partition, _read_endpoint(broker), methods=["GET"]),
        Route(partition + "/stream", follow_partition, methods=["GET"]),
        Route(base + "/records/stream", follow_topic, methods=["GET"]),
    ]


def _error_response(error: RestError) -> Response:
    return JSONResponse(error.body(), status_code=error.status)


def _outcome_json(outcome: Outcome) -> bytes:
    body = outcome.body() if isinstance(outcome, RestError) else outcome
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


# Produce ----------------------------------------------------------------------------


class _EndOfStream:
    """The body ended (or failed: `error` is then the stream's last report)."""

    def __init__(self, error: RestError | None = None) -> None:
        self.error = error


class ProduceEndpoint:
    """POST .../records as a plain ASGI app: a stream reads its request body while it
    writes its reports, which Starlette's request/response pair does not allow."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.timeout_s = broker.config.limits.http_request_timeout_ms / 1000
        # One record's JSON, as a plain body or within a stream: what one HTTP body
        # may hold (a 1 MiB record is 1.4 MiB in base64: raise the setting for it).
        self.record_bytes_max = broker.config.limits.http_body_bytes_max

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        streaming = "chunked" in request.headers.get("transfer-encoding", "").lower()
        objects: list[Any] | None = None
        try:
            _check_content_type(request)
            if not streaming:
                # Read before anything can be refused, so the connection stays usable
                # (its announced length is within http_body_bytes_max: the listener
                # refuses a longer one).
                objects = await _whole_body(receive, self.record_bytes_max)
            gateway = gateway_of(self.broker)
            caller = http_caller(self.broker, request)
            params = scope["path_params"]
            target = await find_topic(gateway, caller, params["cluster_id"], params["topic_name"])
        except RestError as error:
            # A body left unread leaves the connection unusable: say it closes.
            headers = {"connection": "close"} if objects is None else None
            await JSONResponse(error.body(), error.status, headers)(scope, receive, send)
            return
        producer = ProduceRound(gateway, caller, target, int(self.timeout_s * 1000))
        if objects is None:
            stream_body(request)  # bounded per record by the splitter instead
            await self._stream(request, send, producer)
        else:
            extend_deadline(request, self.timeout_s)  # the produce's own timeout
            await self._single(scope, receive, send, producer, objects)

    async def _single(
        self, scope: Scope, receive: Any, send: Any, producer: ProduceRound, objects: list[Any]
    ) -> None:
        """A body of known length: one record answered with its status, or several
        answered 200 with a report each."""
        outcomes = await producer.send([_parsed(o) for o in objects])
        if len(outcomes) == 1:
            [outcome] = outcomes
            status = outcome.status if isinstance(outcome, RestError) else 200
            body = outcome.body() if isinstance(outcome, RestError) else outcome
            await JSONResponse(body, status_code=status)(scope, receive, send)
            return
        content = b"".join(_outcome_json(o) for o in outcomes)
        await Response(content, media_type=JSON_TYPE)(scope, receive, send)

    async def _stream(self, request: Request, send: Any, producer: ProduceRound) -> None:
        """Streaming mode: 200 now, then a delivery report per record as rounds complete."""
        headers = [(b"content-type", JSON_TYPE.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        records_in, records_out = trio.open_memory_channel[
            list[ProduceRecord | RestError] | _EndOfStream
        ](STREAM_CHUNKS_AHEAD)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read_stream, request, records_in)
            await self._write_reports(request, send, producer, records_out)
            nursery.cancel_scope.cancel()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _read_stream(self, request: Request, records_in: trio.MemorySendChannel[Any]) -> None:
        parser = ConcatenatedObjects(self.record_bytes_max)
        async with records_in:
            while True:
                with trio.move_on_after(self.timeout_s) as idle:
                    message = await request.receive()
                if idle.cancelled_caught:
                    idle_error = RestError(408, 408, f"no record for {self.timeout_s:g} s")
                    await records_in.send(_EndOfStream(idle_error))
                    return
                if message["type"] == "http.disconnect":
                    await records_in.send(_EndOfStream())
                    return
                extend_deadline(request, self.timeout_s)
                objects = parser.feed(message.get("body", b""))
                error: RestError | None = (
                    objects.pop() if objects and isinstance(objects[-1], RestError) else None
                )
                if error is None and not message.get("more_body", False):
                    try:
                        parser.finish()
                    except RestError as truncated:
                        error = truncated
                if objects:
                    await records_in.send([_parsed(o) for o in objects])
                if error is not None or not message.get("more_body", False):
                    await records_in.send(_EndOfStream(error))
                    return

    async def _write_reports(
        self,
        request: Request,
        send: Any,
        producer: ProduceRound,
        records_out: trio.MemoryReceiveChannel[Any],
    ) -> None:
        async with records_out:
            end: _EndOfStream | None = None
            while end is None:
                records: list[ProduceRecord | RestError] = []
                item = await records_out.receive()
                while True:
                    if isinstance(item, _EndOfStream):
                        end = item
                        break
                    records += item
                    if len(records) >= ROUND_RECORDS_MAX:
                        break
                    try:
                        item = records_out.receive_nowait()
                    except trio.WouldBlock:
                        break
                if records:
                    outcomes = await producer.send(records)
                    body = b"".join(_outcome_json(o) for o in outcomes)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    extend_deadline(request, self.timeout_s)
            if end.error is not None:
                await send(
                    {
                        "type": "http.response.body",
                        "body": _outcome_json(end.error),
                        "more_body": True,
                    }
                )


async def _whole_body(receive: Any, bytes_max: int) -> list[Any]:
    """The JSON objects of a body of known length; RestError(400) if it holds none
    or bad JSON."""
    parser = ConcatenatedObjects(bytes_max)
    objects: list[Any] = []
    error: RestError | None = None
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RestError(400, 400, "the client went away")
        if error is None:
            objects += parser.feed(message.get("body", b""))
            if objects and isinstance(objects[-1], RestError):
                error = objects[-1]  # read on to the end: the connection stays usable
        if not message.get("more_body", False):
            break
    if error is not None:
        raise error
    parser.finish()
    if not objects:
        raise bad_request("the request body holds no record")
    return objects


def _parsed(document: object) -> ProduceRecord | RestError:
    try:
        return parse_produce_record(document)
    except RestError as error:
        return error


def _check_content_type(request: Request) -> None:
    content_type = request.headers.get("content-type", JSON_TYPE).split(";")[0].strip().lower()
    if content_type != JSON_TYPE:
        raise RestError(415, 415, f"records are sent as {JSON_TYPE}, not {content_type}")


# Read -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    offset: int | None
    timestamp_ms: int | None
    records_max: int
    bytes_max: int
    value_format: ValueFormat
    isolation_level: int
    start_at_end: bool
    record_filter: RecordFilter = RecordFilter()
    scan: ScanBounds = ScanBounds(0, 0)


def _int_param(request: Request, name: str, low: int, high: int, default: int | None) -> int | None:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise bad_request(f"{name} must be an integer") from None
    if not low <= value <= high:
        raise bad_request(f"{name} must be between {low} and {high}")
    return value


def read_options(request: Request, *, stream: bool) -> ReadOptions:
    """The query's options, or RestError(400)."""
    value_format = request.query_params.get("format", "auto").upper()
    if value_format not in ValueFormat.__members__:
        raise bad_request("format must be one of auto, json, string, binary")
    isolation = request.query_params.get("isolation_level", "read_uncommitted").lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise bad_request("isolation_level must be read_uncommitted or read_committed")
    offset = _int_param(request, "offset", 0, 2**63 - 1, None)
    timestamp_ms = _int_param(request, "timestamp", 0, 2**63 - 1, None)
    start = request.query_params.get("from", "end" if stream else "beginning").lower()
    if start not in ("beginning", "end"):
        raise bad_request("from must be beginning or end")
    if offset is not None and timestamp_ms is not None:
        raise bad_request("give offset or timestamp, not both")
    return ReadOptions(
        offset=offset,
        timestamp_ms=timestamp_ms,
        records_max=_int_param(request, "max_records", 1, READ_RECORDS_MAX, READ_RECORDS_DEFAULT)
        or READ_RECORDS_DEFAULT,
        bytes_max=_int_param(request, "max_bytes", 1, READ_BYTES_MAX, READ_BYTES_DEFAULT)
        or READ_BYTES_DEFAULT,
        value_format=ValueFormat[value_format],
        isolation_level=READ_COMMITTED if isolation == "read_committed" else READ_UNCOMMITTED,
        start_at_end=start == "end",
        record_filter=parse_filter(request.query_params),
        scan=parse_scan_bounds(request.query_params),
    )


def _partition_param(request: Request, target: TopicTarget) -> int:
    text = request.path_params["partition_id"]
    if not text.isdigit() or int(text) > PARTITION_ID_MAX:
        raise bad_request(f"partition_id {text!r} is not a partition")
    partition = int(text)
    if partition >= target.partition_count:
        raise RestError(404, 40402, f"Partition {partition} of topic {target.topic} not found.")
    return partition


async def start_offset(
    gateway: KafkaGateway, caller: HttpCaller, topic: str, partition: int, options: ReadOptions
) -> int:
    if options.offset is not None:
        return options.offset
    if options.timestamp_ms is not None:
        timestamp = options.timestamp_ms
    else:
        timestamp = LATEST_TIMESTAMP if options.start_at_end else EARLIEST_TIMESTAMP
    return await list_offset(gateway, caller, topic, partition, timestamp, options.isolation_level)


@dataclass
class _Lookup:
    gateway: KafkaGateway
    caller: HttpCaller
    target: TopicTarget


async def _lookup(broker: Broker, request: Request) -> _Lookup:
    gateway = gateway_of(broker)
    caller = http_caller(broker, request)
    params = request.path_params
    target = await find_topic(gateway, caller, params["cluster_id"], params["topic_name"])
    return _Lookup(gateway, caller, target)


def _read_endpoint(broker: Broker) -> Any:
    stream = _stream_endpoint(broker, one_partition=True)

    async def read(request: Request) -> Response:
        if "text/event-stream" in request.headers.get("accept", ""):
            return await stream(request)
        try:
            options = read_options(request, stream=False)
            lookup = await _lookup(broker, request)
            partition = _partition_param(request, lookup.target)
            offset = await start_offset(
                lookup.gateway, lookup.caller, lookup.target.topic, partition, options
            )
            return JSONResponse(await _read(lookup, partition, offset, options))
        except RestError as error:
            return _error_response(error)

    return read


async def _read(
    lookup: _Lookup, partition: int, offset: int, options: ReadOptions
) -> dict[str, Any]:
    """Up to `max_records` records (of those the filter matches) from `offset`; a
    filtered read scans at most `options.scan` records and bytes. `stopped` says
    why the read ended: `max_records`, `max_bytes`, `scan_limit` (the scan bounds,
    or the fetches one read makes) or `end` (nothing more there now)."""
    topic = lookup.target.topic
    wanted = options.record_filter
    filtering = wanted.active
    rendered: list[dict[str, object]] = []
    bytes_left = options.bytes_max
    scan_records_left = options.scan.records_max if filtering else None
    scan_bytes_left = options.scan.bytes_max
    scanned = 0
    read: PartitionRead | None = None
    stopped: str | None = None
    for _ in range(READ_FETCHES_MAX):
        read = await fetch_one(
            lookup.gateway,
            lookup.caller,
            topic,
            partition,
            offset,
            bytes_max=scan_bytes_left if filtering else bytes_left,
            isolation_level=options.isolation_level,
        )
        for record in read.fetched.records:
            stopped = _read_limit(
                len(rendered), bytes_left, scan_records_left, scan_bytes_left, options
            )
            if stopped is not None:
                break
            scanned += 1
            offset = record.offset + 1
            if scan_records_left is not None:
                scan_records_left -= 1
                scan_bytes_left -= record_bytes(record)
            if not wanted.matches(record.key, record.value, record.headers):
                continue
            rendered.append(
                render_record(
                    partition,
                    record.offset,
                    record.timestamp_ms,
                    record.key,
                    record.value,
                    record.headers,
                    options.value_format,
                )
            )
            bytes_left -= len(record.key or b"") + len(record.value or b"")
        end_offset = (
            read.last_stable_offset
            if options.isolation_level == READ_COMMITTED
            else read.high_watermark
        )
        if stopped is None and offset >= end_offset:
            stopped = "end"  # all there is now, read
        stopped = stopped or _read_limit(
            len(rendered), bytes_left, scan_records_left, scan_bytes_left, options
        )
        if stopped is not None:
            break
        if read.fetched.next_offset <= offset:
            stopped = "end"  # nothing more to read now
            break
        offset = read.fetched.next_offset
    assert read is not None
    return {
        "cluster_id": lookup.target.cluster_id,
        "topic_name": topic,
        "partition_id": partition,
        "records": rendered,
        "next_offset": offset,
        "high_watermark": read.high_watermark,
        "log_start_offset": read.log_start_offset,
        "scanned_records": scanned,
        "stopped": stopped or "scan_limit",
    }


def _read_limit(
    records: int,
    bytes_left: int,
    scan_records_left: int | None,
    scan_bytes_left: int,
    options: ReadOptions,
) -> str | None:
    """Why a read stops before its next record, or None to go on."""
    if records >= options.records_max:
        return "max_records"
    if bytes_left <= 0:
        return "max_bytes"
    if scan_records_left is not None and (scan_records_left <= 0 or scan_bytes_left <= 0):
        return "scan_limit"
    return None


# Server-sent events ---------------------------------------------------------------


def _stream_endpoint(broker: Broker, *, one_partition: bool) -> Any:
    timeout_s = broker.config.limits.http_request_timeout_ms / 1000
    # A comment at least twice per deadline keeps the connection open while the
    # topic is quiet (and shows a proxy the stream is alive).
    keepalive_s = min(15.0, timeout_s / 2)

    async def stream(request: Request) -> Response:
        try:
            options = read_options(request, stream=True)
            lookup = await _lookup(broker, request)
            if one_partition:
                partitions = [_partition_param(request, lookup.target)]
                resumed = _resumed_offset(request, partitions[0])
                if resumed is not None:
                    options = dataclasses.replace(options, offset=resumed, timestamp_ms=None)
            else:
                if options.offset is not None:
                    raise bad_request("offset= needs one partition (from= or timestamp= for all)")
                partitions = list(range(lookup.target.partition_count))
            positions = {
                p: await start_offset(
                    lookup.gateway, lookup.caller, lookup.target.topic, p, options
                )
                for p in partitions
            }
            # The first round before answering: a caller that may not read the
            # topic (or an offset out of range) gets its 4xx, not an error event.
            first = await _fetch_round(lookup, positions, options, wait_ms=0)
            refused = [r for r in first.values() if isinstance(r, RestError) and r.status != 503]
            if refused:
                raise refused[0]
        except RestError as error:
            return _error_response(error)
        events = _events(request, lookup, positions, first, options, keepalive_s)
        headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)

    return stream


def _resumed_offset(request: Request, partition: int) -> int | None:
    """The offset after the `Last-Event-ID` ("partition:offset") an EventSource sends
    when it reconnects, if it names this partition."""
    named, _, offset = request.headers.get("last-event-id", "").partition(":")
    if named != str(partition) or not offset.isdigit() or len(offset) > 19:
        return None
    return int(offset) + 1


async def _fetch_round(
    lookup: _Lookup, positions: dict[int, int], options: ReadOptions, wait_ms: int
) -> dict[int, PartitionRead | RestError]:
    return await fetch_by_leader(
        lookup.gateway,
        lookup.caller,
        lookup.target.topic,
        positions,
        bytes_max=min(options.bytes_max, STREAM_FETCH_BYTES_MAX),
        isolation_level=options.isolation_level,
        wait_ms=wait_ms,
    )


async def _events(
    request: Request,
    lookup: _Lookup,
    positions: dict[int, int],
    first: dict[int, PartitionRead | RestError],
    options: ReadOptions,
    keepalive_s: float,
) -> AsyncIterator[bytes]:
    """The stream's events: `record` per record, a comment when quiet, and `error`
    (the last event) when the topic cannot be read any more. `first`: the first
    round's reads, made before the answer began."""
    topic = lookup.target.topic
    yield b": following " + topic.encode() + b"\n\n"
    quiet_since_s = trio.current_time()
    reads: dict[int, PartitionRead | RestError] | None = first
    while True:
        extend_deadline(request, keepalive_s)  # the fetch may wait that long
        if reads is None:
            reads = await _fetch_round(lookup, positions, options, int(keepalive_s * 1000))
        retry = False
        for partition, read in sorted(reads.items()):
            if isinstance(read, RestError):
                if read.status != 503:
                    yield _sse("error", None, error_body(read.error_code, read.message))
                    return
                retry = True
                continue
            for record in read.fetched.records:
                if not options.record_filter.matches(record.key, record.value, record.headers):
                    continue
                body = render_record(
                    partition,
                    record.offset,
                    record.timestamp_ms,
                    record.key,
                    record.value,
                    record.headers,
                    options.value_format,
                )
                yield _sse("record", f"{partition}:{record.offset}", body)
                extend_deadline(request, 0)
                quiet_since_s = trio.current_time()
            positions[partition] = max(positions[partition], read.fetched.next_offset)
        reads = None
        if trio.current_time() - quiet_since_s >= keepalive_s:
            yield b": keep-alive\n\n"
            quiet_since_s = trio.current_time()
        if retry:
            await trio.sleep(STREAM_RETRY_S)


def _sse(event: str, event_id: str | None, data: dict[str, object]) -> bytes:
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()
