"""Requests through the dispatcher (`handle_frame`) of a Broker with the real ACL
authorizer, on a connection authenticated as a given principal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from weir.broker.broker import Broker
from weir.broker.handlers.context import ClientConnection
from weir.broker.handlers.request_authorization import Session
from weir.broker.server.dispatch import ChunkedFrame, handle_frame
from weir.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from weir.security.authorizer import AclAuthorizer, AuthorizerSettings
from weir.security.principal import user
from weir.wire.protocol import decode_response, encode_request

CORRELATION_ID = 7
ADMIN = "admin"  # a super user


def allow(
    who: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding(
        resource_type, name, pattern, f"User:{who}", "*", operation, AclPermissionType.ALLOW
    )


def secure(broker: Broker, bindings: Iterable[AclBinding] = ()) -> AclAuthorizer:
    """Turn the broker's authorizer on: deny by default, `admin` a super user."""
    authorizer = AclAuthorizer(
        AuthorizerSettings(
            super_users=frozenset({f"User:{ADMIN}"}), allow_everyone_if_no_acl_found=False
        ),
        bindings,
    )
    broker.authorizer = authorizer
    return authorizer


async def send(
    broker: Broker, who: str, api_key: int, version: int, body: Mapping[str, Any]
) -> Any:
    """The decoded response (None when none is sent); fails if the connection closes."""
    frame = memoryview(encode_request(api_key, version, CORRELATION_ID, "authz-test", body))[4:]
    connection = ClientConnection()
    connection.session = Session(user(who), "127.0.0.1", "PLAINTEXT")
    outcome = await handle_frame(broker, frame, "/127.0.0.1", connection)
    if outcome.pending is not None:
        outcome = await outcome.pending()
    assert not outcome.close_connection, "the connection was closed"
    if outcome.response is None:
        return None
    response = outcome.response
    if isinstance(response, ChunkedFrame):  # a Fetch response carrying records
        response = response.joined()
    correlation_id, decoded = decode_response(api_key, version, memoryview(response)[4:])
    assert correlation_id == CORRELATION_ID
    return decoded
