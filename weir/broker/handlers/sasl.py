"""SaslHandshake and SaslAuthenticate: a SASL listener's connection logs in, and
later re-authenticates (KIP-368), through the mechanisms of `weir.security`.

The exchange's state lives on the connection (`ConnectionSasl`); the session it
ends with is what every later request is authorized as. A failed login is answered
after `connection_failed_authentication_delay_ms` with SASL_AUTHENTICATION_FAILED and
a message that never says which half was wrong, then the connection closes."""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from dataclasses import dataclass

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.handlers.context import (
    ClientConnection,
    Deferred,
    RequestContext,
)
from weir.broker.handlers.request_authorization import Session
from weir.broker.security_config import SecurityProtocol
from weir.format.errors import ErrorCode
from weir.security.principal import user
from weir.security.sasl import SaslAuthenticationError, SaslExchangeStateError, SaslServer
from weir.security.sasl_mechanisms import (
    SaslSources,
    UnsupportedSaslMechanismError,
    build_sasl_server,
)
from weir.security.sasl_plain import PlainPasswordCheck, PlainServer, plain_check_from_scram
from weir.security.scram import DEFAULT_ITERATIONS, SALT_BYTES, ScramMechanism
from weir.wire.messages.security import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

log = logging.getLogger(__name__)

# Derives an unknown user's SCRAM salt, so that it is stable per broker and a client
# cannot tell an unknown user from a wrong password.
_UNKNOWN_USER_SECRET = os.urandom(32)


@dataclass
class ConnectionSasl:
    """One connection's SASL state: the mechanism chosen by SaslHandshake, its
    server side for the exchange under way, and whether the last one succeeded."""

    mechanism: str
    server: SaslServer
    reauthenticating: bool = False
    failed: bool = False
    # SaslHandshake v0: the tokens come as bare frames, not in SaslAuthenticate.
    raw_tokens: bool = False


def _sasl_listener(connection: ClientConnection | None, broker: Broker) -> bool:
    if connection is None:
        return False
    for listener in broker.config.kafka_listeners:
        if listener.name == connection.listener_name:
            return listener.protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)
    return False


def handle_sasl_handshake(
    ctx: RequestContext, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    broker = ctx.broker
    connection = ctx.connection
    enabled = list(broker.config.security.sasl_enabled_mechanisms)
    if connection is None or not _sasl_listener(connection, broker):
        # Kafka answers a SaslHandshake on a listener without SASL this way.
        return SaslHandshakeResponse(ErrorCode.ILLEGAL_SASL_STATE, enabled)
    previous = connection.sasl
    reauthenticating = connection.session is not None
    # Each refusal below ends the connection after its answer, as Kafka's
    # authenticator does: a client that gets the exchange wrong cannot go on probing.
    if isinstance(previous, ConnectionSasl) and not (reauthenticating and previous.server.complete):
        # One handshake per exchange: a second one before the first exchange succeeded.
        connection.close_after_response = True
        return SaslHandshakeResponse(ErrorCode.ILLEGAL_SASL_STATE, enabled)
    try:
        server = build_sasl_server(request.mechanism, tuple(enabled), _sources(broker))
    except UnsupportedSaslMechanismError:
        connection.close_after_response = True
        return SaslHandshakeResponse(ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled)
    if isinstance(previous, ConnectionSasl) and previous.mechanism != request.mechanism:
        # KIP-368: re-authentication keeps the mechanism.
        connection.close_after_response = True
        return SaslHandshakeResponse(ErrorCode.ILLEGAL_SASL_STATE, enabled)
    connection.sasl = ConnectionSasl(
        request.mechanism, server, reauthenticating, raw_tokens=ctx.api_version == 0
    )
    return SaslHandshakeResponse(ErrorCode.NONE, enabled)


def _sources(broker: Broker) -> SaslSources:
    """Where the mechanisms find credentials: the stored SCRAM credentials (PLAIN
    checks passwords against them too), and OAUTHBEARER's current keys."""
    keys = broker.oauthbearer
    return SaslSources(
        unknown_user_secret=_UNKNOWN_USER_SECRET,
        plain_check=password_check(broker),
        scram_credentials=lambda scram, name: broker.controller.scram_credential(name, scram),
        oauthbearer=None if keys is None else keys.settings,
        jwks=None if keys is None else (lambda: keys.keys),
        scram_unknown_user_shape=lambda scram: _usual_scram_shape(broker, scram),
    )


def _usual_scram_shape(broker: Broker, scram: ScramMechanism) -> tuple[int, int]:
    """The (salt bytes, iterations) most stored credentials of `scram` have (ties:
    the smallest), so an unknown user's fake credential looks like a stored one."""
    counts: Counter[tuple[int, int]] = Counter()
    for credentials in broker.controller.scram_credentials().values():
        credential = credentials.get(scram)
        if credential is not None:
            counts[(len(credential.salt), credential.iterations)] += 1
    if not counts:
        return SALT_BYTES, DEFAULT_ITERATIONS
    most = max(counts.values())
    return min(shape for shape, count in counts.items() if count == most)


def password_check(broker: Broker) -> PlainPasswordCheck:
    """PLAIN checks a password against the user's stored SCRAM credential (SHA-512's
    when the user has one, else SHA-256's): one user store for every mechanism."""
    checks = {
        scram: plain_check_from_scram(
            lambda name, scram=scram: broker.controller.scram_credential(name, scram),
            scram,
            _UNKNOWN_USER_SECRET,
        )
        for scram in ScramMechanism
    }

    def check(username: str, password: str) -> bool:
        controller = broker.controller
        if controller.scram_credential(username, ScramMechanism.SCRAM_SHA_512) is not None:
            return checks[ScramMechanism.SCRAM_SHA_512](username, password)
        return checks[ScramMechanism.SCRAM_SHA_256](username, password)

    return check


def handle_sasl_authenticate(
    ctx: RequestContext, request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse | Deferred[SaslAuthenticateResponse]:
    connection = ctx.connection
    sasl = connection.sasl if connection is not None else None
    if connection is None or not isinstance(sasl, ConnectionSasl) or sasl.failed:
        if connection is not None and connection.session is None:
            # Before a handshake, Kafka's authenticator ends the connection.
            connection.close_after_response = True
        return SaslAuthenticateResponse(
            ErrorCode.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request"
        )
    if sasl.server.complete or sasl.raw_tokens:
        return SaslAuthenticateResponse(
            ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate after the exchange completed"
        )
    client_bytes = bytes(request.auth_bytes)

    async def answer() -> SaslAuthenticateResponse:
        token = await answer_token(ctx.broker, connection, ctx.client_host, client_bytes)
        return SaslAuthenticateResponse(
            token.error_code, token.message, token.challenge, token.session_lifetime_ms
        )

    return Deferred(answer)


@dataclass(frozen=True)
class TokenAnswer:
    """The server's answer to one client token: its next challenge, or the failure."""

    error_code: ErrorCode
    message: str | None
    challenge: bytes = b""
    session_lifetime_ms: int = 0


async def answer_token(
    broker: Broker, connection: ClientConnection, client_host: str, client_bytes: bytes
) -> TokenAnswer:
    """One client token of the connection's exchange (SaslAuthenticate's, or a raw
    token after SaslHandshake v0), answered; the session is set once it completes."""
    sasl = connection.sasl
    assert isinstance(sasl, ConnectionSasl)
    now_ms = wall_clock_ms()
    try:
        if isinstance(sasl.server, PlainServer):  # PBKDF2 takes milliseconds: off the loop
            challenge = await trio.to_thread.run_sync(sasl.server.respond, client_bytes, now_ms)
        else:
            challenge = sasl.server.respond(client_bytes, now_ms)
    except SaslExchangeStateError as exc:
        return _out_of_turn(connection, sasl, exc)
    except SaslAuthenticationError as exc:
        return await _failed(broker, connection, client_host, sasl, exc)
    return _progress(broker, connection, client_host, sasl, challenge, now_ms)


def _out_of_turn(
    connection: ClientConnection, sasl: ConnectionSasl, error: SaslExchangeStateError
) -> TokenAnswer:
    """A message the exchange cannot take now (a second PLAIN message pipelined
    behind the first, say): the client's mistake, answered and closed, not a
    broker error."""
    log.debug("closing connection: SaslAuthenticate out of turn: %s", error)
    sasl.failed = True
    connection.close_after_response = True
    return TokenAnswer(ErrorCode.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request")


def _progress(
    broker: Broker,
    connection: ClientConnection,
    client_host: str,
    sasl: ConnectionSasl,
    challenge: bytes,
    now_ms: int,
) -> TokenAnswer:
    if not sasl.server.complete:
        return TokenAnswer(ErrorCode.NONE, None, challenge)
    principal = user(sasl.server.principal_name())
    previous = connection.session
    if sasl.reauthenticating and previous is not None and previous.principal != principal:
        # KIP-368: a re-authentication may not change who the connection is.
        sasl.failed = True
        connection.close_after_response = True
        broker.metrics.sasl_authentications_total["failure"] += 1
        log.info(
            "re-authentication refused: client %s on listener %s tried to change %s to %s",
            client_host.lstrip("/"), connection.listener_name, previous.principal, principal,
        )  # fmt: skip
        return TokenAnswer(
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            "Cannot change principals during re-authentication",
        )
    connection.session = Session(principal, client_host.lstrip("/"), connection.listener_name)
    lifetime_ms = _session_lifetime_ms(broker, sasl, now_ms)
    connection.session_expires_s = (
        None if lifetime_ms == 0 else time.monotonic() + lifetime_ms / 1000
    )
    sasl.raw_tokens = False
    broker.metrics.sasl_authentications_total["success"] += 1
    log.debug("%s authenticated as %s with %s", client_host, principal, sasl.mechanism)
    return TokenAnswer(ErrorCode.NONE, None, challenge, lifetime_ms)


def _session_lifetime_ms(broker: Broker, sasl: ConnectionSasl, now_ms: int) -> int:
    """KIP-368: the shorter of `connections_max_reauth_ms` and what the credential
    allows (a token's expiry); 0 when neither bounds it."""
    configured_ms = broker.config.security.connections_max_reauth_ms
    credential_ms = sasl.server.session_lifetime_ms(now_ms)
    bounds = [ms for ms in (configured_ms or None, credential_ms) if ms is not None]
    return max(min(bounds), 1) if bounds else 0


async def _failed(
    broker: Broker,
    connection: ClientConnection,
    client_host: str,
    sasl: ConnectionSasl,
    error: SaslAuthenticationError,
) -> TokenAnswer:
    sasl.failed = True
    broker.metrics.sasl_authentications_total["failure"] += 1
    log.info(
        "authentication failed: client %s on listener %s, mechanism %s: %s",
        client_host.lstrip("/"), connection.listener_name, sasl.mechanism, error.log_detail,
    )  # fmt: skip
    delay_ms = broker.config.security.connection_failed_authentication_delay_ms
    await trio.sleep(delay_ms / 1000)
    connection.close_after_response = True
    return TokenAnswer(
        ErrorCode.SASL_AUTHENTICATION_FAILED, error.client_message(sasl.reauthenticating)
    )


def in_raw_token_exchange(connection: ClientConnection) -> bool:
    """After SaslHandshake v0 (before KIP-152), the client's next frames are bare SASL
    tokens, with no request header, until the exchange completes."""
    sasl = connection.sasl
    return isinstance(sasl, ConnectionSasl) and sasl.raw_tokens


async def answer_raw_token(
    broker: Broker, connection: ClientConnection, client_host: str, token: bytes
) -> bytes | None:
    """A bare token's answer as a bare size-prefixed frame; None: close the
    connection (a v0 exchange has no way to carry an error)."""
    answer = await answer_token(broker, connection, client_host, token)
    if answer.error_code != ErrorCode.NONE:
        return None
    return len(answer.challenge).to_bytes(4, "big") + answer.challenge
