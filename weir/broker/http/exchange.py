"""One HTTP exchange's limits, as the endpoints see them: how long it may take and
how much of its body may be read.

The listener's middleware (`listener.ExchangeLimits`) gives every exchange
`http_request_timeout_ms` to be answered and `http_body_bytes_max` of body. Most
endpoints answer at once from a small body. Three kinds need more, and say so
through the `Exchange` the middleware puts in the ASGI scope:

- a long poll (SQS's ReceiveMessage with WaitTimeSeconds, a record read that waits
  for records): `extend_deadline(request, wait_s)` before it waits;
- a stream answered piece by piece (server-sent events): `extend_deadline` before
  each piece it sends, so a peer that stops reading is still closed one timeout
  after the last piece was due;
- a streamed request body (REST produce's streaming mode, one record after another
  in a chunked body that can run for as long as the client produces):
  `stream_body(request)`, after which the endpoint bounds each piece it parses
  itself.

Endpoints read a body with `read_body(request, bytes_max)`, which stops at
`bytes_max` (`BodyTooLarge`: answer 413). The middleware counts every body byte the
app reads and, past `http_body_bytes_max` in an exchange that did not call
`stream_body`, tells the app the client left: no endpoint can read more.
"""

from __future__ import annotations

from collections.abc import Callable

import trio
from starlette.requests import Request

EXCHANGE_SCOPE_KEY = "weir.exchange"


class BodyTooLarge(Exception):  # noqa: N818 (an outcome, answered 413)
    pass


class Exchange:
    def __init__(
        self, timeout_s: float, body_bytes_max: int, set_deadline: Callable[[float], None]
    ) -> None:
        self.timeout_s = timeout_s
        # None once the endpoint streams its body (it bounds each piece itself).
        self.body_bytes_max: int | None = body_bytes_max
        self.body_bytes = 0
        self._set_deadline = set_deadline

    def extend_deadline(self, seconds: float) -> None:
        """The exchange may run `seconds` more, plus the usual timeout."""
        self._set_deadline(trio.current_time() + max(seconds, 0.0) + self.timeout_s)

    def body_over_bound(self, chunk_bytes: int) -> bool:
        """Count a piece of body the app reads; True once past the bound."""
        self.body_bytes += chunk_bytes
        return self.body_bytes_max is not None and self.body_bytes > self.body_bytes_max


def exchange_of(request: Request) -> Exchange | None:
    """The exchange's limits (None outside the listener: a test calling the app)."""
    exchange = request.scope.get(EXCHANGE_SCOPE_KEY)
    return exchange if isinstance(exchange, Exchange) else None


def extend_deadline(request: Request, seconds: float) -> None:
    exchange = exchange_of(request)
    if exchange is not None:
        exchange.extend_deadline(seconds)


def stream_body(request: Request) -> None:
    """Lift the body bound of this exchange: the endpoint bounds what it parses."""
    exchange = exchange_of(request)
    if exchange is not None:
        exchange.body_bytes_max = None


async def read_body(request: Request, bytes_max: int) -> bytes:
    """The whole body, or BodyTooLarge once it passes `bytes_max`."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > bytes_max):
        raise BodyTooLarge(f"the body is over {bytes_max} bytes")
    pieces = []
    total = 0
    async for piece in request.stream():
        total += len(piece)
        if total > bytes_max:
            raise BodyTooLarge(f"the body is over {bytes_max} bytes")
        pieces.append(piece)
    return b"".join(pieces)
