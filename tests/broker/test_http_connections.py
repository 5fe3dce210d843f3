"""The HTTP pool: when full, a new connection takes the slot of the oldest one
still waiting for its request; connections busy answering are never evicted."""

from __future__ import annotations

from weir.broker.http import HttpConnections, _HttpConnection
from weir.broker.metrics import Metrics


async def test_a_full_pool_evicts_the_oldest_connection_still_reading_its_request() -> None:
    metrics = Metrics()
    pool = HttpConnections(3, metrics)
    oldest, answering, idle = _HttpConnection(), _HttpConnection(), _HttpConnection()
    for connection in (answering, oldest, idle):
        assert pool.admit(connection)
    answering.reading_request = False
    newcomer = _HttpConnection()
    assert pool.admit(newcomer)
    assert oldest.scope.cancel_called
    assert not answering.scope.cancel_called and not idle.scope.cancel_called
    assert metrics.http_connections_evicted_total == 1


async def test_a_pool_full_of_connections_being_answered_refuses_newcomers() -> None:
    pool = HttpConnections(2, Metrics())
    busy = [_HttpConnection(), _HttpConnection()]
    for connection in busy:
        assert pool.admit(connection)
        connection.reading_request = False
    assert not pool.admit(_HttpConnection())
    pool.leave(busy[0])
    assert pool.admit(_HttpConnection())
