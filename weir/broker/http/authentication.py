"""Who is calling the HTTP API, when security is on: an ASGI middleware that asks
every request but the health checks for credentials, HTTP Basic (a user's password,
checked against the stored SCRAM credential as SASL/PLAIN checks it) or a Bearer
JWT (checked as OAUTHBEARER checks one), and answers 401 without them. Endpoints
then authorize the principal with the same ACLs as the Kafka API
(`http_authorization`)."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import trio
from starlette.requests import Request

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.handlers.request_authorization import RequestAuthorization, Session
from weir.broker.handlers.sasl import password_check
from weir.security.jwt_validation import JwtValidationError
from weir.security.principal import KafkaPrincipal, user

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PRINCIPAL_SCOPE_KEY = "weir.principal"
# Open without credentials: the health checks, and the console's pages and static files
# (the data they show comes from the API, which asks for credentials).
OPEN_PATH_PREFIXES = ("/health/", "/console/")
OPEN_PATHS = frozenset(("/console",))
# Sent by the console's scripts with every API call: its 401s then carry no Basic
# challenge, so the browser shows the console's login page, not its own dialog.
CONSOLE_HEADER = b"x-weir-console"
# Longest Authorization header read (a JWT is bounded well below it).
AUTHORIZATION_BYTES_MAX = 8192


class HttpAuthentication:
    """Puts the caller's principal in the ASGI scope, or answers 401."""

    def __init__(self, app: AsgiApp, broker: Broker) -> None:
        self.app = app
        self.broker = broker
        self._check_password = password_check(broker)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.broker.config.security.enabled or _open_path(scope):
            await self.app(scope, receive, send)
            return
        header = _authorization_header(scope)
        if _checked_by_sqs(scope, header):
            await self.app(scope, receive, send)  # the SQS endpoint checks the signature
            return
        principal = await self._principal(header)
        if principal is None:
            if header is not None:
                # A credential was presented and refused: a failed login, as on Kafka.
                self.broker.metrics.sasl_authentications_total["failure"] += 1
            delay_ms = self.broker.config.security.connection_failed_authentication_delay_ms
            await trio.sleep(delay_ms / 1000)
            await _unauthorized(send, challenge=not _from_console(scope))
            return
        scope[PRINCIPAL_SCOPE_KEY] = principal
        await self.app(scope, receive, send)

    async def _principal(self, header: bytes | None) -> KafkaPrincipal | None:
        if header is None or len(header) > AUTHORIZATION_BYTES_MAX:
            return None
        scheme, _, credentials = header.decode("latin-1").partition(" ")
        scheme = scheme.lower()
        if scheme == "basic":
            return await self._basic(credentials.strip())
        if scheme == "bearer" and self.broker.oauthbearer is not None:
            return self._bearer(credentials.strip())
        return None

    async def _basic(self, credentials: str) -> KafkaPrincipal | None:
        try:
            decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        name, separator, password = decoded.partition(":")
        if not separator or not name:
            return None
        # PBKDF2 takes milliseconds: off the event loop.
        matched = await trio.to_thread.run_sync(self._check_password, name, password)
        if not matched:
            log.info("HTTP authentication failed for user %r", name)
            return None
        return user(name)

    def _bearer(self, token: str) -> KafkaPrincipal | None:
        keys = self.broker.oauthbearer
        assert keys is not None
        try:
            validated = keys.validate(token, wall_clock_ms())
        except JwtValidationError as exc:
            log.info("HTTP bearer token refused: %s", exc)
            return None
        return user(validated.principal_name)


# The SQS API's path (POST /): its callers sign with AWS Signature Version 4, which
# the SQS endpoint checks (it needs the body).
SQS_PATH = "/"
_SIGV4_SCHEME = b"AWS4-HMAC-SHA256 "


def _checked_by_sqs(scope: Scope, header: bytes | None) -> bool:
    """An SQS request without Basic or Bearer credentials: passed on without a
    principal, for weir.broker.http.sqs to authenticate or refuse in SQS's words."""
    if scope["method"] != "POST" or scope["path"] != SQS_PATH:
        return False
    return header is None or header.startswith(_SIGV4_SCHEME)


def _open_path(scope: Scope) -> bool:
    path: str = scope["path"]
    if path == SQS_PATH:
        return scope["method"] in ("GET", "HEAD")  # the redirect to the console
    return path.startswith(OPEN_PATH_PREFIXES) or path in OPEN_PATHS


def _from_console(scope: Scope) -> bool:
    return any(name == CONSOLE_HEADER for name, _ in scope["headers"])


def _authorization_header(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            return bytes(value)
    return None


async def _unauthorized(send: Send, challenge: bool) -> None:
    body = b'{"error": "authentication required"}\n'
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if challenge:
        headers.append((b"www-authenticate", b'Basic realm="weir", Bearer realm="weir"'))
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_authorization(
    broker: Broker, request: Request, api_name: str
) -> RequestAuthorization | None:
    """The request's authorization when an authorizer is on (None: all allowed)."""
    authorizer = broker.authorizer
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY)
    if authorizer is None or principal is None:
        return None
    client = request.client
    session = Session(principal, client.host if client is not None else "", "HTTP")
    return RequestAuthorization(authorizer, session, api_name)
