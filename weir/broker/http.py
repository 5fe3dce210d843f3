"""HTTP endpoints: /health/live, /health/ready, /metrics (Prometheus text), and the
JSON group views GET /v1/groups and GET /v1/groups/{id} (weir.broker.group_views).

The listener has its own small pool (`http_connections_max`), apart from the
Kafka connections. When it is full, a new connection closes the oldest one
still waiting for its request, so idle or slow peers cannot keep health
checks out; each connection gets `http_request_timeout_ms` in all."""

from __future__ import annotations

import functools
import json
import logging
import urllib.parse
from dataclasses import dataclass, field

import trio

from weir.broker.broker import Broker
from weir.broker.coordinators.group_service import GroupService
from weir.broker.group_views import group_detail, group_summaries
from weir.broker.listen import open_listeners
from weir.broker.metrics import Metrics

log = logging.getLogger(__name__)

JSON_CONTENT_TYPE = "application/json"
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(eq=False)
class _HttpConnection:
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    reading_request: bool = True


class HttpConnections:
    """The open HTTP connections, oldest first."""

    def __init__(self, connections_max: int, metrics: Metrics) -> None:
        self.connections_max = connections_max
        self.metrics = metrics
        self._open: dict[_HttpConnection, None] = {}

    def admit(self, connection: _HttpConnection) -> bool:
        """Take a slot, closing the oldest idle connection if none is free."""
        if len(self._open) >= self.connections_max and not self._evict_oldest_idle():
            return False
        self._open[connection] = None
        return True

    def _evict_oldest_idle(self) -> bool:
        for connection in self._open:
            if connection.reading_request:
                connection.scope.cancel()
                del self._open[connection]
                self.metrics.http_connections_evicted_total += 1
                return True
        return False

    def leave(self, connection: _HttpConnection) -> None:
        self._open.pop(connection, None)


async def serve_http(
    broker: Broker, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    listen = broker.config.http_listen
    listeners = await open_listeners("http_listen", listen)
    port = listeners[0].socket.getsockname()[1]
    log.debug("HTTP listener on %s:%d", listen.host, port)
    task_status.started(port)
    connections = HttpConnections(broker.config.limits.http_connections_max, broker.metrics)
    await trio.serve_listeners(functools.partial(_serve_connection, broker, connections), listeners)


async def _serve_connection(
    broker: Broker, connections: HttpConnections, stream: trio.abc.Stream
) -> None:
    connection = _HttpConnection()
    if not connections.admit(connection):
        await trio.aclose_forcefully(stream)
        return
    timeout_s = broker.config.limits.http_request_timeout_ms / 1000
    try:
        with connection.scope, trio.move_on_after(timeout_s):
            request_line = await _read_request_line(
                stream, broker.config.limits.http_request_bytes_max
            )
            connection.reading_request = False
            if request_line is not None:
                await stream.send_all(_respond(broker, request_line))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        connections.leave(connection)
        await trio.aclose_forcefully(stream)


async def _read_request_line(stream: trio.abc.Stream, bytes_max: int) -> str | None:
    buffer = bytearray()
    while b"\r\n\r\n" not in buffer and b"\n\n" not in buffer:
        if len(buffer) > bytes_max:
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
        return _ready_response(broker)
    if path == "/metrics":
        return _response(200, "OK", broker.metrics.render(), METRICS_CONTENT_TYPE)
    if path == "/v1/groups" or path.startswith("/v1/groups/"):
        return _groups_response(broker, path)
    return _response(404, "Not Found", "not found\n")


def _groups_response(broker: Broker, path: str) -> bytes:
    service = broker.groups
    if not isinstance(service, GroupService):
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


def _ready_response(broker: Broker) -> bytes:
    """200 once Kafka clients can be served, else 503; the JSON body also
    carries the event loop's worst lag of the last minute (loop_lag.py)."""
    worst_lag_s = broker.loop_lag.worst_recent_s(trio.current_time())
    ready = broker.ready
    status: dict[str, object] = {}
    if broker.cluster is not None:
        # A cluster broker is ready once its follower replicas have caught up
        # (joined their ISR), so a rolling restart waits for it before the next.
        catching_up = broker.cluster.replicas_catching_up()
        status["replicas_catching_up"] = catching_up
        # Replicas it cannot serve (a failed disk, a damaged log) are not in sync
        # and will not be until an operator acts: not ready either.
        offline = len(broker.offline_partitions)
        status["replicas_offline"] = offline
        ready = ready and catching_up == 0 and offline == 0
        if broker.cluster.fenced():
            # Its etcd lease may have ended: it leads nothing until it renews it.
            status["fenced"] = True
            ready = False
    unavailable = broker.internal_partitions_unavailable()
    if unavailable:
        # A coordinator that cannot serve its groups says so (and why).
        status["internal_partitions_unavailable"] = unavailable
        ready = False
    body = json.dumps(
        {
            "status": "ready" if ready else "not ready",
            **status,
            "event_loop_lag_worst_last_minute_ms": round(worst_lag_s * 1000, 1),
        }
    )
    if ready:
        return _response(200, "OK", body + "\n", JSON_CONTENT_TYPE)
    return _response(503, "Service Unavailable", body + "\n", JSON_CONTENT_TYPE)


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
