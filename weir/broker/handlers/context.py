"""What a request handler is given, and the handler signature.

A handler takes the request's generated class (`weir.wire.messages`) and answers
with the response's: `Handler[FetchRequest, FetchResponse]`. Only the registry
(`weir.broker.handlers.apis.HANDLERS`) erases the two types, to hold every API in one table."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.handlers.request_authorization import RequestAuthorization, Session
from weir.wire.protocol import RequestHeader


class ClientConnection:
    """The connection a request came on, for what must learn when it closes (a
    leader learns at once that a follower's fetch connection ended: a killed
    follower's kernel closes its sockets). Whoever registers bounds its own
    callbacks (the cluster member: one per follower connection)."""

    def __init__(self, listener_name: str = "PLAINTEXT") -> None:
        self.closed = False
        self._on_close: list[Callable[[], None]] = []
        self.listener_name = listener_name
        # Who the connection authenticated as; None until it has (a SASL listener's
        # connection before its SaslAuthenticate succeeds).
        self.session: Session | None = None
        # The SASL exchange under way or done (`weir.broker.handlers.sasl`), if any.
        self.sasl: object | None = None
        # KIP-368: when the session ends (time.monotonic()); None: with the connection.
        self.session_expires_s: float | None = None
        # Set by a failed login: the writer closes the connection once the response
        # that says so is sent.
        self.close_after_response = False
        # Client quotas (KIP-219): the reader takes no request before this time
        # (time.monotonic()); 0.0 when not throttled.
        self.throttled_until_s = 0.0

    def on_close(self, callback: Callable[[], None]) -> None:
        if self.closed:
            callback()
        else:
            self._on_close.append(callback)

    def close(self) -> None:
        """The server's: the connection ended (each callback runs once)."""
        self.closed = True
        callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            callback()


# Not frozen: a frozen dataclass costs about 7x more to construct (1.4 µs against
# 0.2 µs for a 13-field one), and this is built on the produce path. Never mutated.
@dataclass
class RequestContext:
    header: RequestHeader
    broker: Broker
    # The client's address as Kafka shows it ("/127.0.0.1"); "" when not a socket.
    client_host: str = ""
    # The connection it came on; None when not a socket (tests, callers outside the server).
    connection: ClientConnection | None = None
    # The session's authorization; None when no authorizer is enabled (all allowed).
    authorization: RequestAuthorization | None = None

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def listener_name(self) -> str:
        """The listener the request came in on ("" outside a connection)."""
        return "" if self.connection is None else self.connection.listener_name

    @staticmethod
    def now_ms() -> int:
        return wall_clock_ms()


# Not frozen: a frozen dataclass costs about 7x more to construct (1.4 µs against
# 0.2 µs for a 13-field one), and this is built on the produce path. Never mutated.
@dataclass
class EncodedResponse:
    """A response frame a handler encoded itself (size prefix included)."""

    frame: bytes


RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")

# The response's generated class; an EncodedResponse; None: no response is sent (acks=0).
Body: TypeAlias = ResponseT | EncodedResponse | None


# Not frozen: a frozen dataclass costs about 7x more to construct (1.4 µs against
# 0.2 µs for a 13-field one), and this is built on the produce path. Never mutated.
@dataclass
class Deferred(Generic[ResponseT]):
    """A response that waits for something (durability, new records). The
    handler did the immediate work; the connection's writer awaits `finish`
    when this response's turn comes, so responses still leave in request order
    and no task is spawned per request."""

    finish: Callable[[], Awaitable[Body[ResponseT]]]


Answer: TypeAlias = Body[ResponseT] | Deferred[ResponseT]

# Handlers are plain functions that decide, run on the connection's reader: anything
# that waits (durability, new records, the disk executor) goes into a Deferred.
Handler: TypeAlias = Callable[[RequestContext, RequestT], Answer[ResponseT]]


async def resolve(answer: Answer[ResponseT]) -> Body[ResponseT]:
    """The final body of a handler's answer (tests and callers outside the server)."""
    if isinstance(answer, Deferred):
        return await answer.finish()
    return answer


ItemT = TypeVar("ItemT")

# One item's answer in a response that lists many: known now, or awaited later.
ItemAnswer: TypeAlias = ItemT | Callable[[], Awaitable[ItemT]]


def answer_in_order(
    items: Sequence[ItemAnswer[ItemT]],
    item_type: type[ItemT],
    response: Callable[[list[ItemT]], ResponseT],
) -> ResponseT | Deferred[ResponseT]:
    """The response now when every item is known, else a Deferred awaiting the
    pending ones one after another (their disk work runs one at a time anyway)."""
    known = [item for item in items if isinstance(item, item_type)]
    if len(known) == len(items):
        return response(known)

    async def finish() -> ResponseT:
        return response(
            [item if isinstance(item, item_type) else await item() for item in items]  # type: ignore[operator]
        )

    return Deferred(finish)
