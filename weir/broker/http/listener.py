"""The HTTP listener: Hypercorn (HTTP/1.1 through h11) serving the Starlette app
of weir.broker.http.app, inside the broker's Trio process.

Hypercorn parses, keeps connections alive and bounds a request's head
(`h11_max_incomplete_size`); what it has no setting for is ours, around it:

- the accept loop, with its own small pool (`http_connections_max`, apart from
  the Kafka connections). When the pool is full a new connection closes the
  oldest one that is not inside a request (idle between requests, or still
  sending its head), so idle or slow peers cannot keep health checks out;
- a deadline per exchange: from the moment a connection opens, or finishes
  a response, it has `http_request_timeout_ms` to send a whole request and
  read its answer; a slow, idle or not-reading peer is closed when it runs
  out (Hypercorn's own `keep_alive_timeout` only covers the wait for a head,
  and its writes are shielded from cancellation: the socket is closed);
- a request whose head is larger than `http_request_bytes_max`, or whose announced
  body is larger than `http_body_bytes_max`, is answered 431 or 413 without being
  read; a chunked body is counted as the app reads it and cut off past the bound
  (`weir.broker.http.exchange`: long polls, streamed answers and streamed bodies
  move these limits for their own exchange).

Each accepted stream is handed to Hypercorn's per-connection server,
`hypercorn.trio.tcp_server.TCPServer`, which is what `hypercorn.trio.serve`
runs for every connection its own accept loop takes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import AppWrapper
from hypercorn.utils import wrap_app

from weir.broker.broker import Broker
from weir.broker.config import Limits
from weir.broker.http.app import build_app
from weir.broker.http.authentication import HttpAuthentication
from weir.broker.http.exchange import EXCHANGE_SCOPE_KEY, Exchange
from weir.broker.http.request_counts import HttpRequestCounts
from weir.broker.listen import open_listeners
from weir.broker.metrics import Metrics
from weir.broker.tls import ServerTlsContext

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]
PeerAddress = tuple[str, int]
# Messages of a request body Hypercorn queues for the app before it stops reading.
APP_QUEUE_MESSAGES_MAX = 2


@dataclass(eq=False)
class HttpConnection:
    peer: PeerAddress
    stream: trio.SocketStream
    deadline_s: float
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    # Requests the app is answering (more than one only for HTTP/2's streams).
    requests_in_app: int = 0
    # Inside a long exchange (a long poll, a stream: `exchange.Exchange`): evictable
    # when the pool is full and no connection is idle.
    in_long_exchange: bool = False

    def close(self) -> None:
        """End it now. Cancelling is not enough: Hypercorn shields its writes, so a
        write to a peer that reads nothing is woken by closing the socket."""
        self.scope.cancel()
        self.stream.socket.close()

    async def expire(self) -> None:
        """Close the connection at its deadline (which moves after each answer)."""
        while trio.current_time() < self.deadline_s:
            await trio.sleep_until(self.deadline_s)
        self.close()


class HttpConnections:
    """The open HTTP connections, oldest first."""

    def __init__(self, connections_max: int, metrics: Metrics) -> None:
        self.connections_max = connections_max
        self.metrics = metrics
        self._open: dict[HttpConnection, None] = {}
        self._by_peer: dict[PeerAddress, HttpConnection] = {}

    def admit(self, connection: HttpConnection) -> bool:
        """Take a slot, closing the oldest connection outside a request if none is free."""
        if len(self._open) >= self.connections_max and not self._evict_oldest_idle():
            return False
        self._open[connection] = None
        self._by_peer[connection.peer] = connection
        return True

    def _evict_oldest_idle(self) -> bool:
        """Close the oldest connection outside a request, or else the oldest in a long
        exchange (a stream or long poll: its client reconnects or retries), so that
        streams never keep health checks out."""
        idle = (c for c in self._open if c.requests_in_app == 0)
        long = (c for c in self._open if c.in_long_exchange)
        victim = next(idle, None) or next(long, None)
        if victim is None:
            return False
        victim.close()
        self.leave(victim)
        self.metrics.http_connections_evicted_total += 1
        return True

    def leave(self, connection: HttpConnection) -> None:
        self._open.pop(connection, None)
        if self._by_peer.get(connection.peer) is connection:
            del self._by_peer[connection.peer]

    def find(self, peer: PeerAddress | None) -> HttpConnection | None:
        return None if peer is None else self._by_peer.get(peer)


class ExchangeLimits:
    """ASGI middleware: marks a connection as inside a request (not evictable) while
    the app answers it, restarts its deadline after each answer, and answers 431
    to a request whose head is over `head_bytes_max` (h11 bounds only a head that
    arrives in pieces: one that comes in a single read of up to 64 KiB passes
    it) and 413 to one whose announced body is over `body_bytes_max` (Hypercorn
    then closes the connection: the unread body leaves it unusable). A chunked
    body is counted as the app reads it (`exchange.Exchange`)."""

    def __init__(
        self,
        app: AsgiApp,
        connections: HttpConnections,
        timeout_s: float,
        head_bytes_max: int,
        body_bytes_max: int,
    ) -> None:
        self.app = app
        self.connections = connections
        self.timeout_s = timeout_s
        self.head_bytes_max = head_bytes_max
        self.body_bytes_max = body_bytes_max

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan, no websockets
        client = scope.get("client")
        connection = self.connections.find(tuple(client) if client else None)  # type: ignore[arg-type]
        if connection is not None:
            connection.requests_in_app += 1
        try:
            if _head_bytes(scope) > self.head_bytes_max:
                await _answer(send, 431, b"request head too large\n")
            elif _body_too_large(scope, self.body_bytes_max):
                await _answer(send, 413, b"request body too large\n")
            else:
                exchange = Exchange(
                    self.timeout_s, self.body_bytes_max, _deadline_setter(connection)
                )
                if connection is not None:
                    exchange.on_long = functools.partial(_mark_long, connection)
                scope[EXCHANGE_SCOPE_KEY] = exchange
                await self.app(scope, _bounded(receive, exchange), send)
        finally:
            if connection is not None:
                connection.requests_in_app -= 1
                connection.in_long_exchange = False
                connection.deadline_s = trio.current_time() + self.timeout_s


def _mark_long(connection: HttpConnection) -> None:
    connection.in_long_exchange = True


def _deadline_setter(connection: HttpConnection | None) -> Callable[[float], None]:
    def extend(deadline_s: float) -> None:
        if connection is not None:
            connection.deadline_s = max(connection.deadline_s, deadline_s)

    return extend


def _bounded(receive: Receive, exchange: Exchange) -> Receive:
    """`receive` that counts body bytes and, past the exchange's bound, answers that
    the client left (the app reads no more of it)."""

    async def bounded_receive() -> Message:
        message = await receive()
        if message["type"] == "http.request" and exchange.body_over_bound(
            len(message.get("body", b""))
        ):
            return {"type": "http.disconnect"}
        return message

    return bounded_receive


def _head_bytes(scope: Scope) -> int:
    """About the size of the request line and headers as sent."""
    size = len(scope["raw_path"]) + len(scope["query_string"]) + len(scope["method"]) + 12
    return size + sum(len(name) + len(value) + 4 for name, value in scope["headers"])


def _body_too_large(scope: Scope, bytes_max: int) -> bool:
    """Its announced length is over the bound (a chunked body is counted as read)."""
    for name, value in scope["headers"]:
        if name == b"content-length" and (not value.isdigit() or int(value) > bytes_max):
            return True
    return False


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def hypercorn_config(limits: Limits) -> Config:
    config = Config()
    timeout_s = limits.http_request_timeout_ms / 1000
    config.h11_max_incomplete_size = limits.http_request_bytes_max
    config.h2_max_header_list_size = limits.http_request_bytes_max
    config.keep_alive_timeout = timeout_s
    # No read timeout of Hypercorn's own: the deadline above closes idle and slow
    # peers, and a server-sent-events client sends nothing while it reads (with
    # one, Hypercorn ends every stream after that long).
    config.read_timeout = None
    config.max_app_queue_size = APP_QUEUE_MESSAGES_MAX
    config.include_server_header = False
    config.errorlog = logging.getLogger("weir.broker.http.hypercorn")
    config.accesslog = None
    return config


async def serve_http(
    broker: Broker, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    listen = broker.config.http_listen
    listeners = await open_listeners("http_listen", listen)
    port = listeners[0].socket.getsockname()[1]
    log.debug("HTTP listener on %s:%d", listen.host, port)
    limits = broker.config.limits
    connections = HttpConnections(limits.http_connections_max, broker.metrics)
    timeout_s = limits.http_request_timeout_ms / 1000
    authenticated = HttpAuthentication(build_app(broker), broker)  # type: ignore[arg-type]
    app = ExchangeLimits(
        HttpRequestCounts(authenticated, broker.metrics),
        connections,
        timeout_s,
        limits.http_request_bytes_max,
        limits.http_body_bytes_max,
    )
    config = hypercorn_config(limits)
    tls = (
        ServerTlsContext(broker.config.security, http=True)
        if broker.config.security.http_tls
        else None
    )
    serve = functools.partial(
        _serve_connection,
        wrap_app(app, config.wsgi_max_body_size, "asgi"),  # type: ignore[arg-type]
        config,
        WorkerContext(None),
        connections,
        timeout_s,
        tls,
    )
    task_status.started(port)
    await trio.serve_listeners(serve, listeners)


async def _serve_connection(
    app: AppWrapper,
    config: Config,
    context: WorkerContext,
    connections: HttpConnections,
    timeout_s: float,
    tls: ServerTlsContext | None,
    stream: trio.SocketStream,
) -> None:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        await trio.aclose_forcefully(stream)
        return
    connection = HttpConnection((str(host), int(port)), stream, trio.current_time() + timeout_s)
    if not connections.admit(connection):
        await trio.aclose_forcefully(stream)
        return
    try:
        with connection.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(connection.expire)
                # Hypercorn does the TLS handshake of an SSLStream itself (bounded by
                # its ssl_handshake_timeout) and reads the negotiated ALPN protocol.
                served: trio.abc.Stream = stream
                if tls is not None:
                    served = trio.SSLStream(stream, tls.context(), server_side=True)
                await TCPServer(app, config, context, {}, served).run()  # type: ignore[arg-type]
                nursery.cancel_scope.cancel()
    finally:
        connections.leave(connection)
        await trio.aclose_forcefully(stream)
