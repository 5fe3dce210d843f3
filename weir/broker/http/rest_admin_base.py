"""What every REST admin endpoint shares: its declaration (`Endpoint`: method, path,
handler and what the OpenAPI document says of it, so the routes and the document
come from one list), the call it is given (`AdminCall`: path and query parameters,
a bounded JSON body, the Kafka gateway as the HTTP caller), and errors in Confluent
REST Proxy v3's shape, `{"error_code": 40401, "message": "..."}` (the HTTP status
times 100 plus a number; 50003 for what is worth retrying, as Confluent's)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from weir.broker.broker import Broker
from weir.broker.http.exchange import BodyTooLarge, extend_deadline, read_body
from weir.broker.http.kafka_gateway import (
    GatewayError,
    HttpCaller,
    KafkaGateway,
    gateway_of,
    http_caller,
)
from weir.format.errors import ErrorCode

# Longest admin request body read (an ACL, a topic with its configs, a config batch).
ADMIN_BODY_BYTES_MAX = 64 * 1024
# Kafka's own bounds on what names a resource.
TOPIC_NAME_CHARS_MAX = 249
TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
NAME_CHARS_MAX = 32_767  # a Kafka STRING
INT32_MAX = 2**31 - 1
INT16_MAX = 2**15 - 1

RETRIABLE_ERROR_CODE = 50003


class RestError(Exception):
    """An answer other than success: HTTP status, Confluent error code, message."""

    def __init__(self, status: int, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_code = error_code if error_code is not None else status * 100 + 1


def not_found(message: str) -> RestError:
    return RestError(404, message)


def bad_request(message: str) -> RestError:
    return RestError(400, message)


def retry_later(message: str) -> RestError:
    """Not possible now (no leader yet, a broker not answering): 503, 50003."""
    return RestError(503, message, RETRIABLE_ERROR_CODE)


# Kafka error codes and the HTTP status that says the same.
_STATUS_OF_KAFKA_ERROR: dict[int, int] = {
    **dict.fromkeys(
        (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ErrorCode.GROUP_AUTHORIZATION_FAILED,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        403,
    ),
    **dict.fromkeys(
        (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.UNKNOWN_TOPIC_ID,
            ErrorCode.GROUP_ID_NOT_FOUND,
            ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
            ErrorCode.RESOURCE_NOT_FOUND,
        ),
        404,
    ),
    **dict.fromkeys(
        (
            ErrorCode.TOPIC_ALREADY_EXISTS,
            ErrorCode.NON_EMPTY_GROUP,
            ErrorCode.DUPLICATE_RESOURCE,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        ),
        409,
    ),
    **dict.fromkeys(
        (
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            ErrorCode.INVALID_PARTITIONS,
            ErrorCode.INVALID_REPLICATION_FACTOR,
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            ErrorCode.INVALID_CONFIG,
            ErrorCode.INVALID_REQUEST,
            ErrorCode.POLICY_VIOLATION,
            ErrorCode.INVALID_GROUP_ID,
            ErrorCode.INVALID_REGULAR_EXPRESSION,
            ErrorCode.INVALID_PRINCIPAL_TYPE,
            ErrorCode.TOPIC_DELETION_DISABLED,
            ErrorCode.INVALID_TXN_STATE,
            ErrorCode.SECURITY_DISABLED,
        ),
        400,
    ),
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: 429,
}
_RETRIABLE = frozenset(
    (
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
    )
)


def kafka_failure(code: int, message: str | None, what: str) -> RestError:
    """The REST answer to Kafka error `code` met while doing `what`."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    text = f"{what}: {name}" + (f": {message}" if message else "")
    if code in _RETRIABLE:
        return RestError(503, text, RETRIABLE_ERROR_CODE)
    status = _STATUS_OF_KAFKA_ERROR.get(code, 500)
    return RestError(status, text, 40301 if status == 403 else None)


def gateway_failure(exc: GatewayError) -> RestError:
    if exc.retriable:
        return RestError(503, str(exc), RETRIABLE_ERROR_CODE)
    if str(exc).startswith("malformed"):  # a value that does not fit its Kafka field
        return bad_request(str(exc))
    return RestError(500, str(exc))


def check_kafka(code: int, message: str | None, what: str) -> None:
    if code != ErrorCode.NONE:
        raise kafka_failure(code, message, what)


# -- validation of untrusted names and numbers -----------------------------------------


def topic_name(value: object, where: str = "topic_name") -> str:
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= TOPIC_NAME_CHARS_MAX
        or not TOPIC_NAME.match(value)
        or value in (".", "..")
    ):
        raise bad_request(
            f"{where} must be 1 to {TOPIC_NAME_CHARS_MAX} of [a-zA-Z0-9._-] (not . or ..)"
        )
    return value


def resource_name(value: object, where: str) -> str:
    """A group id, transactional id, config name, principal: a non-empty Kafka STRING."""
    if not isinstance(value, str) or not 0 < len(value) <= NAME_CHARS_MAX:
        raise bad_request(f"{where} must be a string of 1 to {NAME_CHARS_MAX} characters")
    return value


def bounded_int(value: object, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad_request(f"{where} must be an integer from {low} to {high}")
    return value


def int_text(text: str, where: str, low: int = 0, high: int = INT32_MAX) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 10:
        raise bad_request(f"{where} must be an integer from {low} to {high}")
    return bounded_int(int(text), where, low, high)


# -- the call ----------------------------------------------------------------------------


@dataclass
class AdminCall:
    """One HTTP request to an admin endpoint."""

    broker: Broker
    request: Request
    caller: HttpCaller
    gateway: KafkaGateway

    @property
    def cluster_id(self) -> str:
        return str(self.broker.controller.cluster_id)

    def path(self, name: str) -> str:
        return str(self.request.path_params[name])

    def query(self, name: str) -> str | None:
        values = self.request.query_params.getlist(name)
        if len(values) > 1:
            raise bad_request(f"query parameter {name!r} given more than once")
        return values[0] if values else None

    def url(self, *parts: object) -> str:
        """The absolute URL of a resource: /v3/clusters/{cluster_id}/parts..."""
        base = str(self.request.base_url).rstrip("/")
        tail = "".join(f"/{part}" for part in parts)
        return f"{base}/v3/clusters/{self.cluster_id}{tail}"

    def extend_deadline(self, seconds: float) -> None:
        """The call may run `seconds` more than the listener's timeout (a topic
        created through the controller, a redrive batch produced with acks=all)."""
        extend_deadline(self.request, seconds)

    async def send(
        self,
        api_key: int,
        version: int,
        body: dict[str, Any],
        *,
        node_id: int | None = None,
        wait_ms: int = 0,
    ) -> Any:
        return await self.gateway.send(
            self.caller, api_key, version, body, node_id=node_id, wait_ms=wait_ms
        )

    async def json_body(self) -> dict[str, Any]:
        """The request's JSON object body (at most ADMIN_BODY_BYTES_MAX bytes)."""
        try:
            body = await read_body(self.request, ADMIN_BODY_BYTES_MAX)
        except BodyTooLarge as exc:
            raise RestError(413, str(exc)) from None
        except ClientDisconnect:
            raise bad_request("the client went away before sending its body") from None
        # Checked once the body is read: the connection stays usable.
        content_type = self.request.headers.get("content-type", "application/json")
        if content_type.split(";")[0].strip().lower() not in ("application/json", ""):
            raise RestError(415, "the body must be application/json")
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            raise bad_request("the body is not JSON") from None
        if not isinstance(document, dict):
            raise bad_request("the body must be a JSON object")
        return document


def resource(kind: str, self_url: str, **fields: Any) -> dict[str, Any]:
    """A Confluent v3 resource: kind, metadata.self (and resource_name), then fields."""
    return {"kind": kind, "metadata": {"self": self_url, "resource_name": None}, **fields}


def collection(kind: str, self_url: str, data: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"self": self_url, "next": None}, "data": list(data)}


def related(url: str) -> dict[str, str]:
    return {"related": url}


def json_response(document: object, status: int = 200) -> Response:
    return JSONResponse(document, status_code=status)


def no_content() -> Response:
    return Response(status_code=204)


def error_response(error: RestError) -> Response:
    # A 413 leaves the body unread: the connection cannot carry another request.
    headers = {"connection": "close"} if error.status == 413 else None
    return JSONResponse(
        {"error_code": error.error_code, "message": error.message},
        status_code=error.status,
        headers=headers,
    )


# -- declarations --------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A query parameter, as OpenAPI documents it."""

    name: str
    description: str
    required: bool = False
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "string"})


Handler = Callable[[AdminCall], Awaitable[Response]]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    summary: str
    query: tuple[Param, ...] = ()
    # The JSON schema of the body (its "required" list is enforced by the handler).
    body: Mapping[str, Any] | None = None
    body_required: bool = True
    responses: Mapping[int, str] = field(default_factory=lambda: {200: "OK"})
    tag: str = "admin"


PATH_PARAM = re.compile(r"{([a-z_]+)}")


def endpoint_route(broker: Broker, endpoint: Endpoint) -> Route:
    async def serve(request: Request) -> Response:
        call = AdminCall(broker, request, http_caller(broker, request), gateway_of(broker))
        try:
            if "cluster_id" in request.path_params and call.path("cluster_id") != call.cluster_id:
                raise not_found(f"no cluster {call.path('cluster_id')!r}")
            return await endpoint.handler(call)
        except RestError as error:
            return error_response(error)
        except GatewayError as exc:
            return error_response(gateway_failure(exc))

    return Route(endpoint.path, serve, methods=[endpoint.method])


def openapi_paths(endpoints: Sequence[Endpoint]) -> dict[str, dict[str, Any]]:
    """The OpenAPI 3.1 `paths` object of `endpoints`."""
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        parameters: list[dict[str, Any]] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in PATH_PARAM.findall(endpoint.path)
        ]
        parameters += [
            {
                "name": p.name,
                "in": "query",
                "required": p.required,
                "description": p.description,
                "schema": dict(p.schema),
            }
            for p in endpoint.query
        ]
        operation: dict[str, Any] = {
            "summary": endpoint.summary,
            "operationId": endpoint.handler.__name__,
            "tags": [endpoint.tag],
            "parameters": parameters,
            "responses": {
                str(status): {"description": text}
                for status, text in sorted(
                    {**endpoint.responses, **ERROR_RESPONSES}.items(), key=lambda item: item[0]
                )
            },
        }
        if endpoint.body is not None:
            operation["requestBody"] = {
                "required": endpoint.body_required,
                "content": {"application/json": {"schema": dict(endpoint.body)}},
            }
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = operation
    return paths


ERROR_RESPONSES = {
    400: "Bad request: a parameter or the body is invalid",
    401: "Authentication required (security on)",
    403: "Not authorized by the ACLs (error_code 40301)",
    404: "No such cluster or resource",
    503: "Not available now; retry (error_code 50003)",
}


def require(document: Mapping[str, Any], name: str) -> Any:
    if name not in document or document[name] is None:
        raise bad_request(f"the body needs {name!r}")
    return document[name]
