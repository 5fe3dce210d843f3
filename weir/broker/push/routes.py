"""`/v1/subscriptions`: push subscriptions over HTTP (docs/http-push.md).

    GET    /v1/subscriptions               list (no secrets)
    POST   /v1/subscriptions               create: 201 with the secret, shown this once
    GET    /v1/subscriptions/{name}        one, with this broker's delivery status for
                                           the partitions it leads
    POST   /v1/subscriptions/{name}/pause  stop delivering (records wait in the group)
    POST   /v1/subscriptions/{name}/resume
    DELETE /v1/subscriptions/{name}        the subscription and its group's configs

Authorization, when an authorizer is on (the Kafka API's ACLs): creating, pausing,
resuming and deleting need ALTER on the cluster (the broker will make requests to a
URL the caller chose, as itself), and creating also READ on the topic and on the
subscription's group (the caller must be allowed to read what it has pushed);
listing and reading need DESCRIBE on the subscription's group.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.coordinators.share_configs import dead_letter_refusal
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.broker.push.service import PushService, push_service_of
from weir.broker.push.share_access import ShareAccess
from weir.broker.push.subscription import (
    Subscription,
    SubscriptionError,
    new_secret,
    subscription_from_request,
)
from weir.controller.errors import ControllerError
from weir.groupcoord.group_configs import InvalidGroupConfig, validate_group_configs
from weir.security.acl import AclOperation

REQUEST_BYTES_MAX = 64 * 1024
SUBSCRIPTIONS_MAX = 1_000


class _Refused(Exception):  # noqa: N818
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _json(content: object, status: int = 200) -> Response:
    body = (json.dumps(content, indent=1, sort_keys=True) + "\n").encode()
    return Response(body, status_code=status, media_type="application/json")


def _error(status: int, message: str) -> Response:
    """The REST API's error shape (Confluent's `error_code` and `message`)."""
    return _json({"error_code": status, "message": message}, status)


# weir.broker.http.authentication's http_authorization (injected: see share_access.py).
Authorize = Callable[[Broker, Request, str], RequestAuthorization | None]


def push_routes(broker: Broker, authorize: Authorize, access: ShareAccess) -> list[BaseRoute]:
    """The routes; `authorize` gives a request's authorization, `access` is the share
    groups' access the deliveries use (weir.broker.http.push_access)."""
    service = push_service_of(broker)
    service.access = access
    service.authorize = authorize

    async def collection(request: Request) -> Response:
        if request.method == "POST":
            return await _guarded(_create(broker, service, request))
        authorization = service.authorize(broker, request, "HTTP /v1/subscriptions")
        listed = [
            s.to_public()
            for s in sorted(service.subscriptions().values(), key=lambda s: s.name)
            if authorization is None
            or authorization.allows_group(AclOperation.DESCRIBE, s.group_id)
        ]
        return _json({"subscriptions": listed})

    async def item(request: Request) -> Response:
        name = request.path_params["name"]
        if request.method == "DELETE":
            return await _guarded(_delete(broker, service, request, name))
        subscription = _found(service, name)
        if subscription is None:
            return _error(404, f"no subscription {name!r}")
        authorization = service.authorize(broker, request, "HTTP /v1/subscriptions/{name}")
        if authorization is not None and not authorization.allows_group(
            AclOperation.DESCRIBE, subscription.group_id
        ):
            return _error(
                403, f"not authorized: DESCRIBE on group {subscription.group_id!r} is needed"
            )
        return _json(
            {
                **subscription.to_public(),
                "broker": broker.config.node_id,
                "partitions": service.partition_status(subscription),
            }
        )

    async def pause(request: Request) -> Response:
        return await _guarded(_set_paused(broker, service, request, True))

    async def resume(request: Request) -> Response:
        return await _guarded(_set_paused(broker, service, request, False))

    return [
        Route("/v1/subscriptions", collection, methods=["GET", "POST"]),
        Route("/v1/subscriptions/{name}", item, methods=["GET", "DELETE"]),
        Route("/v1/subscriptions/{name}/pause", pause, methods=["POST"]),
        Route("/v1/subscriptions/{name}/resume", resume, methods=["POST"]),
    ]


async def _guarded(action: Any) -> Response:
    try:
        result: Response = await action
        return result
    except _Refused as exc:
        return _error(exc.status, exc.message)
    except ControllerError as exc:
        return _error(503, exc.message or exc.error_code.name)
    except OSError as exc:
        return _error(503, f"storing the metadata failed: {exc}")


def _found(service: PushService, name: str) -> Subscription | None:
    return service.subscriptions().get(name)


def _authorize_alter(broker: Broker, service: PushService, request: Request, api: str) -> None:
    authorization = service.authorize(broker, request, api)
    if authorization is not None and not authorization.allows_cluster(AclOperation.ALTER):
        raise _Refused(403, "not authorized: ALTER on the cluster is needed")


async def _body(request: Request) -> object:
    if "application/json" not in request.headers.get("content-type", "application/json"):
        raise _Refused(415, "the body must be application/json")
    data = bytearray()
    try:
        async for chunk in request.stream():
            data += chunk
            if len(data) > REQUEST_BYTES_MAX:
                raise _Refused(413, f"the body is larger than {REQUEST_BYTES_MAX} bytes")
    except ClientDisconnect:
        raise _Refused(400, "the body was cut short") from None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise _Refused(400, "the body is not JSON") from None


async def _create(broker: Broker, service: PushService, request: Request) -> Response:
    _authorize_alter(broker, service, request, "HTTP POST /v1/subscriptions")
    document = await _body(request)
    try:
        subscription = subscription_from_request(
            document, now_ms=wall_clock_ms(), secret=new_secret()
        )
    except SubscriptionError as exc:
        raise _Refused(400, str(exc)) from None
    authorization = service.authorize(broker, request, "HTTP POST /v1/subscriptions")
    if authorization is not None:
        if not authorization.allows_topic(AclOperation.READ, subscription.topic):
            raise _Refused(403, f"not authorized: READ on topic {subscription.topic!r} is needed")
        if not authorization.allows_group(AclOperation.READ, subscription.group_id):
            raise _Refused(
                403, f"not authorized: READ on group {subscription.group_id!r} is needed"
            )
    _check_against_broker(broker, subscription)
    configs = subscription.group_configs()

    def stage() -> Any:
        existing = broker.controller.push_subscriptions()
        if subscription.name in existing:
            raise _Refused(409, f"subscription {subscription.name!r} exists")
        if len(existing) >= SUBSCRIPTIONS_MAX:
            raise _Refused(400, f"the cluster holds {SUBSCRIPTIONS_MAX} subscriptions")
        return broker.controller.stage_set_push_subscription(
            subscription.name, subscription.to_stored(), subscription.group_id, configs
        )

    await broker.topic_changes.commit_metadata(stage)
    service.poke()
    return _json({**subscription.to_public(), "secret": subscription.secret}, 201)


def _check_against_broker(broker: Broker, subscription: Subscription) -> None:
    if broker.controller.topic(subscription.topic) is None:
        raise _Refused(404, f"topic {subscription.topic!r} does not exist")
    dead_letters = subscription.dead_letter_topic
    if dead_letters is not None:
        refusal = dead_letter_refusal(broker, subscription.group_id, dead_letters)
        if refusal is not None:
            raise _Refused(400, f"dead_letter_topic: {refusal}")
        if dead_letters == subscription.topic:
            raise _Refused(400, "dead_letter_topic: must not be the subscription's topic")
    try:
        validate_group_configs(subscription.group_configs(), broker.config.group_settings())
    except InvalidGroupConfig as exc:
        raise _Refused(400, f"the broker's share-group bounds refuse it: {exc}") from None


async def _set_paused(
    broker: Broker, service: PushService, request: Request, paused: bool
) -> Response:
    name = request.path_params["name"]
    _authorize_alter(
        broker,
        service,
        request,
        f"HTTP POST /v1/subscriptions/{{name}}/{'pause' if paused else 'resume'}",
    )
    changed: list[Subscription] = []

    def stage() -> Any:
        subscription = _found(service, name)
        if subscription is None:
            raise _Refused(404, f"no subscription {name!r}")
        updated = subscription.with_paused(paused)
        changed[:] = [updated]
        if updated == subscription:
            return None
        return broker.controller.stage_set_push_subscription(
            name, updated.to_stored(), updated.group_id, None
        )

    await broker.topic_changes.commit_metadata(stage)
    service.poke()
    return _json(changed[0].to_public())


async def _delete(broker: Broker, service: PushService, request: Request, name: str) -> Response:
    _authorize_alter(broker, service, request, "HTTP DELETE /v1/subscriptions/{name}")

    def stage() -> Any:
        subscription = _found(service, name)
        if subscription is None:
            raise _Refused(404, f"no subscription {name!r}")
        return broker.controller.stage_set_push_subscription(name, None, subscription.group_id, {})

    await broker.topic_changes.commit_metadata(stage)
    service.poke()
    return _json({"deleted": name})


_NAME_PARAMETER = {
    "name": "name", "in": "path", "required": True,
    "schema": {"type": "string", "pattern": "^[a-zA-Z0-9._-]{1,100}$"},
}  # fmt: skip
_ERRORS = {
    "400": {"description": "invalid request (the message names the field)"},
    "403": {"description": "not authorized (the message names the ACL needed)"},
    "404": {"description": "no such subscription (or topic)"},
}
_SUBSCRIPTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "topic": {"type": "string"},
        "group": {"type": "string", "readOnly": True},
        "url": {"type": "string", "format": "uri"},
        "header_filters": {
            "type": "array", "maxItems": 16,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "values": {"type": "array", "items": {"type": "string"}, "maxItems": 16},
                },
                "required": ["name"],
            },
        },
        "batch_size": {"type": "integer", "minimum": 1, "maximum": 500, "default": 1},
        "concurrency": {"type": "integer", "minimum": 1, "maximum": 64, "default": 4},
        "timeout_ms": {"type": "integer", "minimum": 100, "maximum": 50000, "default": 10000},
        "retry": {
            "type": "object",
            "properties": {
                "min_backoff_ms": {"type": "integer", "minimum": 0, "default": 1000},
                "max_backoff_ms": {"type": "integer", "minimum": 0, "default": 60000},
                "max_attempts": {"type": "integer", "minimum": 1, "default": 5},
            },
        },
        "dead_letter_topic": {"type": "string", "nullable": True},
        "ordered_by_key": {"type": "boolean", "default": False},
        "paused": {"type": "boolean", "default": False},
        "start": {"type": "string", "enum": ["latest", "earliest"], "default": "latest"},
    },
    "required": ["name", "topic", "url"],
}  # fmt: skip

# OpenAPI 3 path items of these routes (merged into /v3/openapi.json by the REST
# admin part); the subscription's schema inline, so the fragment stands alone.
PUSH_OPENAPI_PATHS: dict[str, Any] = {
    "/v1/subscriptions": {
        "get": {
            "operationId": "listSubscriptions",
            "summary": "List push subscriptions",
            "parameters": [],
            "responses": {"200": {"description": "the subscriptions (no secrets)"}},
        },
        "post": {
            "operationId": "createSubscription",
            "summary": "Create a push subscription",
            "parameters": [],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _SUBSCRIPTION_SCHEMA}},
            },
            "responses": {
                "201": {"description": "created; the body holds the secret, shown this once"},
                "409": {"description": "a subscription of that name exists"},
                **_ERRORS,
            },
        },
    },
    "/v1/subscriptions/{name}": {
        "get": {
            "operationId": "getSubscription",
            "summary": "A subscription, with this broker's delivery status per partition it leads",
            "parameters": [_NAME_PARAMETER],
            "responses": {"200": {"description": "the subscription"}, **_ERRORS},
        },
        "delete": {
            "operationId": "deleteSubscription",
            "summary": "Delete a subscription",
            "parameters": [_NAME_PARAMETER],
            "responses": {"200": {"description": "deleted"}, **_ERRORS},
        },
    },
    "/v1/subscriptions/{name}/pause": {
        "post": {
            "operationId": "pauseSubscription",
            "summary": "Pause deliveries",
            "parameters": [_NAME_PARAMETER],
            "responses": {"200": {"description": "paused"}, **_ERRORS},
        },
    },
    "/v1/subscriptions/{name}/resume": {
        "post": {
            "operationId": "resumeSubscription",
            "summary": "Resume deliveries",
            "parameters": [_NAME_PARAMETER],
            "responses": {"200": {"description": "resumed"}, **_ERRORS},
        },
    },
}
