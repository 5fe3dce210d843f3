"""The HTTP pool: when full, a new connection takes the slot of the oldest one
outside the app (idle, or still sending its request), or else of the oldest in a long
exchange (a stream, a long poll); connections the app is answering at once are never
evicted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio

from weir.broker.http.listener import HttpConnection, HttpConnections
from weir.broker.metrics import Metrics


@contextmanager
def connections(count: int) -> Iterator[list[HttpConnection]]:
    """`count` connections over real socket pairs (closed on exit)."""
    sockets = [s for _ in range(count) for s in trio.socket.socketpair()]
    try:
        yield [
            HttpConnection(("127.0.0.1", port), trio.SocketStream(sockets[2 * port]), 0.0)
            for port in range(count)
        ]
    finally:
        for sock in sockets:
            sock.close()


async def test_a_full_pool_evicts_the_oldest_connection_outside_the_app() -> None:
    metrics = Metrics()
    pool = HttpConnections(3, metrics)
    with connections(4) as (answering, oldest, idle, newcomer):
        for connection in (answering, oldest, idle):
            assert pool.admit(connection)
        answering.requests_in_app = 1
        assert pool.admit(newcomer)
        assert oldest.scope.cancel_called
        assert oldest.stream.socket.fileno() == -1, "its socket was not closed"
        assert not answering.scope.cancel_called and not idle.scope.cancel_called
        assert metrics.http_connections_evicted_total == 1
        assert pool.find(oldest.peer) is None and pool.find(newcomer.peer) is newcomer


async def test_a_pool_full_of_connections_being_answered_refuses_newcomers() -> None:
    pool = HttpConnections(2, Metrics())
    with connections(4) as (first, second, refused, later):
        for connection in (first, second):
            assert pool.admit(connection)
            connection.requests_in_app = 1
        assert not pool.admit(refused)
        pool.leave(first)
        assert pool.admit(later)


async def test_a_pool_full_of_answers_evicts_the_oldest_long_exchange_before_refusing() -> None:
    pool = HttpConnections(3, Metrics())
    with connections(5) as (answering, first_stream, second_stream, newcomer, refused):
        for connection in (answering, first_stream, second_stream):
            assert pool.admit(connection)
            connection.requests_in_app = 1
        first_stream.in_long_exchange = second_stream.in_long_exchange = True
        assert pool.admit(newcomer)
        assert first_stream.scope.cancel_called
        assert not second_stream.scope.cancel_called and not answering.scope.cancel_called
        newcomer.requests_in_app = 1
        second_stream.in_long_exchange = False  # its stream ended; another request now
        assert not pool.admit(refused)
