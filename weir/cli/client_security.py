"""The CLI's side of a secured Kafka listener: TLS for its socket and the SASL
exchanges (PLAIN, SCRAM-SHA-256/512) over SaslHandshake v1 + SaslAuthenticate, set
with librdkafka's property names as kcat takes them (`-X security.protocol=SASL_SSL
-X sasl.mechanism=SCRAM-SHA-256 -X sasl.username=... -X sasl.password=...
-X ssl.ca.location=ca.pem`).

`authenticate` runs after ApiVersions (which a broker answers before authentication)
through the connection's own request function, so this module does not depend on
`kafka_client.py`; `kafka_client.KafkaClient.connect` calls it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from weir.cli.errors import BrokerProtocolError, CliError
from weir.format.errors import ErrorCode
from weir.security.scram import ScramMechanism, username_to_sasl_name
from weir.wire.api_keys import ApiKey

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENT_NONCE_BYTES = 24


class AuthenticationError(CliError):
    """The broker refused this client's credentials, or the exchange went wrong."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How the CLI connects to a listener (librdkafka's settings of the same names)."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = None
    # "https" checks the broker's certificate names its host; "none" does not.
    ssl_endpoint_identification_algorithm: str = "https"

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT = ClientSecurity()

_PROPERTY_FIELDS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",  # librdkafka's older spelling
    "sasl.username": "sasl_username",
    "sasl.password": "sasl_password",
    "ssl.ca.location": "ssl_ca_location",
    "ssl.certificate.location": "ssl_certificate_location",
    "ssl.key.location": "ssl_key_location",
    "ssl.key.password": "ssl_key_password",
    "ssl.endpoint.identification.algorithm": "ssl_endpoint_identification_algorithm",
}


def parse_client_properties(pairs: Iterable[str]) -> ClientSecurity:
    """`key=value` settings (kcat's `-X`) -> ClientSecurity; CliError with one line
    for an unknown key, a malformed pair or a value out of range."""
    security = PLAINTEXT
    for pair in pairs:
        key, separator, value = pair.partition("=")
        key = key.strip()
        if not separator:
            raise CliError(f"-X {pair!r}: expected key=value")
        field = _PROPERTY_FIELDS.get(key)
        if field is None:
            known = ", ".join(sorted(_PROPERTY_FIELDS))
            raise CliError(f"-X {key}: unknown setting (known: {known})")
        if field in ("security_protocol", "sasl_mechanism"):
            value = value.strip().upper()
        security = replace(security, **{field: value})
    return _checked(security)


def _checked(security: ClientSecurity) -> ClientSecurity:
    if security.security_protocol not in SECURITY_PROTOCOLS:
        raise CliError(
            f"security.protocol {security.security_protocol!r} is not one of "
            f"{', '.join(SECURITY_PROTOCOLS)}"
        )
    if security.uses_sasl:
        if security.sasl_mechanism not in CLIENT_MECHANISMS:
            raise CliError(
                f"sasl.mechanism {security.sasl_mechanism!r} is not one of "
                f"{', '.join(CLIENT_MECHANISMS)}"
            )
        if not security.sasl_username or security.sasl_password is None:
            raise CliError(f"{security.security_protocol} needs sasl.username and sasl.password")
    if security.ssl_endpoint_identification_algorithm.lower() not in ("https", "none", ""):
        raise CliError("ssl.endpoint.identification.algorithm is 'https' or 'none'")
    return security


def ssl_context(security: ClientSecurity) -> ssl.SSLContext:
    """TLS 1.2 or later; the broker's certificate checked against `ssl.ca.location`
    (else the system's CAs), and its host name unless the algorithm is `none`; a client
    certificate (mutual TLS) when `ssl.certificate.location` is set."""
    try:
        context = ssl.create_default_context(cafile=security.ssl_ca_location)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if security.ssl_endpoint_identification_algorithm.lower() in ("none", ""):
            context.check_hostname = False
        if security.ssl_certificate_location:
            context.load_cert_chain(
                security.ssl_certificate_location,
                security.ssl_key_location,
                security.ssl_key_password,
            )
    except (OSError, ssl.SSLError) as exc:
        raise CliError(f"cannot load the TLS settings: {exc}") from None
    return context


# --- SASL ---------------------------------------------------------------------------------

RequestFunction = Callable[[int, Mapping[str, Any]], Any]


def authenticate(request: RequestFunction, security: ClientSecurity, where: str) -> None:
    """SaslHandshake v1 for the configured mechanism, then SaslAuthenticate rounds until
    the mechanism is done; AuthenticationError with the broker's message if refused."""
    mechanism = security.sasl_mechanism
    handshake = request(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism})
    error = int(handshake["error_code"])
    if error == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
        offered = ", ".join(handshake["mechanisms"]) or "none"
        raise AuthenticationError(
            f"broker at {where} does not offer SASL mechanism {mechanism} (it offers: {offered})"
        )
    if error != ErrorCode.NONE:
        raise BrokerProtocolError(f"broker at {where} refused SaslHandshake (error code {error})")
    username, password = security.sasl_username or "", security.sasl_password or ""
    exchange = client_exchange(mechanism, username, password)
    token: bytes | None = exchange.first()
    while token is not None:
        response = request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
        error = int(response["error_code"])
        if error != ErrorCode.NONE:
            detail = response.get("error_message") or "no message"
            raise AuthenticationError(f"broker at {where} refused {mechanism} login: {detail}")
        token = exchange.next(bytes(response["auth_bytes"]))


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
    raise CliError(f"sasl.mechanism {mechanism!r} is not one of {', '.join(CLIENT_MECHANISMS)}")


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
            raise AuthenticationError(f"malformed SCRAM server-first message: {exc}") from None
        if not nonce.startswith(self._nonce) or nonce == self._nonce or iterations < 1:
            raise AuthenticationError("SCRAM server-first message has a bad nonce or iterations")
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
            raise AuthenticationError(
                "the broker's SCRAM signature does not match: it does not know this password"
            )
