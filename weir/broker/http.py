"""HTTP endpoints: /health/live, /health/ready, /metrics (Prometheus text), and the
JSON group views GET /v1/groups and GET /v1/groups/{id} (weir.broker.group_views)."""

from __future__ import annotations

import functools
import json
import logging
import urllib.parse

import trio

from weir.broker.broker import Broker
from weir.broker.group_views import group_detail, group_summaries

log = logging.getLogger(__name__)

HTTP_REQUEST_BYTES_MAX = 8192
HTTP_REQUEST_TIMEOUT_MS = 5000
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


async def serve_http(
    broker: Broker, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    listen = broker.config.http_listen
    listeners = await trio.open_tcp_listeners(listen.port, host=listen.host)
    port = listeners[0].socket.getsockname()[1]
    log.debug("HTTP listener on %s:%d", listen.host, port)
    task_status.started(port)
    connection_slots = trio.CapacityLimiter(broker.config.limits.http_connections_max)
    await trio.serve_listeners(
        functools.partial(_serve_connection, broker, connection_slots), listeners
    )


async def _serve_connection(
    broker: Broker, connection_slots: trio.CapacityLimiter, stream: trio.abc.Stream
) -> None:
    try:
        connection_slots.acquire_nowait()
    except trio.WouldBlock:
        await trio.aclose_forcefully(stream)
        return
    try:
        with trio.move_on_after(HTTP_REQUEST_TIMEOUT_MS / 1000):
            request_line = await _read_request_line(stream)
            if request_line is not None:
                await stream.send_all(_respond(broker, request_line))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        connection_slots.release()
        await trio.aclose_forcefully(stream)


async def _read_request_line(stream: trio.abc.Stream) -> str | None:
    buffer = bytearray()
    while b"\r\n\r\n" not in buffer and b"\n\n" not in buffer:
        if len(buffer) > HTTP_REQUEST_BYTES_MAX:
            return None
        chunk = await stream.receive_some(4096)
        if not chunk:
            return None
        buffer += chunk
    return buffer.split(b"\n", 1)[0].decode("latin-1").strip()


def _respond(broker: Broker, request_line: str) -> bytes:
    parts = request_line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return _response(400, "Bad Request", "bad request\n")
    method, target, _ = parts
    path = target.split("?", 1)[0]
    if method not in ("GET", "HEAD"):
        return _response(405, "Method Not Allowed", "only GET is supported\n")
    if path == "/health/live":
        return _response(200, "OK", "live\n")
    if path == "/health/ready":
        if broker.ready:
            return _response(200, "OK", "ready\n")
        return _response(503, "Service Unavailable", "not ready\n")
    if path == "/metrics":
        return _response(200, "OK", broker.metrics.render(), METRICS_CONTENT_TYPE)
    if path == "/v1/groups" or path.startswith("/v1/groups/"):
        return _groups_response(broker, path)
    return _response(404, "Not Found", "not found\n")


def _groups_response(broker: Broker, path: str) -> bytes:
    service = broker.groups
    if service is None:
        return _json(503, "Service Unavailable", {"error": "groups are not loaded yet"})
    if path == "/v1/groups":
        return _json(200, "OK", {"groups": group_summaries(service)})
    group_id = urllib.parse.unquote(path.removeprefix("/v1/groups/"))
    detail = group_detail(broker, service, group_id)
    if detail is None:
        return _json(404, "Not Found", {"error": f"no group {group_id!r}"})
    return _json(200, "OK", detail)


def _json(status: int, reason: str, document: object) -> bytes:
    body = json.dumps(document, indent=1, sort_keys=True) + "\n"
    return _response(status, reason, body, "application/json")


def _response(
    status: int, reason: str, body: str, content_type: str = "text/plain; charset=utf-8"
) -> bytes:
    payload = body.encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(payload)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + payload
