"""Kafka listener: framing, per-connection pipelining and limits.

Each connection has one reader (frames in), one writer (responses out, in request
order) and one task per request in flight. The reader stops reading once
`requests_in_flight_per_connection_max` requests wait for their responses, so a
pipelining client is slowed down, not buffered without bound.
"""

from __future__ import annotations

import functools
import logging
import struct
from dataclasses import dataclass, field

import trio

from weir.broker.broker import Broker
from weir.broker.dispatch import RequestOutcome, handle_frame

log = logging.getLogger(__name__)

FRAME_SIZE_PREFIX = struct.Struct(">i")
# api_key int16 + api_version int16 + correlation_id int32 + client_id length int16
REQUEST_HEADER_BYTES_MIN = 10
RECEIVE_CHUNK_BYTES = 256 * 1024


class ConnectionClosedError(Exception):
    """The peer closed, broke the framing rules, or timed out."""


@dataclass(eq=False)
class ResponseSlot:
    """Where a request's task leaves its response for the writer."""

    done: trio.Event = field(default_factory=trio.Event)
    outcome: RequestOutcome | None = None


class FrameReader:
    """Reads size-prefixed frames, allocating only as bytes actually arrive."""

    def __init__(self, stream: trio.abc.ReceiveStream, frame_bytes_max: int) -> None:
        self._stream = stream
        self._frame_bytes_max = frame_bytes_max
        self._buffer = bytearray()

    async def _fill(self, byte_count: int) -> None:
        while len(self._buffer) < byte_count:
            want = max(byte_count - len(self._buffer), 4096)
            chunk = await self._stream.receive_some(min(want, RECEIVE_CHUNK_BYTES))
            if not chunk:
                raise ConnectionClosedError("peer closed the connection")
            self._buffer += chunk

    async def wait_for_frame_start(self) -> None:
        await self._fill(1)

    async def read_frame(self) -> memoryview:
        await self._fill(4)
        (size,) = FRAME_SIZE_PREFIX.unpack_from(self._buffer)
        if size < REQUEST_HEADER_BYTES_MIN or size > self._frame_bytes_max:
            raise ConnectionClosedError(f"frame size {size} outside [10, {self._frame_bytes_max}]")
        await self._fill(4 + size)
        frame = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        return memoryview(frame)


async def serve_kafka(
    broker: Broker, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    listen = broker.config.kafka_listen
    listeners = await trio.open_tcp_listeners(listen.port, host=listen.host)
    port = listeners[0].socket.getsockname()[1]
    log.debug("Kafka listener on %s:%d", listen.host, port)
    task_status.started(port)
    await trio.serve_listeners(functools.partial(_serve_connection, broker), listeners)


async def _serve_connection(broker: Broker, stream: trio.abc.Stream) -> None:
    metrics = broker.metrics
    limits = broker.config.limits
    metrics.connections_total += 1
    if metrics.connections_open >= limits.connections_max:
        metrics.connections_rejected_total += 1
        await trio.aclose_forcefully(stream)
        return
    metrics.connections_open += 1
    try:
        await _run_connection(broker, stream)
    finally:
        metrics.connections_open -= 1
        await trio.aclose_forcefully(stream)


STREAM_ERRORS = (
    ConnectionClosedError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio.TooSlowError,
    OSError,
)


async def _run_connection(broker: Broker, stream: trio.abc.Stream) -> None:
    limits = broker.config.limits
    send_slots, receive_slots = trio.open_memory_channel[ResponseSlot](
        limits.requests_in_flight_per_connection_max
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_responses, broker, stream, receive_slots, nursery.cancel_scope)
        try:
            async with send_slots:
                await _read_requests(broker, stream, send_slots, nursery)
        except STREAM_ERRORS as exc:
            log.debug("connection closed while reading: %r", exc)
        nursery.cancel_scope.cancel()


async def _read_requests(
    broker: Broker,
    stream: trio.abc.Stream,
    send_slots: trio.MemorySendChannel[ResponseSlot],
    nursery: trio.Nursery,
) -> None:
    limits = broker.config.limits
    reader = FrameReader(stream, limits.frame_bytes_max)
    while True:
        with trio.fail_after(limits.connection_idle_timeout_ms / 1000):
            await reader.wait_for_frame_start()
        with trio.fail_after(limits.request_receive_timeout_ms / 1000):
            frame = await reader.read_frame()
        broker.metrics.bytes_received_total += len(frame) + 4
        slot = ResponseSlot()
        await send_slots.send(slot)
        nursery.start_soon(_run_request, broker, frame, slot)


async def _run_request(broker: Broker, frame: memoryview, slot: ResponseSlot) -> None:
    try:
        slot.outcome = await handle_frame(broker, frame)
    finally:
        slot.done.set()


async def _write_responses(
    broker: Broker,
    stream: trio.abc.Stream,
    slots: trio.MemoryReceiveChannel[ResponseSlot],
    connection_scope: trio.CancelScope,
) -> None:
    try:
        async with slots:
            async for slot in slots:
                await slot.done.wait()
                outcome = slot.outcome
                if outcome is None or outcome.close_connection:
                    break
                if outcome.response is not None:
                    await stream.send_all(outcome.response)
                    broker.metrics.bytes_sent_total += len(outcome.response)
    except STREAM_ERRORS as exc:
        log.debug("connection closed while writing: %r", exc)
    connection_scope.cancel()
