"""HTTP requests counted by the surface they came through, as
`weir_http_requests_total{surface=...}`, and the time the broker spent on
them, `weir_http_request_seconds_total{surface=...}`: so what the web console
costs (its pages, and the API calls its scripts make, which carry the
`X-Weir-Console` header) is visible beside the API's other callers."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

from prometheus_client.metrics_core import CounterMetricFamily, Metric

from weir.broker.http.authentication import CONSOLE_HEADER
from weir.broker.http.console.routes import CONSOLE_PATH
from weir.broker.metrics import Metrics

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SURFACES = ("console_page", "console_api", "api", "sqs", "health", "metrics")


def surface_of(scope: Scope) -> str:
    """Which of SURFACES a request belongs to."""
    path: str = scope["path"]
    if path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/"):
        return "console_page"
    if any(name == CONSOLE_HEADER for name, _ in scope["headers"]):
        return "console_api"
    if path.startswith("/health/"):
        return "health"
    if path == "/metrics":
        return "metrics"
    if path == "/" and scope["method"] == "POST":
        return "sqs"
    return "api"


class HttpRequestCounts:
    """Counts each request, and the wall time until its answer ended, by surface."""

    def __init__(self, app: AsgiApp, metrics: Metrics) -> None:
        self.app = app
        self.requests: Counter[str] = Counter(dict.fromkeys(SURFACES, 0))
        self.seconds: dict[str, float] = dict.fromkeys(SURFACES, 0.0)
        metrics.register_counter_family(
            "weir_http_requests_total",
            "HTTP requests, by surface: console_page (the console's pages and files), "
            "console_api (API calls made by the console's scripts), api, sqs, health, "
            "metrics.",
            "surface",
            lambda: self.requests,
        )
        metrics.register_collector(self._seconds_family)

    def _seconds_family(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "weir_http_request_seconds",
            "Wall time from an HTTP request's arrival to the end of its answer, by surface "
            "(long polls and streams included).",
            labels=["surface"],
        )
        for surface, seconds in self.seconds.items():
            family.add_metric([surface], seconds)
        yield family

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        surface = surface_of(scope)
        self.requests[surface] += 1
        started_s = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.seconds[surface] += time.perf_counter() - started_s
