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

import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from weir.cli.errors import BrokerProtocolError, CliError
from weir.format.errors import ErrorCode
from weir.security.sasl_client import CLIENT_MECHANISMS, SaslClientError, client_exchange
from weir.wire.api_keys import ApiKey

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


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
PROPERTY_NAMES = frozenset(_PROPERTY_FIELDS)


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
    try:
        exchange = client_exchange(mechanism, username, password)
        token: bytes | None = exchange.first()
        while token is not None:
            response = request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
            error = int(response["error_code"])
            if error != ErrorCode.NONE:
                detail = response.get("error_message") or "no message"
                raise AuthenticationError(f"broker at {where} refused {mechanism} login: {detail}")
            token = exchange.next(bytes(response["auth_bytes"]))
    except SaslClientError as exc:
        raise AuthenticationError(f"{mechanism} login to {where}: {exc}") from None
