"""The SQS endpoint: `POST /` with
`X-Amz-Target: AmazonSQS.<Action>` and a JSON body; every answer in the JSON
protocol's shape, errors with `__type` and `x-amzn-query-error` (`errors`)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from weir.broker.broker import Broker
from weir.broker.http.exchange import BodyTooLarge, extend_deadline, read_body
from weir.broker.http.sqs import messaging, move_tasks, queues
from weir.broker.http.sqs.backend import Backend, backend_of
from weir.broker.http.sqs.errors import (
    JSON_CONTENT_TYPE,
    SqsError,
    internal_error,
    invalid_action,
    malformed_request,
    request_too_large,
    unsupported_operation,
)
from weir.broker.http.sqs.params import Params
from weir.broker.http.sqs.queues import Call
from weir.broker.http.sqs.sigv4_auth import authenticate

log = logging.getLogger(__name__)

TARGET_PREFIX = "AmazonSQS."
# The largest request body read: a 256 KiB batch, JSON-escaped at worst 6 bytes a byte.
BODY_BYTES_MAX = 2 * 1024 * 1024

Action = Callable[[Backend, Call, Params], Awaitable[dict[str, Any]]]
ACTIONS: dict[str, Action] = {
    "CreateQueue": queues.create_queue,
    "GetQueueUrl": queues.get_queue_url,
    "ListQueues": queues.list_queues,
    "DeleteQueue": queues.delete_queue,
    "GetQueueAttributes": queues.get_queue_attributes,
    "SetQueueAttributes": queues.set_queue_attributes,
    "TagQueue": queues.tag_queue,
    "UntagQueue": queues.untag_queue,
    "ListQueueTags": queues.list_queue_tags,
    "ListDeadLetterSourceQueues": queues.list_dead_letter_source_queues,
    "SendMessage": messaging.send_message,
    "SendMessageBatch": messaging.send_message_batch,
    "ReceiveMessage": messaging.receive_message,
    "DeleteMessage": messaging.delete_message,
    "DeleteMessageBatch": messaging.delete_message_batch,
    "ChangeMessageVisibility": messaging.change_message_visibility,
    "ChangeMessageVisibilityBatch": messaging.change_message_visibility_batch,
    "PurgeQueue": messaging.purge_queue,
    "StartMessageMoveTask": move_tasks.start_message_move_task,
    "ListMessageMoveTasks": move_tasks.list_message_move_tasks,
    "CancelMessageMoveTask": move_tasks.cancel_message_move_task,
}


def sqs_routes(broker: Broker) -> list[BaseRoute]:
    backend = backend_of(broker)

    async def endpoint(request: Request) -> Response:
        return await handle(backend, request)

    # Only the root: the JSON protocol always posts there (a queue URL's path is what
    # the query protocol posts to, and a two-segment route would shadow other APIs').
    return [Route("/", endpoint, methods=["POST"])]


async def handle(backend: Backend, request: Request) -> Response:
    request_id = str(uuid.uuid4())
    try:
        try:
            body = await read_body(request, BODY_BYTES_MAX)
        except BodyTooLarge:
            raise _too_large() from None
        action, params = _parse(request, body)
        caller, principal = await authenticate(backend.broker, request, body)
        scheme = request.url.scheme
        host = request.headers.get("host") or f"{request.url.hostname}:{request.url.port}"
        call = Call(caller, f"{scheme}://{host}", principal)
        if action == "ReceiveMessage":  # a long poll: the exchange may wait that long
            extend_deadline(request, messaging.WAIT_TIME_MAX_S)
        answer = await ACTIONS[action](backend, call, params)
    except SqsError as exc:
        return _error_response(exc, request_id)
    except ClientDisconnect:
        return Response(status_code=400)
    except Exception as exc:  # noqa: BLE001 (an SQS error, not a dropped connection)
        log.exception("SQS request failed")
        return _error_response(internal_error(f"{type(exc).__name__}"), request_id)
    return Response(
        json.dumps(answer).encode(),
        media_type=JSON_CONTENT_TYPE,
        headers={"x-amzn-RequestId": request_id},
    )


def _too_large() -> SqsError:
    return request_too_large(f"The request body is larger than {BODY_BYTES_MAX} bytes.")


def _parse(request: Request, body: bytes) -> tuple[str, Params]:
    target = request.headers.get("x-amz-target")
    if target is None:
        if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            raise invalid_action(
                "the query protocol (Action=...): Weir speaks SQS's JSON "
                "protocol (X-Amz-Target), which current AWS SDKs use"
            )
        raise invalid_action("(no X-Amz-Target header)")
    if not target.startswith(TARGET_PREFIX) or target[len(TARGET_PREFIX) :] not in ACTIONS:
        raise _unknown_operation(target)
    try:
        params = json.loads(body) if body.strip() else {}
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting
        raise malformed_request("The request body is not valid JSON.") from None
    if not isinstance(params, dict):
        raise malformed_request("The request body must be a JSON object.")
    return target[len(TARGET_PREFIX) :], params


def _unknown_operation(target: str) -> SqsError:
    action = target[len(TARGET_PREFIX) :] if target.startswith(TARGET_PREFIX) else target
    if action in ("AddPermission", "RemovePermission"):
        return unsupported_operation(f"{action} is not supported by Weir.")
    return invalid_action(target)


def _error_response(error: SqsError, request_id: str) -> Response:
    return Response(
        error.body(),
        status_code=error.status,
        media_type=JSON_CONTENT_TYPE,
        headers={**error.headers(), "x-amzn-RequestId": request_id},
    )
