"""Calling a handler the way the server does, for the broker's unit tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from weir.broker.broker import Broker
from weir.broker.handlers.context import (
    Body,
    Deferred,
    EncodedResponse,
    Handler,
    RequestContext,
    resolve,
)
from weir.wire.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)

CORRELATION_ID = 42


async def call(
    broker: Broker, handler: Handler, api_key: int, version: int, body: Mapping[str, Any]
) -> Any:
    """Run `handler` on `body` as the wire decodes it, wait for a deferred
    answer, and return the response as decoded back from its bytes (so field
    names and per-version fields are the wire's own)."""
    frame = memoryview(encode_request(api_key, version, CORRELATION_ID, "broker-test", body))[4:]
    header = parse_request_header(frame)
    response = await resolve(handler(RequestContext(header, broker), decode_request(header, frame)))
    assert response is not None
    if isinstance(response, EncodedResponse):  # Produce encodes its own responses
        encoded = response.frame
    else:
        encoded = encode_response(api_key, version, header.correlation_id, response)
    correlation_id, decoded = decode_response(api_key, version, memoryview(encoded)[4:])
    assert correlation_id == CORRELATION_ID
    return decoded


async def begin(
    broker: Broker, handler: Handler, api_key: int, version: int, body: Mapping[str, Any]
) -> tuple[bool, Callable[[], Awaitable[Any]]]:
    """Run `handler` as `call` does but stop before a deferred answer is awaited:
    (whether it was deferred, a function awaiting and decoding the response)."""
    frame = memoryview(encode_request(api_key, version, CORRELATION_ID, "broker-test", body))[4:]
    header = parse_request_header(frame)
    answer = handler(RequestContext(header, broker), decode_request(header, frame))

    async def finish() -> Any:
        response: Body = await resolve(answer)
        assert response is not None and not isinstance(response, EncodedResponse)
        encoded = encode_response(api_key, version, header.correlation_id, response)
        return decode_response(api_key, version, memoryview(encoded)[4:])[1]

    return isinstance(answer, Deferred), finish
