"""SASL on a raw socket, and signed JWTs, for the security compat tests: requests
encoded with Weir's declared schemas (`wire_client.round_trip`) so a test sees every
field of SaslHandshake / SaslAuthenticate (clients hide them) and can send what no
client sends; and an RSA issuer that mints the tokens OAUTHBEARER checks."""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import struct
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from compat_tests.wire_client import round_trip
from weir.security.sasl_client import client_exchange
from weir.wire.protocol import encode_request

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
HANDSHAKE_VERSION, AUTHENTICATE_VERSION = 1, 2
CLOSE_WAIT_S = 10.0


def handshake(sock: socket.socket, mechanism: str) -> Any:
    return round_trip(sock, SASL_HANDSHAKE, HANDSHAKE_VERSION, {"mechanism": mechanism})


def authenticate(sock: socket.socket, auth_bytes: bytes) -> Any:
    return round_trip(sock, SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": auth_bytes})


def login(sock: socket.socket, mechanism: str, username: str, password: str) -> Any:
    """SaslHandshake then SaslAuthenticate until the exchange ends: the last
    SaslAuthenticate response (its error code says how it ended)."""
    answered = handshake(sock, mechanism)
    assert answered.error_code == 0, answered
    exchange = client_exchange(mechanism, username, password)
    token: bytes | None = exchange.first()
    response = None
    while token is not None:
        response = authenticate(sock, token)
        if response.error_code != 0:
            return response
        token = exchange.next(response.auth_bytes)
        if token is None or token == b"":
            break
    return response


def oauthbearer_login(sock: socket.socket, token: str) -> Any:
    """OAUTHBEARER's initial response (RFC 7628); a refused token gets the JSON
    challenge, acknowledged with 0x01, and the exchange's final answer returned."""
    answered = handshake(sock, "OAUTHBEARER")
    assert answered.error_code == 0, answered
    response = authenticate(sock, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    if response.error_code == 0 and response.auth_bytes:
        response = authenticate(sock, b"\x01")
    return response


def metadata(sock: socket.socket, topics: list[str] | None = None, version: int = 12) -> Any:
    body = {
        "topics": None if topics is None else [{"name": name} for name in topics],
        "allow_auto_topic_creation": False,
    }
    return round_trip(sock, METADATA, version, body)


def closed_by_peer(sock: socket.socket, timeout_s: float = CLOSE_WAIT_S) -> bool:
    """Whether the peer closes the connection (reading nothing more) within `timeout_s`."""
    sock.settimeout(timeout_s)
    try:
        while True:
            if sock.recv(65536) == b"":
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def send_metadata_expecting_close(sock: socket.socket) -> bool:
    """A Metadata request; True when the broker closes instead of answering."""
    frame = encode_request(METADATA, 12, 99, "weir-sasl-test", {"topics": None})
    try:
        sock.sendall(frame)
    except (BrokenPipeError, ConnectionResetError):
        return True
    sock.settimeout(CLOSE_WAIT_S)
    try:
        header = sock.recv(4)
    except ConnectionResetError:
        return True
    if header == b"":
        return True
    (size,) = struct.unpack(">i", header)
    raise AssertionError(f"the broker answered ({size} bytes) instead of closing")


# -- HTTP with credentials ------------------------------------------------------------------

# Loopback HTTP must never go through an http_proxy from the environment.
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def basic_authorization(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def http_get(
    url: str,
    authorization: str | None = None,
    timeout_s: float = 5.0,
    tls: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of a GET, with an Authorization header when given
    (`tls`: the context an https URL is checked with)."""
    headers = {} if authorization is None else {"Authorization": authorization}
    request = urllib.request.Request(url, headers=headers)
    opener = _HTTP
    if tls is not None:
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=tls)
        )
    try:
        with opener.open(request, timeout=timeout_s) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def metric_value(
    http_url: str, authorization: str, name: str, labels: str, tls: ssl.SSLContext | None = None
) -> float:
    """One sample of /metrics (0 when absent), e.g. labels `result="failure"`."""
    status, _, body = http_get(f"{http_url}/metrics", authorization, tls=tls)
    assert status == 200, f"/metrics answered {status}"
    pattern = rf"^{re.escape(name)}{{{re.escape(labels)}}} (\S+)$"
    match = re.search(pattern, body.decode(), re.MULTILINE)
    return float(match.group(1)) if match else 0.0


# -- JWTs ---------------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_uint(value: int) -> str:
    return _b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


class TokenIssuer:
    """An identity provider: an RSA key under a `kid`, its public JWKS, and RS256
    tokens signed with it."""

    def __init__(self, issuer: str, audience: str) -> None:
        self.issuer = issuer
        self.audience = audience
        self.kid = uuid.uuid4().hex[:12]
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self) -> dict[str, object]:
        numbers = self._key.public_key().public_numbers()
        key = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid}
        key |= {"n": _b64url_uint(numbers.n), "e": _b64url_uint(numbers.e)}
        return {"keys": [key]}

    def claims(self, subject: str, lifetime_s: float) -> dict[str, object]:
        now_s = time.time()
        return {
            "sub": subject,
            "iss": self.issuer,
            "aud": self.audience,
            "iat": int(now_s),
            "exp": now_s + lifetime_s,
        }

    def token(self, subject: str, lifetime_s: float = 300.0, **overrides: object) -> str:
        """An RS256 token for `subject`; `overrides` replace or add claims."""
        return self.sign({**self.claims(subject, lifetime_s), **overrides})

    def sign(self, claims: dict[str, object], header: dict[str, object] | None = None) -> str:
        header = header or {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = (
            f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        )
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"

    def unsigned_token(self, subject: str, lifetime_s: float = 300.0) -> str:
        """`alg: none`: claims anyone could write, with no signature."""
        header = {"alg": "none", "typ": "JWT"}
        claims = self.claims(subject, lifetime_s)
        return f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}."

    def forged_token(self, subject: str, lifetime_s: float = 300.0) -> str:
        """A token naming this issuer's `kid` but signed by another key."""
        impostor = TokenIssuer(self.issuer, self.audience)
        impostor.kid = self.kid
        return impostor.token(subject, lifetime_s)
