"""An HTTP exchange's limits (`ExchangeLimits` and `weir.broker.http.exchange`): a
body is cut off past its bound however it is sent, an endpoint reads a bounded body
or refuses it, and long polls or streams move their own exchange's deadline."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from starlette.requests import ClientDisconnect, Request

from weir.broker.http.exchange import (
    BodyTooLarge,
    extend_deadline,
    read_body,
    stream_body,
)
from weir.broker.http.listener import ExchangeLimits, HttpConnection, HttpConnections
from weir.broker.metrics import Metrics

PEER = ("127.0.0.1", 5000)
TIMEOUT_S = 5.0
BODY_BYTES_MAX = 100


def scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "headers": headers,
        "client": PEER,
    }


def chunks(count: int, size: int) -> Any:
    """A chunked body of `count` pieces of `size` bytes, as Hypercorn hands it on."""
    messages = [
        {"type": "http.request", "body": b"x" * size, "more_body": i < count - 1}
        for i in range(count)
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    return receive


async def run(
    app: Any,
    receive: Any,
    headers: list[tuple[bytes, bytes]],
    seen: list[HttpConnections] | None = None,
) -> list[Any]:
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    connections = HttpConnections(4, Metrics())
    a, _b = trio.testing.memory_stream_pair()
    connection = HttpConnection(PEER, a, trio.current_time() + TIMEOUT_S)  # type: ignore[arg-type]
    assert connections.admit(connection)
    if seen is not None:
        seen.append(connections)
    limits = ExchangeLimits(app, connections, TIMEOUT_S, 8192, BODY_BYTES_MAX)
    await limits(scope(headers), receive, send)
    sent.append(connection.deadline_s)
    return sent


CHUNKED = [(b"transfer-encoding", b"chunked")]


async def test_a_chunked_body_past_the_bound_reads_as_a_client_that_left() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        try:
            await Request(scope, receive).body()
            seen.append("read")
        except ClientDisconnect:
            seen.append("cut off")

    await run(app, chunks(3, 60), CHUNKED)
    assert seen == ["cut off"]
    seen.clear()
    await run(app, chunks(2, 40), CHUNKED)
    assert seen == ["read"]


async def test_an_announced_body_over_the_bound_is_answered_413_unread() -> None:
    called = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called.append(True)

    sent = await run(app, chunks(1, 10), [(b"content-length", b"101")])
    assert not called
    assert sent[0]["status"] == 413


async def test_read_body_refuses_past_its_own_bound_and_stream_body_lifts_the_exchanges() -> None:
    outcomes: list[object] = []

    async def bounded(scope: Any, receive: Any, send: Any) -> None:
        try:
            outcomes.append(len(await read_body(Request(scope, receive), 50)))
        except BodyTooLarge:
            outcomes.append("too large")

    await run(bounded, chunks(3, 20), CHUNKED)
    await run(bounded, chunks(2, 20), CHUNKED)
    assert outcomes == ["too large", 40]

    async def streaming(scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        stream_body(request)
        outcomes.append(sum([len(piece) async for piece in request.stream()]))

    await run(streaming, chunks(10, 60), CHUNKED)
    assert outcomes[-1] == 600


async def test_a_long_poll_moves_its_exchanges_deadline_and_the_answer_restarts_it() -> None:
    during: list[float] = []
    connections: list[HttpConnections] = []

    async def long_poll(scope: Any, receive: Any, send: Any) -> None:
        extend_deadline(Request(scope, receive), 20.0)
        connection = connections[0].find(PEER)
        assert connection is not None
        during.append(connection.deadline_s - trio.current_time())

    sent = await run(long_poll, chunks(1, 0), [], connections)
    assert during[0] >= 20.0 + TIMEOUT_S - 0.1
    assert sent[-1] <= trio.current_time() + TIMEOUT_S  # from the answer on: the usual
