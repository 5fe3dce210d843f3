"""Kafka listener: framing, per-connection pipelining and limits.

Each connection has two tasks. The reader takes frames in order and runs each
request's handler at once (handlers never block); a handler that must wait
(produce durability, fetch long-poll) returns a pending outcome. The writer
sends responses in request order, awaiting pending ones in turn. The reader
stops reading once `requests_in_flight_per_connection_max` responses wait to be
sent, so a pipelining client is slowed down, not buffered without bound.
"""

from __future__ import annotations

import functools
import logging
import math
import struct

import trio

from weir.broker.broker import Broker
from weir.broker.dispatch import RequestOutcome, handle_frame

log = logging.getLogger(__name__)

FRAME_SIZE_PREFIX = struct.Struct(">i")
# api_key int16 + api_version int16 + correlation_id int32 + client_id length int16
REQUEST_HEADER_BYTES_MIN = 10
RECEIVE_CHUNK_BYTES = 256 * 1024
# Ready responses are joined into one send up to this size.
SEND_BATCH_BYTES_MAX = 1024 * 1024


class ConnectionClosedError(Exception):
    """The peer closed, broke the framing rules, or timed out."""


class FrameReader:
    """Reads size-prefixed frames, allocating only as bytes actually arrive.

    Frames come back as views of a `bytearray` of their own, so handlers may
    patch them in place (Produce stamps offsets into the batches it stores).
    A frame that is not wholly buffered is received in chunks of at most
    RECEIVE_CHUNK_BYTES and joined once: two copies of its bytes in all."""

    def __init__(self, stream: trio.abc.ReceiveStream, frame_bytes_max: int) -> None:
        self._stream = stream
        self._frame_bytes_max = frame_bytes_max
        self._buffer = bytearray()

    async def _receive(self, byte_count_max: int) -> bytes | bytearray:
        chunk = await self._stream.receive_some(min(byte_count_max, RECEIVE_CHUNK_BYTES))
        if not chunk:
            raise ConnectionClosedError("peer closed the connection")
        return chunk

    async def _fill(self, byte_count: int) -> None:
        while len(self._buffer) < byte_count:
            self._buffer += await self._receive(max(byte_count - len(self._buffer), 4096))

    async def wait_for_frame_start(self) -> None:
        await self._fill(1)

    async def read_frame(self) -> memoryview:
        await self._fill(4)
        size = self._checked_size()
        if len(self._buffer) >= 4 + size:
            return self._take(size)
        chunks: list[bytes | bytearray] = [self._buffer[4:]]
        missing = 4 + size - len(self._buffer)
        self._buffer = bytearray()
        while missing > 0:
            chunk = await self._receive(missing)
            chunks.append(chunk)
            missing -= len(chunk)
        return memoryview(bytearray().join(chunks))

    def buffered_frame(self) -> memoryview | None:
        """The next frame if it is wholly buffered already (no await), else None."""
        if len(self._buffer) < 4:
            return None
        size = self._checked_size()
        if len(self._buffer) < 4 + size:
            return None
        return self._take(size)

    def _checked_size(self) -> int:
        (size,) = FRAME_SIZE_PREFIX.unpack_from(self._buffer)
        if size < REQUEST_HEADER_BYTES_MIN or size > self._frame_bytes_max:
            raise ConnectionClosedError(f"frame size {size} outside [10, {self._frame_bytes_max}]")
        return int(size)

    def _take(self, size: int) -> memoryview:
        frame = self._buffer[4 : 4 + size]  # a bytearray of its own
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
    except Exception:  # a bug must cost one connection, never the broker
        log.exception("connection failed")
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


class ReceiveWatchdog:
    """Closes a connection whose peer stays idle, or takes too long to send a
    frame it started: `connection_idle_timeout_ms` between frames,
    `request_receive_timeout_ms` within one.

    The reader only stamps a deadline as it moves between those states; one task
    per connection checks it a few times per timeout. A cancel scope with a
    deadline around every read cost the reader a fifth of its CPU; a deadline is
    now enforced up to one check interval late."""

    CHECK_INTERVAL_S_MIN = 0.02
    CHECK_INTERVAL_S_MAX = 1.0

    def __init__(self, idle_timeout_s: float, receive_timeout_s: float) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.receive_timeout_s = receive_timeout_s
        self.deadline = math.inf
        self._state = "idle"
        self.expired_reason: str | None = None
        self.check_interval_s = min(
            max(min(idle_timeout_s, receive_timeout_s) / 10, self.CHECK_INTERVAL_S_MIN),
            self.CHECK_INTERVAL_S_MAX,
        )

    def expect_frame_start(self) -> None:
        self.deadline = trio.current_time() + self.idle_timeout_s
        self._state = "idle"

    def expect_frame_end(self) -> None:
        self.deadline = trio.current_time() + self.receive_timeout_s
        self._state = "receiving a frame"

    def pause(self) -> None:
        """Handling a request or waiting for the writer: the peer owes nothing."""
        self.deadline = math.inf

    async def run(self, connection_scope: trio.CancelScope) -> None:
        while True:
            await trio.sleep(self.check_interval_s)
            if trio.current_time() > self.deadline:
                self.expired_reason = f"{self._state} for too long"
                log.debug("closing connection: %s", self.expired_reason)
                connection_scope.cancel()
                return


async def _run_connection(broker: Broker, stream: trio.abc.Stream) -> None:
    limits = broker.config.limits
    send_outcomes, receive_outcomes = trio.open_memory_channel[RequestOutcome](
        limits.requests_in_flight_per_connection_max
    )
    watchdog = ReceiveWatchdog(
        limits.connection_idle_timeout_ms / 1000, limits.request_receive_timeout_ms / 1000
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_responses, broker, stream, receive_outcomes, nursery.cancel_scope)
        nursery.start_soon(watchdog.run, nursery.cancel_scope)
        try:
            async with send_outcomes:
                await _read_requests(broker, stream, send_outcomes, watchdog)
        except STREAM_ERRORS as exc:
            log.debug("connection closed while reading: %r", exc)
        nursery.cancel_scope.cancel()


async def _read_requests(
    broker: Broker,
    stream: trio.abc.Stream,
    send_outcomes: trio.MemorySendChannel[RequestOutcome],
    watchdog: ReceiveWatchdog,
) -> None:
    """Handle each frame as it arrives, in order. Handlers never block (what
    waits is a pending outcome for the writer), so the next frame is read at
    once; the bounded channel stops reading when too many responses wait."""
    limits = broker.config.limits
    reader = FrameReader(stream, limits.frame_bytes_max)
    while True:
        frame = reader.buffered_frame()
        if frame is None:
            watchdog.expect_frame_start()
            await reader.wait_for_frame_start()
            watchdog.expect_frame_end()
            frame = await reader.read_frame()
            watchdog.pause()
        broker.metrics.bytes_received_total += len(frame) + 4
        outcome = await handle_frame(broker, frame)
        await send_outcomes.send(outcome)
        if outcome.close_connection:
            return


async def _write_responses(
    broker: Broker,
    stream: trio.abc.Stream,
    outcomes: trio.MemoryReceiveChannel[RequestOutcome],
    connection_scope: trio.CancelScope,
) -> None:
    """Send responses in request order, awaiting pending ones in turn. Ready
    responses queued behind each other go out in one send (up to
    SEND_BATCH_BYTES_MAX), which saves a system call per response."""
    carried: RequestOutcome | None = None
    try:
        async with outcomes:
            while True:
                outcome = carried if carried is not None else await _next_outcome(outcomes)
                if outcome is None:
                    break
                if outcome.pending is not None:
                    outcome = await outcome.pending()
                if outcome.close_connection:
                    break
                batch = [outcome.response] if outcome.response is not None else []
                carried, closing = _take_ready(outcomes, batch)
                if batch:
                    data = batch[0] if len(batch) == 1 else b"".join(batch)
                    await stream.send_all(data)
                    broker.metrics.bytes_sent_total += len(data)
                if closing:
                    break
    except STREAM_ERRORS as exc:
        log.debug("connection closed while writing: %r", exc)
    connection_scope.cancel()


async def _next_outcome(
    outcomes: trio.MemoryReceiveChannel[RequestOutcome],
) -> RequestOutcome | None:
    try:
        return await outcomes.receive()
    except trio.EndOfChannel:
        return None


def _take_ready(
    outcomes: trio.MemoryReceiveChannel[RequestOutcome], batch: list[bytes]
) -> tuple[RequestOutcome | None, bool]:
    """Append to `batch` the responses already queued that need no waiting.
    Returns (a pending outcome to handle next, whether to close after `batch`)."""
    batch_bytes = sum(len(response) for response in batch)
    while batch_bytes < SEND_BATCH_BYTES_MAX:
        try:
            outcome = outcomes.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return None, False
        if outcome.pending is not None:
            return outcome, False
        if outcome.close_connection:
            return None, True
        if outcome.response is not None:
            batch.append(outcome.response)
            batch_bytes += len(outcome.response)
    return None, False
