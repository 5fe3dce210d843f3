"""SASL/OAUTHBEARER (RFC 7628) as Kafka's `OAuthBearerSaslServer` runs it, with JWTs
validated against a JWKS (`jwt_validation.py`).

The client's initial response is `n,[a=authzid],<SOH>auth=Bearer <token><SOH>
[key=value<SOH>...]<SOH>` (SOH is 0x01). A valid token completes the exchange with an
empty answer. An invalid one gets Kafka's JSON error as the server's challenge,
`{"status":"invalid_token"}`; the client acknowledges with a lone 0x01, and the
exchange then fails with that JSON as the error message (RFC 7628 §3.2.3). A message
that does not parse fails at once with Kafka's generic text. The token's expiry bounds
the session (KIP-368: `session_lifetime_ms`).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from weir.security.jwt_validation import (
    ClaimRules,
    JwkSet,
    JwtValidationError,
    ValidatedToken,
    validate_jwt,
)
from weir.security.sasl import (
    SaslAuthenticationError,
    SaslExchangeStateError,
    SaslInvalidCredentialsError,
)
from weir.security.scram import ScramFormatError, sasl_name_to_username

MECHANISM = "OAUTHBEARER"
SEPARATOR = "\x01"
# The client's initial response: a token of TOKEN_CHARS_MAX and its framing.
INITIAL_RESPONSE_BYTES_MAX = 34 * 1024
INVALID_TOKEN_CHALLENGE = b'{"status":"invalid_token"}'
# Kafka's `sasl.oauthbearer.clock.skew.seconds` default.
DEFAULT_CLOCK_SKEW_S = 30

_AUTHZID = re.compile(r"(?:[\x02-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+")
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_AUTH_VALUE = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)


@dataclass(frozen=True, slots=True)
class OAuthBearerSettings:
    """What validating a token needs (Kafka's `sasl.oauthbearer.*` broker settings).
    `jwks_endpoint_url` is where the broker loads the JWKS from (an https: or file:
    URL, or a path); loading it is the broker's, not this package's."""

    jwks_endpoint_url: str = ""
    expected_issuer: str | None = None
    expected_audiences: tuple[str, ...] = ()
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_s: int = DEFAULT_CLOCK_SKEW_S

    def claim_rules(self) -> ClaimRules:
        return ClaimRules(
            expected_issuer=self.expected_issuer,
            expected_audiences=self.expected_audiences,
            sub_claim_name=self.sub_claim_name,
            scope_claim_name=self.scope_claim_name,
            clock_skew_s=self.clock_skew_s,
        )


@dataclass(frozen=True, slots=True)
class InitialResponse:
    authorization_id: str
    token: str
    extensions: dict[str, str] = field(default_factory=dict)


class InitialResponseError(ValueError):
    """The client's initial response does not follow RFC 7628's grammar."""


def parse_initial_response(message: bytes) -> InitialResponse:
    """`n,[a=authzid],<SOH>auth=Bearer <token><SOH>[key=value<SOH>...]<SOH>`."""
    if len(message) > INITIAL_RESPONSE_BYTES_MAX:
        raise InitialResponseError(
            f"message of {len(message)} bytes exceeds {INITIAL_RESPONSE_BYTES_MAX}"
        )
    try:
        text = message.decode("ascii")
    except UnicodeDecodeError as error:
        raise InitialResponseError("message is not ASCII") from error
    gs2, separator, rest = text.partition("," + SEPARATOR)
    flag, _, authzid_part = gs2.partition(",")
    if not separator or flag != "n" or not rest.endswith(SEPARATOR + SEPARATOR):
        raise InitialResponseError("Invalid OAUTHBEARER client first message")
    authorization_id = _authorization_id(authzid_part)
    pairs = _key_values(rest[: -len(SEPARATOR + SEPARATOR)])
    auth = pairs.pop("auth", None)
    if auth is None:
        raise InitialResponseError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    match = _AUTH_VALUE.fullmatch(auth)
    if match is None:
        raise InitialResponseError(
            "Invalid OAUTHBEARER client first message: invalid 'auth' format"
        )
    if match["scheme"].lower() != "bearer":
        raise InitialResponseError(
            f"Invalid scheme in OAUTHBEARER client first message: {match['scheme']}"
        )
    return InitialResponse(authorization_id, match["token"], pairs)


def _authorization_id(part: str) -> str:
    if not part:
        return ""
    if not part.startswith("a=") or _AUTHZID.fullmatch(part[2:]) is None:
        raise InitialResponseError("Invalid OAUTHBEARER client first message: invalid authzid")
    try:
        return sasl_name_to_username(part[2:])
    except ScramFormatError as error:
        raise InitialResponseError(
            "Invalid OAUTHBEARER client first message: invalid authzid"
        ) from error


def _key_values(text: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in text.split(SEPARATOR):
        key, equals, value = item.partition("=")
        if (
            not equals
            or _EXTENSION_KEY.fullmatch(key) is None
            or _EXTENSION_VALUE.fullmatch(value) is None
        ):
            raise InitialResponseError(
                "Invalid OAUTHBEARER client first message: invalid key-value pair"
            )
        if key in pairs:
            raise InitialResponseError(f"Invalid OAUTHBEARER client first message: {key} repeated")
        pairs[key] = value
    return pairs


class _State(enum.Enum):
    INITIAL = "initial"
    ERROR_SENT = "error-sent"
    COMPLETE = "complete"
    FAILED = "failed"


class OAuthBearerServer:
    """The server side of one OAUTHBEARER exchange (implements `SaslServer`).
    `last_validation_error` keeps why the last token was refused, for the broker's log."""

    mechanism = MECHANISM

    def __init__(self, settings: OAuthBearerSettings, jwks: JwkSet) -> None:
        self._rules = settings.claim_rules()
        self._jwks = jwks
        self._state = _State.INITIAL
        self._token: ValidatedToken | None = None
        self.last_validation_error: JwtValidationError | None = None

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def token(self) -> ValidatedToken | None:
        """The validated token (its scopes and claims), once complete."""
        return self._token if self.complete else None

    def principal_name(self) -> str:
        if self._token is None or not self.complete:
            raise SaslExchangeStateError("OAUTHBEARER exchange has not completed")
        return self._token.principal_name

    def session_lifetime_ms(self, now_ms: int) -> int | None:
        """Until the token expires (at least 1 ms: 0 means "no limit" on the wire)."""
        if self._token is None or not self.complete:
            return None
        return max(1, self._token.expires_at_ms - now_ms)

    def respond(self, client_bytes: bytes, now_ms: int) -> bytes:
        state = self._state
        self._state = _State.FAILED
        if state is _State.ERROR_SENT:
            # The client's 0x01 acknowledgement (or anything else): fail with the error.
            raise SaslAuthenticationError(
                INVALID_TOKEN_CHALLENGE.decode(), f"token refused: {self.last_validation_error}"
            )
        if state is not _State.INITIAL:
            raise SaslExchangeStateError(f"OAUTHBEARER token received in state {state.value}")
        try:
            initial = parse_initial_response(client_bytes)
        except InitialResponseError as error:
            raise SaslInvalidCredentialsError(MECHANISM, str(error)) from error
        try:
            token = validate_jwt(initial.token, self._jwks, self._rules, now_ms)
        except JwtValidationError as error:
            self.last_validation_error = error
            self._state = _State.ERROR_SENT
            return INVALID_TOKEN_CHALLENGE
        if initial.authorization_id and initial.authorization_id != token.principal_name:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id"
                f" ({initial.authorization_id}) that is different from the token's"
                f" principal name ({token.principal_name})"
            )
        self._token = token
        self._state = _State.COMPLETE
        return b""
