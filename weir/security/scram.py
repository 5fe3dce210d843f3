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
tell whether the user exists.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
from dataclasses import dataclass

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
