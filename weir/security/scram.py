"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them: the
stored credential (`ScramCredential`, what AlterUserScramCredentials writes, KIP-554)
and the server's side of the exchange (`ScramServer`).

Kafka's dialect, followed here:
- usernames are not SASLprep'd and passwords are plain UTF-8 (Kafka's
  `ScramFormatter.normalize` is UTF-8 only); the username only undoes the saslname
  escapes `=2C` (`,`) and `=3D` (`=`), and a bare `=` left over is an error;
- the gs2 header is `n` (no channel binding) with an optional authzid that must equal
  the username; the client-final's `c=` must be that header in base64 (`biws` for
  `n,,`);
- the `tokenauth=true` extension asks for a delegation token: Weir has none, so it fails.

An unknown user still gets a server-first (a salt derived from the username and a
server secret, so it is the same on every try) and fails only on the client-final
proof, with the same message as a wrong password (RFC 5802 §9): the exchange does not
tell whether the user exists. (Kafka's `ScramSaslServer` fails an unknown user at the
client-first message, with the same generic text; failing later also hides it from
the timing and the message count.)
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from weir.security.sasl import (
    SaslAuthenticationError,
    SaslExchangeStateError,
    SaslInvalidCredentialsError,
)

# Kafka's bounds on a stored credential's iteration count (ScramMechanism.minIterations,
# and AlterUserScramCredentials' upper bound).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
# The iteration count `weir user` uses unless told otherwise (Kafka's kafka-configs
# default for `iterations`).
DEFAULT_ITERATIONS = 4096


class ScramMechanism(enum.IntEnum):
    """Kafka's codes for the SCRAM mechanisms (DescribeUserScramCredentials,
    AlterUserScramCredentials)."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def sasl_name(self) -> str:
        """The SASL mechanism name: `SCRAM-SHA-256`."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        """The hashlib name of the mechanism's hash: `sha256`."""
        return _HASH_NAMES[self]

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    @classmethod
    def from_sasl_name(cls, sasl_name: str) -> ScramMechanism | None:
        """`SCRAM-SHA-512` -> SCRAM_SHA_512; None for any other name."""
        for mechanism in cls:
            if mechanism.sasl_name == sasl_name:
                return mechanism
        return None


_HASH_NAMES = {ScramMechanism.SCRAM_SHA_256: "sha256", ScramMechanism.SCRAM_SHA_512: "sha512"}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server stores for one user and mechanism: never the password, nor the
    salted password (RFC 5802 §3)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, mechanism.hash_name).digest()


def _hash(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The stored credential from a salted password (what AlterUserScramCredentials'
    upsertion carries): StoredKey = H(HMAC(salted, "Client Key")),
    ServerKey = HMAC(salted, "Server Key")."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=_hash(mechanism, client_key),
        server_key=_hmac(mechanism, salted, b"Server Key"),
        iterations=iterations,
    )


def credential_from_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    """The stored credential for a password (PBKDF2, then the two keys)."""
    return credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


def iterations_refusal(iterations: int) -> str | None:
    """Why an iteration count cannot be stored (Kafka's AlterUserScramCredentials
    texts), or None when it can."""
    if iterations < MIN_ITERATIONS:
        return f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS}"
    if iterations > MAX_ITERATIONS:
        return f"Iterations {iterations} is greater than the maximum {MAX_ITERATIONS}"
    return None


def credential_to_json(credential: ScramCredential) -> dict[str, str | int]:
    """A JSON-ready dict of the credential (bytes in standard base64)."""
    return {
        "salt": base64.b64encode(credential.salt).decode("ascii"),
        "stored_key": base64.b64encode(credential.stored_key).decode("ascii"),
        "server_key": base64.b64encode(credential.server_key).decode("ascii"),
        "iterations": credential.iterations,
    }


class CredentialFormatError(ValueError):
    """A stored credential's JSON is not what `credential_to_json` writes."""


def credential_from_json(document: object) -> ScramCredential:
    """The credential `credential_to_json` wrote; CredentialFormatError otherwise."""
    if not isinstance(document, dict):
        raise CredentialFormatError("a SCRAM credential is a JSON object")
    iterations = document.get("iterations")
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations <= 0:
        raise CredentialFormatError("a SCRAM credential's iterations is a positive integer")
    return ScramCredential(
        salt=_b64_field(document, "salt"),
        stored_key=_b64_field(document, "stored_key"),
        server_key=_b64_field(document, "server_key"),
        iterations=iterations,
    )


def _b64_field(document: dict[object, object], name: str) -> bytes:
    value = document.get(name)
    if not isinstance(value, str):
        raise CredentialFormatError(f"a SCRAM credential's {name} is a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as error:
        raise CredentialFormatError(f"a SCRAM credential's {name} is not base64") from error


# --- The server's side of the exchange -------------------------------------------------

# Bytes of salt Weir's own tools generate, and of the salt an unknown user is shown.
SALT_BYTES = 32
# Bounds on one client message (a username and a nonce fit many times over).
CLIENT_MESSAGE_BYTES_MAX = 4096
# Bytes of randomness in the server's half of the nonce.
SERVER_NONCE_BYTES = 24
# Kafka's extension asking to authenticate with a delegation token (Weir issues none).
TOKEN_AUTH_EXTENSION = "tokenauth"
AUTHORIZATION_ID_MISMATCH = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


class ScramCredentialLookup(Protocol):
    def __call__(self, username: str) -> ScramCredential | None: ...


class _State(enum.Enum):
    CLIENT_FIRST = "client-first"
    CLIENT_FINAL = "client-final"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ClientFirst:
    """A parsed client-first-message."""

    gs2_header: str
    authorization_id: str
    username: str
    nonce: str
    extensions: dict[str, str]
    bare: str


@dataclass(frozen=True, slots=True)
class ClientFinal:
    """A parsed client-final-message."""

    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str


class ScramFormatError(ValueError):
    """A SCRAM message does not follow RFC 5802's grammar."""


def sasl_name_to_username(sasl_name: str) -> str:
    """Undo RFC 5802's saslname escapes (`=2C` is `,`, `=3D` is `=`); any other `=`
    is malformed (as in Kafka's `ScramFormatter.username`)."""
    parts = sasl_name.split("=")
    decoded = [parts[0]]
    for part in parts[1:]:
        escape = _SASL_NAME_ESCAPES.get(part[:2])
        if escape is None:
            raise ScramFormatError("invalid username escape")
        decoded.append(escape + part[2:])
    return "".join(decoded)


_SASL_NAME_ESCAPES = {"2C": ",", "3D": "="}


def username_to_sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _printable_nonce(nonce: str) -> bool:
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


def _decode_message(message: bytes) -> str:
    if len(message) > CLIENT_MESSAGE_BYTES_MAX:
        raise ScramFormatError(
            f"message of {len(message)} bytes exceeds {CLIENT_MESSAGE_BYTES_MAX}"
        )
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScramFormatError("message is not UTF-8") from error
    if "\x00" in text:
        raise ScramFormatError("message holds a NUL")
    return text


def parse_client_first(message: bytes) -> ClientFirst:
    """`n,[a=authzid],n=user,r=nonce[,ext=value...]` (no `m=` mandatory extension,
    no channel binding: the flag is `n`, or `y` from a client that would bind if the
    server offered -PLUS mechanisms, which Weir does not)."""
    text = _decode_message(message)
    flag, _, rest = text.partition(",")
    authzid_part, separator, bare = rest.partition(",")
    if flag not in ("n", "y") or not separator:
        raise ScramFormatError("client-first-message must start with the gs2 header n, or y,")
    if authzid_part and not authzid_part.startswith("a="):
        raise ScramFormatError("gs2 header authzid must be a=")
    authorization_id = sasl_name_to_username(authzid_part[2:]) if authzid_part else ""
    attributes = bare.split(",")
    if (
        len(attributes) < 2
        or not attributes[0].startswith("n=")
        or not attributes[1].startswith("r=")
    ):
        raise ScramFormatError("client-first-message-bare must be n=user,r=nonce")
    username = sasl_name_to_username(attributes[0][2:])
    nonce = attributes[1][2:]
    if not username or not _printable_nonce(nonce):
        raise ScramFormatError("empty username or invalid nonce")
    return ClientFirst(
        gs2_header=f"{flag},{authzid_part},",
        authorization_id=authorization_id,
        username=username,
        nonce=nonce,
        extensions=_parse_extensions(attributes[2:]),
        bare=bare,
    )


def _parse_extensions(attributes: list[str]) -> dict[str, str]:
    extensions: dict[str, str] = {}
    for attribute in attributes:
        key, separator, value = attribute.partition("=")
        if not separator or not key.isascii() or not key.isalpha() or not value:
            raise ScramFormatError("malformed extension")
        extensions[key] = value
    return extensions


def parse_client_final(message: bytes) -> ClientFinal:
    """`c=<base64 gs2 header>,r=nonce[,ext...],p=<base64 proof>`."""
    text = _decode_message(message)
    without_proof, separator, proof_text = text.rpartition(",p=")
    attributes = without_proof.split(",")
    if (
        not separator
        or len(attributes) < 2
        or not attributes[0].startswith("c=")
        or not attributes[1].startswith("r=")
    ):
        raise ScramFormatError("client-final-message must be c=...,r=...,p=...")
    _parse_extensions(attributes[2:])
    return ClientFinal(
        channel_binding=_b64decode(attributes[0][2:]),
        nonce=attributes[1][2:],
        proof=_b64decode(proof_text),
        without_proof=without_proof,
    )


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ScramFormatError("invalid base64") from error


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class ScramServer:
    """The server side of one SCRAM exchange (implements `SaslServer`): client-first
    -> server-first -> client-final -> server-final, then complete.

    `unknown_user_secret` is a per-broker secret from which an unknown user's salt is
    derived, so the same username always sees the same salt; `make_server_nonce` gives
    the server's half of the nonce (random; fixed in a test)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: ScramCredentialLookup,
        unknown_user_secret: bytes,
        make_server_nonce: Callable[[], str] | None = None,
        unknown_user_shape: Callable[[], tuple[int, int]] | None = None,
    ) -> None:
        self._scram = mechanism
        self._lookup = lookup
        self._unknown_user_secret = unknown_user_secret
        # (salt bytes, iterations) an unknown user's fake credential takes: the
        # stored users' usual ones, so the server-first message does not tell them apart.
        self._unknown_user_shape = unknown_user_shape
        self._make_server_nonce = make_server_nonce or random_server_nonce
        self._state = _State.CLIENT_FIRST
        self._username = ""
        self._credential: ScramCredential | None = None
        self._user_known = False
        self._client_first: ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""

    @property
    def mechanism(self) -> str:
        return self._scram.sasl_name

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def principal_name(self) -> str:
        if self._state is not _State.COMPLETE:
            raise SaslExchangeStateError("SCRAM exchange has not completed")
        return self._username

    def session_lifetime_ms(self, now_ms: int) -> int | None:
        return None

    def respond(self, client_bytes: bytes, now_ms: int) -> bytes:
        state = self._state
        self._state = _State.FAILED
        if state is _State.CLIENT_FIRST:
            answer = self._server_first_message(client_bytes)
            self._state = _State.CLIENT_FINAL
        elif state is _State.CLIENT_FINAL:
            answer = self._server_final_message(client_bytes)
            self._state = _State.COMPLETE
        else:
            raise SaslExchangeStateError(f"SCRAM token received in state {state.value}")
        return answer

    def _fail(self, detail: str) -> SaslInvalidCredentialsError:
        return SaslInvalidCredentialsError(self.mechanism, detail)

    def _server_first_message(self, client_bytes: bytes) -> bytes:
        try:
            first = parse_client_first(client_bytes)
        except ScramFormatError as error:
            raise self._fail(f"Invalid SCRAM client first message: {error}") from error
        if first.extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            raise self._fail("Token Authentication failed: delegation tokens are not supported")
        if first.authorization_id and first.authorization_id != first.username:
            raise SaslAuthenticationError(AUTHORIZATION_ID_MISMATCH)
        credential = self._lookup(first.username)
        self._user_known = credential is not None
        if credential is None:
            credential = self._unknown_user_credential(first.username)
        elif credential.iterations < MIN_ITERATIONS:
            raise self._fail(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS}"
            )
        self._username = first.username
        self._credential = credential
        self._client_first = first
        self._nonce = first.nonce + self._make_server_nonce()
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode("ascii")

    def _unknown_user_credential(self, username: str) -> ScramCredential:
        """A credential no password matches, the same on every try for a username."""

        def derive(label: bytes) -> bytes:
            message = label + b"\x00" + self.mechanism.encode() + b"\x00" + username.encode("utf-8")
            return hmac.new(self._unknown_user_secret, message, "sha512").digest()

        size = self._scram.digest_size
        salt_bytes, iterations = (SALT_BYTES, DEFAULT_ITERATIONS)
        if self._unknown_user_shape is not None:
            salt_bytes, iterations = self._unknown_user_shape()
        salt = b"".join(derive(b"salt%d" % block) for block in range(salt_bytes // 64 + 1))
        return ScramCredential(
            salt=salt[:salt_bytes],
            stored_key=derive(b"stored")[:size],
            server_key=derive(b"server")[:size],
            iterations=iterations,
        )

    def _server_final_message(self, client_bytes: bytes) -> bytes:
        first, credential = self._client_first, self._credential
        assert first is not None and credential is not None
        try:
            final = parse_client_final(client_bytes)
        except ScramFormatError as error:
            raise self._fail(f"Invalid SCRAM client final message: {error}") from error
        if final.channel_binding != first.gs2_header.encode("utf-8"):
            raise self._fail("Invalid channel binding in the client final message")
        if final.nonce != self._nonce:
            raise self._fail("Invalid client nonce in the final client message.")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        if not self._proof_matches(credential, auth_message, final.proof) or not self._user_known:
            raise self._fail(
                "Invalid client credentials" if self._user_known else "Invalid user credentials"
            )
        signature = _hmac(self._scram, credential.server_key, auth_message)
        return f"v={_b64(signature)}".encode("ascii")

    def _proof_matches(
        self, credential: ScramCredential, auth_message: bytes, proof: bytes
    ) -> bool:
        client_signature = _hmac(self._scram, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            return False
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        return hmac.compare_digest(_hash(self._scram, client_key), credential.stored_key)


def random_server_nonce() -> str:
    """Printable, comma-free random text (RFC 5802's nonce alphabet)."""
    return secrets.token_urlsafe(SERVER_NONCE_BYTES)


def password_matches(mechanism: ScramMechanism, credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `credential` was made from (SASL/PLAIN checked
    against a stored SCRAM credential): PBKDF2, then a constant-time comparison."""
    candidate = credential_from_password(
        mechanism, password, credential.salt, credential.iterations
    )
    return hmac.compare_digest(candidate.stored_key, credential.stored_key)
