"""Kafka listener: framing, per-connection pipelining and limits.

Each connection has two tasks. The reader takes frames in order and runs each
request's handler at once (handlers never block); a handler that must wait
(produce durability, fetch long-poll) returns a pending outcome. The writer
sends responses in request order, awaiting pending ones in turn.

What a connection may hold is bounded three ways: at most
`requests_in_flight_per_connection_max` outcomes wait for the writer; every
frame and response is charged to the broker-wide in-flight budget (the frame
before its body is received), and the reader takes no new frame while the
connection holds more than its share; and a watchdog closes a peer that is idle,
slow to send a frame, or reads nothing of a response for too long. Across
connections: `connections_max`, and `connections_per_address_max` from one
address. `KafkaServer.stop` closes the listener, lets readers finish the frame
they are on and writers the responses already owed, until a deadline.
"""

from __future__ import annotations

import functools
import logging
import math
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from weir.broker.broker import Broker
from weir.broker.handlers.context import ClientConnection
from weir.broker.in_flight_budget import CONNECTION_BUDGET, ConnectionBudget, InFlightBudget
from weir.broker.listen import open_listeners
from weir.broker.server.dispatch import RequestOutcome, handle_frame

log = logging.getLogger(__name__)

FRAME_SIZE_PREFIX = struct.Struct(">i")
# api_key int16 + api_version int16 + correlation_id int32 + client_id length int16
REQUEST_HEADER_BYTES_MIN = 10
RECEIVE_CHUNK_BYTES = 256 * 1024
# Ready responses are joined into one send up to this size.
SEND_BATCH_BYTES_MAX = 1024 * 1024
# A big response is sent in pieces of this size; each piece the peer takes
# counts as progress for the watchdog.
SEND_PIECE_BYTES = 1024 * 1024
# Refused connections: one WARNING per address (and one for connections_max)
# per interval, with the count refused in between; at most
# `limits.refusal_log_addresses_max` addresses remembered.
REFUSAL_LOG_INTERVAL_S = 60.0
ALL_ADDRESSES = "*"


class ConnectionClosedError(Exception):
    """The peer closed, broke the framing rules, or timed out."""


class FrameSizeError(ConnectionClosedError):
    """A frame's size prefix is outside the limits: the broker closes."""


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

    async def read_frame(self, admit: Callable[[int], Awaitable[None]] | None = None) -> memoryview:
        """The next frame. `admit(size)` is awaited once its size is known and
        before its body is received (the in-flight budget's charge)."""
        await self._fill(4)
        size = self._checked_size()
        if admit is not None:
            await admit(size)
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
            raise FrameSizeError(f"frame size {size} outside [10, {self._frame_bytes_max}]")
        return int(size)

    def _take(self, size: int) -> memoryview:
        frame = self._buffer[4 : 4 + size]  # a bytearray of its own
        del self._buffer[: 4 + size]
        return memoryview(frame)


class RefusalLog:
    """Logs refused connections without flooding: one WARNING per key (an
    address, or ALL_ADDRESSES) per REFUSAL_LOG_INTERVAL_S, with the number
    refused since the previous line."""

    def __init__(self, addresses_max: int, interval_s: float = REFUSAL_LOG_INTERVAL_S) -> None:
        self.addresses_max = addresses_max
        self.interval_s = interval_s
        self._logged_at_s: dict[str, float] = {}
        self._refused_since: dict[str, int] = {}

    def refused(self, key: str, reason: str) -> None:
        now_s = trio.current_time()
        logged_at_s = self._logged_at_s.get(key)
        if logged_at_s is not None and now_s - logged_at_s < self.interval_s:
            self._refused_since[key] = self._refused_since.get(key, 0) + 1
            return
        if len(self._logged_at_s) >= self.addresses_max:
            self._forget_before(now_s - self.interval_s)
        earlier = self._refused_since.pop(key, 0)
        self._logged_at_s[key] = now_s
        log.warning(
            "refusing connections: %s (%d more refused since the last such line; "
            "logged at most every %.0f s)",
            reason, earlier, self.interval_s,
        )  # fmt: skip

    def _forget_before(self, cutoff_s: float) -> None:
        stale = [key for key, at_s in self._logged_at_s.items() if at_s < cutoff_s]
        if len(stale) < len(self._logged_at_s) // 2:
            stale = list(self._logged_at_s)  # many recent ones: start over
        for key in stale:
            del self._logged_at_s[key]
            self._refused_since.pop(key, None)


class AddressSlots:
    """Open connections per peer address (Kafka's max.connections.per.ip)."""

    def __init__(self, per_address_max: int) -> None:
        self.per_address_max = per_address_max
        self._open: dict[str, int] = {}

    def open_count(self, address: str) -> int:
        return self._open.get(address, 0)

    def try_take(self, address: str) -> bool:
        count = self._open.get(address, 0)
        if count >= self.per_address_max:
            return False
        self._open[address] = count + 1
        return True

    def release(self, address: str) -> None:
        count = self._open[address] - 1
        if count:
            self._open[address] = count
        else:
            del self._open[address]


@dataclass(eq=False)
class _ReaderState:
    """Lets shutdown stop a reader only while it waits for its peer (never
    in the middle of handling a request)."""

    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    waiting: bool = False


class KafkaServer:
    """The Kafka listener and what its connections share: the in-flight byte
    budget, the per-address slots, and shutdown."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        limits = broker.config.limits
        self.budget = InFlightBudget(
            limits.in_flight_bytes_max,
            limits.connection_in_flight_bytes_max,
            limits.connection_in_flight_bytes_min,
        )
        self.addresses = AddressSlots(limits.connections_per_address_max)
        self.refusals = RefusalLog(limits.refusal_log_addresses_max)
        self.draining = False
        self._readers: set[_ReaderState] = set()
        self._stop_requested = trio.Event()
        self._drain_deadline = math.inf
        self._register_metrics()

    def _register_metrics(self) -> None:
        budget = self.budget
        metrics = self.broker.metrics
        metrics.register_gauge(
            "weir_in_flight_bytes",
            "Request and response bytes Kafka connections hold in memory (the in-flight budget).",
            lambda: [({}, float(budget.held_bytes))],
        )
        metrics.register_gauge(
            "weir_in_flight_pool_bytes",
            "The part of weir_in_flight_bytes drawn from the shared pool (in_flight_bytes_max).",
            lambda: [({}, float(budget.pooled_bytes))],
        )
        metrics.register_counter(
            "weir_in_flight_waits_total",
            "Request frames that waited for room in the in-flight pool.",
            lambda: budget.waits_total,
        )

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop`; returns once the connections are drained."""
        listen = self.broker.config.kafka_listen
        listeners = await open_listeners("kafka_listen", listen)
        port = listeners[0].socket.getsockname()[1]
        log.debug("Kafka listener on %s:%d", listen.host, port)
        task_status.started(port)
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as accepting:
                accepting.start_soon(
                    functools.partial(
                        trio.serve_listeners,
                        self.serve_connection,
                        listeners,
                        handler_nursery=connections,
                    )
                )
                await self._stop_requested.wait()
                accepting.cancel_scope.cancel()  # closes the listeners
            self._stop_reading()
            connections.cancel_scope.deadline = self._drain_deadline

    def stop(self, drain_deadline: float) -> None:
        """Close the listener; connections get until `drain_deadline` (Trio
        clock) to answer what they have read."""
        self._drain_deadline = drain_deadline
        self._stop_requested.set()

    def _stop_reading(self) -> None:
        self.draining = True
        for reader in self._readers:
            if reader.waiting:
                reader.scope.cancel()

    async def serve_connection(self, stream: trio.abc.Stream) -> None:
        metrics = self.broker.metrics
        limits = self.broker.config.limits
        metrics.connections_total += 1
        if metrics.connections_open >= limits.connections_max:
            metrics.connections_rejected_total += 1
            reason = f"{metrics.connections_open} open, connections_max is {limits.connections_max}"
            self.refusals.refused(ALL_ADDRESSES, reason)
            await trio.aclose_forcefully(stream)
            return
        address = _peer_address(stream)
        if address is not None and not self.addresses.try_take(address):
            metrics.connections_rejected_per_address_total += 1
            self.refusals.refused(address, self._address_refusal(address))
            await trio.aclose_forcefully(stream)
            return
        metrics.connections_open += 1
        account = self.budget.open_account()
        try:
            await _run_connection(self, stream, account)
        except Exception:  # a bug must cost one connection, never the broker
            log.exception("connection failed")
        finally:
            account.close()
            metrics.connections_open -= 1
            if address is not None:
                self.addresses.release(address)
            await trio.aclose_forcefully(stream)

    def _address_refusal(self, address: str) -> str:
        count = self.addresses.open_count(address)
        limit = self.addresses.per_address_max
        return f"{count} open from {address}, connections_per_address_max is {limit}"


def _peer_address(stream: trio.abc.Stream) -> str | None:
    """The peer's IP address; None for streams that are not sockets (tests)."""
    sock = getattr(stream, "socket", None)
    if sock is None:
        return None
    try:
        peer = sock.getpeername()
    except OSError:
        return None
    return str(peer[0]) if isinstance(peer, tuple) else None


STREAM_ERRORS = (
    ConnectionClosedError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio.TooSlowError,
    OSError,
)


class ConnectionWatchdog:
    """Closes a connection whose peer stays idle, takes too long to send a
    frame it started, or reads nothing of a response for too long:
    `connection_idle_timeout_ms` between frames and per piece of a response
    sent, `request_receive_timeout_ms` within one frame.

    The reader and writer only stamp deadlines as they move between states;
    one task per connection checks them a few times per timeout. A cancel
    scope with a deadline around every read cost the reader a fifth of its
    CPU; a deadline is now enforced up to two check intervals late.

    A deadline closes the connection only when two checks in a row see it
    passed and unchanged. After an event-loop stall longer than a timeout the
    watchdog and the reader wake in the same batch, and the peer's frame may
    have arrived during the stall, unread: the first check only gives the
    reader and writer an interval to restamp (issue 9: a client pinging every
    10 ms was reset during a long produce)."""

    CHECK_INTERVAL_S_MIN = 0.02
    CHECK_INTERVAL_S_MAX = 1.0

    def __init__(self, idle_timeout_s: float, receive_timeout_s: float) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.receive_timeout_s = receive_timeout_s
        self.deadline = math.inf
        self.send_deadline = math.inf
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

    def expect_send_progress(self) -> None:
        """A piece of a response is being sent: the peer must take it in time."""
        self.send_deadline = trio.current_time() + self.idle_timeout_s

    def sent(self) -> None:
        self.send_deadline = math.inf

    def _expired(self, now: float) -> str | None:
        if now > self.deadline:
            return f"{self._state} for too long"
        if now > self.send_deadline:
            return "the peer has not read its responses for too long"
        return None

    async def run(self, connection_scope: trio.CancelScope) -> None:
        seen_passed: tuple[float, float] | None = None
        while True:
            await trio.sleep(self.check_interval_s)
            reason = self._expired(trio.current_time())
            if reason is None:
                seen_passed = None
                continue
            deadlines = (self.deadline, self.send_deadline)
            if deadlines != seen_passed:
                seen_passed = deadlines  # maybe only the loop was late: look again
                continue
            self.expired_reason = reason
            log.debug("closing connection: %s", reason)
            connection_scope.cancel()
            return


# Not frozen: a frozen dataclass costs about 7x more to construct; this is built
# per request. Never mutated.
@dataclass(slots=True)
class _InFlight:
    """An outcome on its way to the writer, with the bytes charged for it (its
    request frame, and its response once built), released once it is sent."""

    outcome: RequestOutcome
    charged_bytes: int


async def _run_connection(
    server: KafkaServer, stream: trio.abc.Stream, account: ConnectionBudget
) -> None:
    limits = server.broker.config.limits
    send_items, receive_items = trio.open_memory_channel[_InFlight](
        limits.requests_in_flight_per_connection_max
    )
    watchdog = ConnectionWatchdog(
        limits.connection_idle_timeout_ms / 1000, limits.request_receive_timeout_ms / 1000
    )
    reader = _ReaderState()
    server._readers.add(reader)
    connection = ClientConnection()
    token = CONNECTION_BUDGET.set(account)  # the tasks below inherit it (Fetch reads it)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                _write_responses, server.broker, stream, receive_items, account, watchdog,
                nursery.cancel_scope,
            )  # fmt: skip
            nursery.start_soon(watchdog.run, nursery.cancel_scope)
            drained = False
            try:
                async with send_items:
                    with reader.scope:
                        await _read_requests(
                            server, stream, send_items, account, watchdog, reader, connection
                        )
                    drained = server.draining
            except STREAM_ERRORS as exc:
                log.debug("connection closed while reading: %r", exc)
            if not drained:
                nursery.cancel_scope.cancel()
            # Draining: the writer answers what was read, then ends the connection.
    finally:
        connection.close()
        CONNECTION_BUDGET.reset(token)
        server._readers.discard(reader)
        if watchdog.expired_reason is not None:
            server.broker.metrics.connections_closed_by_broker_total["timeout"] += 1


async def _read_requests(
    server: KafkaServer,
    stream: trio.abc.Stream,
    send_items: trio.MemorySendChannel[_InFlight],
    account: ConnectionBudget,
    watchdog: ConnectionWatchdog,
    reader_state: _ReaderState,
    connection: ClientConnection,
) -> None:
    """Handle each frame as it arrives, in order. Handlers never block (what
    waits is a pending outcome for the writer), so the next frame is read at
    once; the bounded channel and the connection's share of the in-flight
    budget stop reading when too much waits for the writer."""
    broker = server.broker
    reader = FrameReader(stream, broker.config.limits.frame_bytes_max)
    peer = _peer_address(stream)
    client_host = "" if peer is None else f"/{peer}"  # as Kafka shows it

    async def admit(size: int) -> None:
        watchdog.pause()  # waiting for the budget is not the peer's fault
        await account.charge(size)
        watchdog.expect_frame_end()

    while not server.draining:
        reader_state.waiting = True
        try:
            frame = await _next_frame(reader, account, watchdog, admit)
        except FrameSizeError as exc:
            # Counted here, not where the connection ends: closing the request channel
            # on the way out is a checkpoint, where the writer's cancel of the
            # connection can replace this error with Cancelled.
            log.debug("closing connection: %s", exc)
            broker.metrics.connections_closed_by_broker_total["frame_size"] += 1
            raise
        reader_state.waiting = False
        if reader_state.scope.cancel_called:
            return  # shutdown: the frame is dropped unanswered
        broker.metrics.bytes_received_total += len(frame) + 4
        outcome = await handle_frame(broker, frame, client_host, connection)
        item = _InFlight(outcome, len(frame))
        if outcome.response is not None:
            account.take(len(outcome.response))
            item.charged_bytes += len(outcome.response)
        await send_items.send(item)
        if outcome.close_connection:
            broker.metrics.connections_closed_by_broker_total["request"] += 1
            return


async def _next_frame(
    reader: FrameReader,
    account: ConnectionBudget,
    watchdog: ConnectionWatchdog,
    admit: Callable[[int], Awaitable[None]],
) -> memoryview:
    """The next frame, charged. Waits first until the connection holds no more
    than its share: a peer that does not read its answers is not read either."""
    if account.held_bytes > account.budget.connection_bytes_max:
        await account.wait_within_share()
    frame = reader.buffered_frame()
    if frame is not None:
        if not account.try_take(len(frame)):
            await account.charge(len(frame))
        return frame
    watchdog.expect_frame_start()
    await reader.wait_for_frame_start()
    watchdog.expect_frame_end()
    frame = await reader.read_frame(admit)
    watchdog.pause()
    return frame


class _SendBatch:
    """Ready responses sent together, and the bytes to release once they are."""

    def __init__(self) -> None:
        self.responses: list[bytes] = []
        self.response_bytes = 0
        self.charged_bytes = 0

    def add(self, item: _InFlight) -> None:
        self.charged_bytes += item.charged_bytes
        response = item.outcome.response
        if response is not None:
            self.responses.append(response)
            self.response_bytes += len(response)

    def has_room_for(self, item: _InFlight) -> bool:
        response = item.outcome.response
        return response is None or self.response_bytes + len(response) <= SEND_BATCH_BYTES_MAX


async def _write_responses(
    broker: Broker,
    stream: trio.abc.Stream,
    items: trio.MemoryReceiveChannel[_InFlight],
    account: ConnectionBudget,
    watchdog: ConnectionWatchdog,
    connection_scope: trio.CancelScope,
) -> None:
    """Send responses in request order, awaiting pending ones in turn. Ready
    responses queued behind each other go out in one send (up to
    SEND_BATCH_BYTES_MAX), which saves a system call per response. Each sent
    response's bytes are released from the budget."""
    carried: _InFlight | None = None
    try:
        async with items:
            while True:
                item = carried if carried is not None else await _next_item(items)
                if item is None:
                    break
                if item.outcome.pending is not None:
                    item = await _resolve(item, account)
                if item.outcome.close_connection:
                    break
                batch = _SendBatch()
                batch.add(item)
                carried, closing = _take_ready(items, batch)
                if batch.responses:
                    await _send(stream, batch, account, watchdog)
                    broker.metrics.bytes_sent_total += batch.response_bytes
                account.release(batch.charged_bytes)
                if closing:
                    break
    except STREAM_ERRORS as exc:
        log.debug("connection closed while writing: %r", exc)
    connection_scope.cancel()


async def _resolve(item: _InFlight, account: ConnectionBudget) -> _InFlight:
    """Await a pending outcome and charge the response it built."""
    assert item.outcome.pending is not None
    outcome = await item.outcome.pending()
    charged_bytes = item.charged_bytes
    if outcome.response is not None:
        account.take(len(outcome.response))
        charged_bytes += len(outcome.response)
    return _InFlight(outcome, charged_bytes)


async def _send(
    stream: trio.abc.Stream,
    batch: _SendBatch,
    account: ConnectionBudget,
    watchdog: ConnectionWatchdog,
) -> None:
    """Send the batch; a joined batch is a copy, charged while it is held."""
    if len(batch.responses) == 1:
        await _send_in_pieces(stream, batch.responses[0], watchdog)
        return
    data = b"".join(batch.responses)
    account.take(len(data))
    try:
        await _send_in_pieces(stream, data, watchdog)
    finally:
        account.release(len(data))


async def _send_in_pieces(
    stream: trio.abc.Stream, data: bytes, watchdog: ConnectionWatchdog
) -> None:
    if len(data) <= SEND_PIECE_BYTES:
        watchdog.expect_send_progress()
        await stream.send_all(data)
    else:
        view = memoryview(data)
        for start in range(0, len(view), SEND_PIECE_BYTES):
            watchdog.expect_send_progress()
            await stream.send_all(view[start : start + SEND_PIECE_BYTES])
    watchdog.sent()


async def _next_item(items: trio.MemoryReceiveChannel[_InFlight]) -> _InFlight | None:
    try:
        return await items.receive()
    except trio.EndOfChannel:
        return None


def _take_ready(
    items: trio.MemoryReceiveChannel[_InFlight], batch: _SendBatch
) -> tuple[_InFlight | None, bool]:
    """Add to `batch` the outcomes already queued that need no waiting, up to
    SEND_BATCH_BYTES_MAX of responses. Returns (an outcome to handle next,
    whether to close after `batch`)."""
    while batch.response_bytes < SEND_BATCH_BYTES_MAX:
        try:
            item = items.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return None, False
        if item.outcome.pending is not None or not batch.has_room_for(item):
            return item, False
        if item.outcome.close_connection:
            return None, True
        batch.add(item)
    return None, False
