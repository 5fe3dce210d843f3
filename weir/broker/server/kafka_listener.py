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
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast

import trio

from weir.broker.broker import Broker
from weir.broker.config import HostPort
from weir.broker.handlers.context import ClientConnection
from weir.broker.handlers.request_authorization import Session
from weir.broker.handlers.sasl import in_raw_token_exchange
from weir.broker.in_flight_budget import CONNECTION_BUDGET, ConnectionBudget, InFlightBudget
from weir.broker.listen import open_listeners
from weir.broker.security_config import Listener, SecurityProtocol
from weir.broker.server.connection_limits import ALL_ADDRESSES, AddressSlots, RefusalLog
from weir.broker.server.connection_watchdog import ConnectionWatchdog
from weir.broker.server.dispatch import ChunkedFrame, RequestOutcome, handle_frame
from weir.broker.server.framing import (
    REQUEST_HEADER_BYTES_MIN,
    ConnectionClosedError,
    FrameReader,
    FrameSizeError,
)
from weir.broker.server.gather_send import send_buffers
from weir.broker.tls import HANDSHAKE_TIMEOUT_S, CertificatePrincipals, ServerTlsContext
from weir.security.principal import ANONYMOUS, KafkaPrincipal, user
from weir.security.principal_mapping import NoMatchingRuleError

log = logging.getLogger(__name__)

# Ready responses are joined into one send up to this size.
SEND_BATCH_BYTES_MAX = 1024 * 1024
# A big response is sent in pieces of this size; each piece the peer takes
# counts as progress for the watchdog.
SEND_PIECE_BYTES = 1024 * 1024


# A connection served outside `run` (tests): plaintext, anonymous.
DEFAULT_LISTENER = Listener("PLAINTEXT", "", 0, SecurityProtocol.PLAINTEXT, "", 0)


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
        security = broker.config.security
        protocols = {listener.protocol for listener in broker.config.kafka_listeners}
        uses_tls = any(protocol.uses_tls for protocol in protocols)
        self.tls = ServerTlsContext(security) if SecurityProtocol.SSL in protocols else None
        # SASL_SSL authenticates by SASL: no client certificate asked for (as Kafka)
        self.sasl_tls = (
            ServerTlsContext(security, client_certificates=False)
            if SecurityProtocol.SASL_SSL in protocols
            else None
        )
        self.certificate_principals = (
            CertificatePrincipals(security.ssl_principal_mapping_rules) if uses_tls else None
        )
        # Each listener's bound port, by listener name, once `run` has opened them.
        self.ports: dict[str, int] = {}
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
        """Serve until `stop`; returns once the connections are drained. Reports the
        first listener's port as started (`ports` has every listener's)."""
        opened = []
        for listener in self.broker.config.kafka_listeners:
            setting = (
                "security.listeners" if self.broker.config.security.listeners else "kafka_listen"
            )
            address = HostPort(listener.host, listener.port)
            opened.append((listener, await open_listeners(setting, address)))
            port = opened[-1][1][0].socket.getsockname()[1]
            self.ports[listener.name] = port
            log.debug("Kafka listener %s (%s) on %s:%d", listener.name,
                      listener.protocol.value, listener.host, port)  # fmt: skip
        task_status.started(self.ports[opened[0][0].name])
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as accepting:
                for listener, sockets in opened:
                    accepting.start_soon(
                        functools.partial(
                            trio.serve_listeners,
                            functools.partial(self.serve_connection, listener=listener),
                            sockets,
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

    async def serve_connection(
        self, stream: trio.abc.Stream, listener: Listener = DEFAULT_LISTENER
    ) -> None:
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
            connection = ClientConnection(listener.name)
            secured = await self._secure(stream, listener, connection, address or "")
            if secured is not None:
                stream = secured
                await _run_connection(self, stream, account, connection)
        except Exception:  # a bug must cost one connection, never the broker
            log.exception("connection failed")
        finally:
            account.close()
            metrics.connections_open -= 1
            if address is not None:
                self.addresses.release(address)
            await trio.aclose_forcefully(stream)

    async def _secure(
        self,
        stream: trio.abc.Stream,
        listener: Listener,
        connection: ClientConnection,
        address: str,
    ) -> trio.abc.Stream | None:
        """The stream to serve: TLS on a TLS listener once its handshake is done
        (None when it failed), with the connection's session where the transport
        alone decides it (PLAINTEXT: anonymous; SSL: the client certificate's
        principal, anonymous without one). A SASL listener's session waits for
        SaslAuthenticate."""
        principal = ANONYMOUS
        if listener.protocol.uses_tls:
            tls = self.tls if listener.protocol is SecurityProtocol.SSL else self.sasl_tls
            assert tls is not None
            tls_stream = trio.SSLStream(stream, tls.context(), server_side=True)
            try:
                with trio.fail_after(HANDSHAKE_TIMEOUT_S):
                    await tls_stream.do_handshake()
            except (trio.BrokenResourceError, trio.TooSlowError) as exc:
                log.debug("closing connection from %s: TLS handshake failed: %r", address, exc)
                self.broker.metrics.connections_closed_by_broker_total["tls_handshake"] += 1
                return None
            try:
                principal = self._certificate_principal(tls_stream) or ANONYMOUS
            except (NoMatchingRuleError, ValueError) as exc:
                log.info("refusing a client certificate from %s: %s", address, exc)
                self.broker.metrics.connections_closed_by_broker_total["tls_principal"] += 1
                return None
            stream = tls_stream
        if not listener.protocol.uses_sasl:
            connection.session = Session(principal, address, listener.name)
        return stream

    def _certificate_principal(
        self, stream: trio.SSLStream[trio.abc.Stream]
    ) -> KafkaPrincipal | None:
        certificate = stream.getpeercert(binary_form=True)
        if not certificate or self.certificate_principals is None:
            return None
        return user(self.certificate_principals.name_of(certificate))

    def _address_refusal(self, address: str) -> str:
        count = self.addresses.open_count(address)
        limit = self.addresses.per_address_max
        return f"{count} open from {address}, connections_per_address_max is {limit}"


def _peer_address(stream: trio.abc.Stream) -> str | None:
    """The peer's IP address; None for streams that are not sockets (tests)."""
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
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


# per request. Never mutated.
@dataclass(slots=True)
class _InFlight:
    """An outcome on its way to the writer, with the bytes charged for it (its
    request frame, and its response once built), released once it is sent."""

    outcome: RequestOutcome
    charged_bytes: int


async def _run_connection(
    server: KafkaServer,
    stream: trio.abc.Stream,
    account: ConnectionBudget,
    connection: ClientConnection,
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
    token = CONNECTION_BUDGET.set(account)  # the tasks below inherit it (Fetch reads it)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                _write_responses, server.broker, stream, receive_items, account, watchdog,
                nursery.cancel_scope, connection,
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

    security = broker.config.security
    while not server.draining:
        # Before it authenticates, a connection's frames are held to a small size.
        authenticated = connection.session is not None
        reader.frame_bytes_max = (
            broker.config.limits.frame_bytes_max
            if authenticated
            else min(security.sasl_server_max_receive_size, broker.config.limits.frame_bytes_max)
        )
        reader.frame_bytes_min = (
            1 if in_raw_token_exchange(connection) else REQUEST_HEADER_BYTES_MIN
        )
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
        if connection.throttled_until_s:
            await _wait_out_throttle(connection, reader_state)
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


async def _wait_out_throttle(connection: ClientConnection, reader_state: _ReaderState) -> None:
    """A client over its quota was answered at once with its throttle time (KIP-219);
    its next request waits until the throttle has passed (Kafka mutes the channel)."""
    remaining_s = connection.throttled_until_s - time.monotonic()
    connection.throttled_until_s = 0.0
    if remaining_s > 0:
        reader_state.waiting = True  # shutdown may end the wait
        await trio.sleep(remaining_s)
        reader_state.waiting = False


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
        self.responses: list[bytes | ChunkedFrame] = []
        self.chunked = False  # holds a ChunkedFrame: nothing else joins it
        self.response_bytes = 0
        self.charged_bytes = 0

    def add(self, item: _InFlight) -> None:
        self.charged_bytes += item.charged_bytes
        response = item.outcome.response
        if response is not None:
            self.responses.append(response)
            self.response_bytes += len(response)
            self.chunked = self.chunked or isinstance(response, ChunkedFrame)

    def has_room_for(self, item: _InFlight) -> bool:
        """Whether `item` may join: a chunked frame (a Fetch response, sent
        gathered) is sent alone, and the batch stays under SEND_BATCH_BYTES_MAX."""
        response = item.outcome.response
        if response is None:
            return True
        if isinstance(response, ChunkedFrame) or self.chunked:
            return False
        return self.response_bytes + len(response) <= SEND_BATCH_BYTES_MAX


async def _write_responses(
    broker: Broker,
    stream: trio.abc.Stream,
    items: trio.MemoryReceiveChannel[_InFlight],
    account: ConnectionBudget,
    watchdog: ConnectionWatchdog,
    connection_scope: trio.CancelScope,
    connection: ClientConnection,
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
                if closing or connection.close_after_response:
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
        response = batch.responses[0]
        if isinstance(response, ChunkedFrame):
            await _send_chunked(stream, response, watchdog)
        else:
            await _send_in_pieces(stream, response, watchdog)
        return
    data = b"".join(cast("list[bytes]", batch.responses))
    account.take(len(data))
    try:
        await _send_in_pieces(stream, data, watchdog)
    finally:
        account.release(len(data))


async def _send_chunked(
    stream: trio.abc.Stream, frame: ChunkedFrame, watchdog: ConnectionWatchdog
) -> None:
    """A Fetch response's buffers, gathered on a socket (TLS: joined, then sent)."""
    if not isinstance(stream, trio.SocketStream):
        await _send_in_pieces(stream, frame.joined(), watchdog)
        return
    await send_buffers(stream.socket, frame.chunks, watchdog.expect_send_progress)
    watchdog.sent()


async def _send_in_pieces(
    stream: trio.abc.Stream, data: bytes | bytearray | memoryview, watchdog: ConnectionWatchdog
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
