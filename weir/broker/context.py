"""What a request handler is given, and the handler signature."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from weir.broker.broker import Broker, wall_clock_ms
from weir.wire.protocol import RequestHeader


@dataclass(frozen=True)
class RequestContext:
    header: RequestHeader
    broker: Broker

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @staticmethod
    def now_ms() -> int:
        return wall_clock_ms()


# A handler returns the response body, or None when no response is sent (acks=0).
Handler = Callable[[RequestContext, Any], Awaitable[dict[str, Any] | None]]
