"""The client side of the SASL mechanisms Weir's own clients use (the CLI, and a
broker logging in to another): PLAIN and SCRAM-SHA-256/512, pure, one exchange per
object: `first()` is the first token, `next(challenge)` the token answering each
server challenge (None once done). SCRAM checks the server's final signature, so a
broker that does not know the password cannot pass for one that does."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from weir.security.scram import ScramMechanism, username_to_sasl_name

CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENT_NONCE_BYTES = 24


class SaslClientError(ValueError):
    """The exchange cannot go on: an unknown mechanism, or a server message that is
    malformed or fails its check."""


class ClientExchange:
    """One mechanism's client side: the first token, then a token per challenge (None
    once done)."""

    def first(self) -> bytes:
        raise NotImplementedError

    def next(self, challenge: bytes) -> bytes | None:
        raise NotImplementedError


def client_exchange(mechanism: str, username: str, password: str) -> ClientExchange:
    scram = ScramMechanism.from_sasl_name(mechanism)
    if scram is not None:
        return ScramClient(scram, username, password)
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    raise SaslClientError(
        f"sasl.mechanism {mechanism!r} is not one of {', '.join(CLIENT_MECHANISMS)}"
    )


class PlainClient(ClientExchange):
    """RFC 4616: one message, no authzid."""

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\x00" + username.encode() + b"\x00" + password.encode()

    def first(self) -> bytes:
        return self._message

    def next(self, challenge: bytes) -> bytes | None:
        return None


class ScramClient(ClientExchange):
    """RFC 5802's client: client-first, client-final with the proof, then the server's
    signature checked (a broker that does not know the password cannot forge it)."""

    def __init__(
        self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None
    ) -> None:
        self._hash_name = mechanism.hash_name
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(CLIENT_NONCE_BYTES)
        self._bare = f"n={username_to_sasl_name(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._done = False

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def next(self, challenge: bytes) -> bytes | None:
        if self._server_signature is None:
            return self._client_final(challenge)
        if not self._done:
            self._check_server_final(challenge)
            self._done = True
        return None

    def _client_final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", errors="replace")
        attributes = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            nonce, salt, iterations = (
                attributes["r"],
                base64.b64decode(attributes["s"]),
                int(attributes["i"]),
            )
        except (KeyError, ValueError) as exc:
            raise SaslClientError(f"malformed SCRAM server-first message: {exc}") from None
        if not nonce.startswith(self._nonce) or nonce == self._nonce or iterations < 1:
            raise SaslClientError("SCRAM server-first message has a bad nonce or iterations")
        salted = hashlib.pbkdf2_hmac(self._hash_name, self._password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self._hash_name).digest()
        stored_key = hashlib.new(self._hash_name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self._hash_name).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self._hash_name).digest()
        self._server_signature = hmac.new(server_key, auth_message, self._hash_name).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _check_server_final(self, server_final: bytes) -> None:
        assert self._server_signature is not None
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not hmac.compare_digest(server_final, expected):
            raise SaslClientError(
                "the broker's SCRAM signature does not match: it does not know this password"
            )
