"""SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` runs it: one client message,
`[authzid] NUL authcid NUL passwd`, checked by a `PlainPasswordCheck`, and an empty
answer. Kafka refuses an authzid other than the username, and so does Weir.

Where the passwords live is the broker's business: `plain_check_from_users` checks a
configured user list, `plain_check_from_scram` the salted SCRAM credentials in the
metadata store. Both compare in constant time and do the same work for an unknown
user as for a known one, so timing does not say whether a user exists.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Protocol

from weir.security.sasl import SaslAuthenticationError, SaslExchangeStateError
from weir.security.scram import (
    DEFAULT_ITERATIONS,
    ScramCredentialLookup,
    ScramMechanism,
    credential_from_password,
    password_matches,
)

MECHANISM = "PLAIN"
# RFC 4616 asks a server to accept 255 octets per field; Weir accepts four times that
# (long API secrets used as passwords), and no more.
FIELD_BYTES_MAX = 1024
MESSAGE_BYTES_MAX = 3 * FIELD_BYTES_MAX + 2

INVALID_USERNAME_OR_PASSWORD = "Authentication failed: Invalid username or password"
AUTHORIZATION_ID_MISMATCH = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


class PlainPasswordCheck(Protocol):
    """Whether `password` is `username`'s password (False for an unknown user)."""

    def __call__(self, username: str, password: str) -> bool: ...


def passwords_equal(expected: str, given: str) -> bool:
    """Compare two passwords in time independent of where they differ."""
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8"))


def plain_check_from_users(users: Mapping[str, str]) -> PlainPasswordCheck:
    """A check against configured `username -> password` pairs."""

    def check(username: str, password: str) -> bool:
        expected = users.get(username)
        # An unknown user is still compared, against a password no client can send
        # (NUL separates PLAIN's fields), so both paths cost the same.
        matched = passwords_equal(expected if expected is not None else "\x00", password)
        return matched and expected is not None

    return check


def plain_check_from_scram(
    lookup: ScramCredentialLookup, mechanism: ScramMechanism, unknown_user_secret: bytes
) -> PlainPasswordCheck:
    """A check against stored SCRAM credentials: PBKDF2 of the given password with the
    user's salt and iterations, compared with the stored key. An unknown user costs
    the same PBKDF2 against a fake credential derived from `unknown_user_secret`."""

    def check(username: str, password: str) -> bool:
        credential = lookup(username)
        if credential is None:
            salt = hmac.new(unknown_user_secret, username.encode("utf-8"), hashlib.sha256).digest()
            fake = credential_from_password(mechanism, "\x00", salt, DEFAULT_ITERATIONS)
            password_matches(mechanism, fake, password)
            return False
        return password_matches(mechanism, credential, password)

    return check


def parse_plain_message(message: bytes) -> tuple[str, str, str]:
    """(authzid, username, password) from `authzid NUL authcid NUL passwd`; the
    SaslAuthenticationError carries Kafka's texts for a malformed message."""
    if len(message) > MESSAGE_BYTES_MAX:
        raise SaslAuthenticationError(
            "Invalid SASL/PLAIN response: message too large",
            f"PLAIN message of {len(message)} bytes exceeds {MESSAGE_BYTES_MAX}",
        )
    # Kafka's `extractTokens` stops counting at four.
    fields = message.split(b"\x00", 3)
    if len(fields) != 3:
        raise SaslAuthenticationError(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(fields)}"
        )
    try:
        authzid, username, password = (field.decode("utf-8") for field in fields)
    except UnicodeDecodeError as error:
        raise SaslAuthenticationError(
            INVALID_USERNAME_OR_PASSWORD, "PLAIN message is not UTF-8"
        ) from error
    if any(len(field) > FIELD_BYTES_MAX for field in fields):
        raise SaslAuthenticationError(INVALID_USERNAME_OR_PASSWORD, "PLAIN field too long")
    if not username:
        raise SaslAuthenticationError("Authentication failed: username not specified")
    if not password:
        raise SaslAuthenticationError("Authentication failed: password not specified")
    return authzid, username, password


class PlainServer:
    """The server side of one SASL/PLAIN exchange (implements `SaslServer`)."""

    mechanism = MECHANISM

    def __init__(self, check: PlainPasswordCheck) -> None:
        self._check = check
        self._username: str | None = None
        self._used = False

    @property
    def complete(self) -> bool:
        return self._username is not None

    def principal_name(self) -> str:
        if self._username is None:
            raise SaslExchangeStateError("PLAIN exchange has not completed")
        return self._username

    def session_lifetime_ms(self, now_ms: int) -> int | None:
        return None

    def respond(self, client_bytes: bytes, now_ms: int) -> bytes:
        if self._used:
            raise SaslExchangeStateError("PLAIN takes one client message")
        self._used = True
        authzid, username, password = parse_plain_message(client_bytes)
        if not self._check(username, password):
            raise SaslAuthenticationError(
                INVALID_USERNAME_OR_PASSWORD, f"PLAIN login refused for user {username!r}"
            )
        if authzid and authzid != username:
            raise SaslAuthenticationError(AUTHORIZATION_ID_MISMATCH)
        self._username = username
        return b""
