"""The HTTP endpoints, a Starlette app (served by weir.broker.http.listener):
/health/live, /health/ready, /metrics (Prometheus text, OpenMetrics when the
Accept header asks for it), the JSON group views GET /v1/groups and
GET /v1/groups/{id} (weir.broker.http.group_views), and the share partitions led
here, GET /v1/queues and GET /v1/queues/{group} (weir.broker.http.queue_views).

Every endpoint is an `async def`: Starlette runs a plain `def` endpoint on a
worker thread, and these read broker state that only the Trio thread may touch.
"""

from __future__ import annotations

import json

import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from weir.broker.broker import Broker
from weir.broker.coordinators.group_service import GroupService
from weir.broker.coordinators.share_service import ShareService
from weir.broker.http.authentication import http_authorization
from weir.broker.http.console.routes import console_routes
from weir.broker.http.group_views import cluster_group_summaries, group_detail
from weir.broker.http.push_access import push_share_access
from weir.broker.http.queue_views import queue_rows
from weir.broker.http.rest_admin import rest_admin_routes
from weir.broker.http.rest_records import records_routes
from weir.broker.http.sqs.routes import sqs_routes
from weir.broker.push.routes import push_routes
from weir.security.acl import AclOperation

JSON_CONTENT_TYPE = "application/json"


class _IndentedJSON(JSONResponse):
    def render(self, content: object) -> bytes:
        return (json.dumps(content, indent=1, sort_keys=True) + "\n").encode()


def build_app(broker: Broker) -> Starlette:
    async def live(request: Request) -> Response:
        return PlainTextResponse("live\n")

    async def ready(request: Request) -> Response:
        return _ready_response(broker)

    async def metrics(request: Request) -> Response:
        authorization = http_authorization(broker, request, "HTTP /metrics")
        if authorization is not None and not authorization.allows_cluster(AclOperation.DESCRIBE):
            return _forbidden("DESCRIBE on the cluster")
        accept = request.headers.get("accept", "")
        body, content_type = await broker.metrics.exposition_off_loop(accept)
        return Response(body, media_type=content_type)

    async def groups(request: Request) -> Response:
        service = broker.groups
        if not isinstance(service, GroupService):
            return _IndentedJSON({"error": "groups are not loaded yet"}, status_code=503)
        summaries = await cluster_group_summaries(broker, service)
        authorization = http_authorization(broker, request, "HTTP /v1/groups")
        if authorization is not None:
            summaries["groups"] = [
                summary
                for summary in summaries["groups"]
                if authorization.allows_group(AclOperation.DESCRIBE, str(summary["group_id"]))
            ]
        return _IndentedJSON(summaries)

    async def group(request: Request) -> Response:
        service = broker.groups
        if not isinstance(service, GroupService):
            return _IndentedJSON({"error": "groups are not loaded yet"}, status_code=503)
        group_id = request.path_params["group_id"]
        authorization = http_authorization(broker, request, "HTTP /v1/groups/{id}")
        if authorization is not None and not authorization.allows_group(
            AclOperation.DESCRIBE, group_id
        ):
            return _forbidden(f"DESCRIBE on group {group_id!r}")
        detail = group_detail(broker, service, group_id)
        if detail is None:
            return _IndentedJSON({"error": f"no group {group_id!r}"}, status_code=404)
        return _IndentedJSON(detail)

    async def queues(request: Request) -> Response:
        service = broker.shares
        if not isinstance(service, ShareService):
            return _IndentedJSON({"error": "share groups are not loaded yet"}, status_code=503)
        group_id = request.path_params.get("group_id")
        authorization = http_authorization(broker, request, "HTTP /v1/queues")
        rows = queue_rows(service, group_id)
        if authorization is not None:
            rows = [
                r for r in rows if authorization.allows_group(AclOperation.DESCRIBE, r["group"])
            ]
        return _IndentedJSON({"broker": broker.config.node_id, "share_partitions": rows})

    return Starlette(
        routes=[
            Route("/health/live", live),
            Route("/health/ready", ready),
            Route("/metrics", metrics),
            Route("/v1/groups", groups),
            Route("/v1/groups/{group_id:path}", group),
            Route("/v1/queues", queues),
            Route("/v1/queues/{group_id:path}", queues),
            *console_routes(),
            *sqs_routes(broker),
            *rest_admin_routes(broker),
            *records_routes(broker),
            *push_routes(broker, http_authorization, push_share_access(broker)),
        ]
    )


def _forbidden(what: str) -> Response:
    return _IndentedJSON({"error": f"not authorized: {what} is needed"}, status_code=403)


def _ready_response(broker: Broker) -> Response:
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
    return Response(body + "\n", status_code=200 if ready else 503, media_type=JSON_CONTENT_TYPE)
