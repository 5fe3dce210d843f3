"""Who calls the SQS API. With security off, anyone, as on the Kafka listener. With
security on: a request the HTTP authentication already took credentials from (Basic
or Bearer) runs as that user; any other must carry an AWS Signature Version 4 made
with one of the broker's `security.sqs_access_keys`, and runs as that key's user,
under the same ACLs as the Kafka API (READ on the queue's topic and its group
`sqs.<name>` to receive, WRITE on the topic to send, CREATE to create...)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import trio
from starlette.requests import Request

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.handlers.request_authorization import Session
from weir.broker.http.authentication import PRINCIPAL_SCOPE_KEY
from weir.broker.http.kafka_gateway import HTTP_LISTENER, HttpCaller, http_caller
from weir.broker.http.sqs.errors import (
    SqsError,
    invalid_client_token,
    missing_authentication,
    request_expired,
    signature_does_not_match,
)
from weir.broker.http.sqs.sigv4 import SignatureError, verify
from weir.security.principal import KafkaPrincipal, user

log = logging.getLogger(__name__)


async def authenticate(broker: Broker, request: Request, body: bytes) -> tuple[HttpCaller, str]:
    """The caller and its user name ("" when security is off)."""
    security = broker.config.security
    if not security.enabled:
        return http_caller(broker, request), ""
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY)
    if isinstance(principal, KafkaPrincipal):
        return http_caller(broker, request), principal.name
    keys = {key.access_key_id: key for key in security.sqs_access_keys}
    try:
        access_key = verify(
            method=request.method,
            path=request.url.path,
            query=list(request.query_params.multi_items()),
            headers=_headers(request),
            payload=body,
            secrets={key_id: key.secret_access_key for key_id, key in keys.items()},
            now_ms=wall_clock_ms(),
        )
    except SignatureError as exc:
        log.info("SQS request refused: %s", exc)
        broker.metrics.sasl_authentications_total["failure"] += 1
        await trio.sleep(security.connection_failed_authentication_delay_ms / 1000)
        raise _sqs_error(exc) from None
    name = keys[access_key].user
    if broker.authorizer is None:
        return HttpCaller(None), name
    client = request.client
    session = Session(user(name), client.host if client is not None else "", HTTP_LISTENER)
    return HttpCaller(session), name


def _headers(request: Request) -> Mapping[str, str]:
    return {name.lower(): value for name, value in request.headers.items()}


def _sqs_error(exc: SignatureError) -> SqsError:
    message = str(exc)
    if exc.kind == "missing":
        return missing_authentication(message)
    if exc.kind == "unknown_key":
        return invalid_client_token(message)
    if exc.kind == "expired":
        return request_expired(message)
    if exc.kind == "malformed":
        return SqsError("IncompleteSignature", "IncompleteSignature", message)
    return signature_does_not_match(message)
