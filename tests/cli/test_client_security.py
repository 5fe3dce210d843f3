"""The CLI over secured listeners: its SASL exchanges (PLAIN, SCRAM-SHA-256/512) run
against Weir's own server-side mechanisms behind a tiny in-process responder, TLS
with certificates made by trustme, and the kcat-style `-X` settings."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
import trustme

from tests.cli.test_kafka_client import read_frame
from weir.cli.client_security import (
    AuthenticationError,
    ClientSecurity,
    parse_client_properties,
)
from weir.cli.errors import BrokerConnectionError, CliError
from weir.cli.kafka_client import Address, KafkaClient
from weir.format.errors import ErrorCode
from weir.security.sasl import SaslAuthenticationError
from weir.security.sasl_client import SaslClientError, ScramClient
from weir.security.sasl_mechanisms import (
    SUPPORTED_MECHANISMS,
    SaslSources,
    UnsupportedSaslMechanismError,
    build_sasl_server,
)
from weir.security.sasl_plain import plain_check_from_users
from weir.security.scram import (
    ScramMechanism,
    ScramServer,
    credential_from_password,
)
from weir.wire.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    decode_request,
    encode_response,
    parse_request_header,
)

NOW_MS = 1_700_000_000_000
CREDENTIALS = {
    (mechanism, "alice"): credential_from_password(mechanism, "wonderland", b"salt", 4096)
    for mechanism in ScramMechanism
}
SOURCES = SaslSources(
    unknown_user_secret=b"secret",
    plain_check=plain_check_from_users({"alice": "wonderland"}),
    scram_credentials=lambda mechanism, user: CREDENTIALS.get((mechanism, user)),
)
VERSIONS = {
    **SUPPORTED_VERSIONS,
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
}


class SaslResponder:
    """ApiVersions, SaslHandshake and SaslAuthenticate, as a broker's connection
    answers them before authentication, driving Weir's server-side mechanisms."""

    def __init__(self, enabled: tuple[str, ...] = SUPPORTED_MECHANISMS) -> None:
        self.enabled = enabled
        self.principal: str | None = None

    def serve(self, conn: socket.socket) -> None:
        server = None
        while (frame := read_frame(conn)) is not None:
            header = parse_request_header(memoryview(frame))
            request = decode_request(header, memoryview(frame))
            if header.api_key == ApiKey.API_VERSIONS:
                body: dict[str, object] = {
                    "error_code": 0,
                    "api_keys": [
                        {"api_key": k, "min_version": lo, "max_version": hi}
                        for k, (lo, hi) in VERSIONS.items()
                    ],
                }
            elif header.api_key == ApiKey.SASL_HANDSHAKE:
                try:
                    server = build_sasl_server(request.mechanism, self.enabled, SOURCES)
                    body = {"error_code": 0, "mechanisms": list(self.enabled)}
                except UnsupportedSaslMechanismError:
                    body = {
                        "error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                        "mechanisms": list(self.enabled),
                    }
            else:
                assert header.api_key == ApiKey.SASL_AUTHENTICATE and server is not None
                try:
                    body = {
                        "error_code": 0,
                        "auth_bytes": server.respond(request.auth_bytes, NOW_MS),
                    }
                    if server.complete:
                        self.principal = server.principal_name()
                except SaslAuthenticationError as error:
                    body = {
                        "error_code": ErrorCode.SASL_AUTHENTICATION_FAILED,
                        "error_message": error.client_message(),
                    }
            conn.sendall(
                encode_response(header.api_key, header.api_version, header.correlation_id, body)
            )


@contextmanager
def serving(responder: SaslResponder, tls: ssl.SSLContext | None = None) -> Iterator[Address]:
    listener = socket.create_server(("127.0.0.1", 0))
    address = Address("127.0.0.1", listener.getsockname()[1])

    def run() -> None:
        try:
            conn, _ = listener.accept()
            if tls is not None:
                conn = tls.wrap_socket(conn, server_side=True)
        except (OSError, ssl.SSLError):
            return
        with conn, suppress(OSError, ssl.SSLError):
            responder.serve(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield address
    finally:
        listener.close()
        thread.join(timeout=5)


def sasl(
    mechanism: str, password: str = "wonderland", protocol: str = "SASL_PLAINTEXT"
) -> ClientSecurity:
    return ClientSecurity(
        security_protocol=protocol,
        sasl_mechanism=mechanism,
        sasl_username="alice",
        sasl_password=password,
    )


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_cli_logs_in_with_each_mechanism(mechanism: str) -> None:
    responder = SaslResponder()
    with (
        serving(responder) as address,
        KafkaClient.connect(address, request_timeout_ms=5000, security=sasl(mechanism)) as client,
    ):
        assert client.is_open
    assert responder.principal == "alice"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_fails_with_the_brokers_message(mechanism: str) -> None:
    responder = SaslResponder()
    with serving(responder) as address, pytest.raises(AuthenticationError) as raised:
        KafkaClient.connect(address, request_timeout_ms=5000, security=sasl(mechanism, "wrong"))
    assert f"refused {mechanism} login: Authentication failed" in raised.value.message
    assert responder.principal is None


def test_a_mechanism_the_broker_does_not_offer_is_named_with_what_it_offers() -> None:
    with (
        serving(SaslResponder(enabled=("SCRAM-SHA-512",))) as address,
        pytest.raises(AuthenticationError) as raised,
    ):
        KafkaClient.connect(address, request_timeout_ms=5000, security=sasl("PLAIN"))
    assert "does not offer SASL mechanism PLAIN (it offers: SCRAM-SHA-512)" in raised.value.message


def test_the_scram_client_refuses_a_server_that_cannot_prove_the_password() -> None:
    client = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "wonderland")
    # A server that does not know the password: its stored key is from another one.
    impostor = ScramServer(
        ScramMechanism.SCRAM_SHA_256,
        lambda user: credential_from_password(ScramMechanism.SCRAM_SHA_256, "other", b"salt", 4096),
        b"secret",
    )
    final = client.next(impostor.respond(client.first(), NOW_MS))
    assert final is not None
    with pytest.raises(SaslClientError):
        client.next(b"v=" + b"A" * 44)


def test_the_scram_client_escapes_commas_and_equals_in_the_username() -> None:
    client = ScramClient(ScramMechanism.SCRAM_SHA_256, "a,b=c", "pw", nonce="n")
    assert client.first() == b"n,,n=a=2Cb=3Dc,r=n"


# --- TLS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def server_tls(authority: trustme.CA) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    return context


def test_sasl_over_tls_with_the_brokers_ca(authority: trustme.CA, tmp_path: Path) -> None:
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    security = ClientSecurity(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="alice",
        sasl_password="wonderland",
        ssl_ca_location=str(ca_file),
    )
    responder = SaslResponder()
    with (
        serving(responder, tls=server_tls(authority)) as address,
        KafkaClient.connect(address, request_timeout_ms=5000, security=security) as client,
    ):
        assert client.is_open
    assert responder.principal == "alice"


def test_a_broker_certificate_from_another_ca_is_not_trusted(
    authority: trustme.CA, tmp_path: Path
) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    security = ClientSecurity(security_protocol="SSL", ssl_ca_location=str(other))
    with (
        serving(SaslResponder(), tls=server_tls(authority)) as address,
        pytest.raises(BrokerConnectionError) as raised,
    ):
        KafkaClient.connect(address, request_timeout_ms=5000, security=security)
    assert "certificate is not trusted" in raised.value.message


def test_tls_to_a_plaintext_port_fails_with_a_hint(authority: trustme.CA, tmp_path: Path) -> None:
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    security = ClientSecurity(security_protocol="SSL", ssl_ca_location=str(ca_file))
    with serving(SaslResponder()) as address, pytest.raises(BrokerConnectionError) as raised:
        KafkaClient.connect(address, request_timeout_ms=2000, security=security)
    assert "TLS handshake" in raised.value.message


# --- Settings ----------------------------------------------------------------------------


def test_kcat_style_settings_parse() -> None:
    security = parse_client_properties(
        [
            "security.protocol=sasl_ssl",
            "sasl.mechanisms=SCRAM-SHA-256",
            "sasl.username=alice",
            "sasl.password=pa=ss",
            "ssl.ca.location=/tmp/ca.pem",
        ]
    )
    assert security == ClientSecurity(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="alice",
        sasl_password="pa=ss",
        ssl_ca_location="/tmp/ca.pem",
    )
    assert security.uses_tls and security.uses_sasl
    assert not parse_client_properties([]).uses_tls


@pytest.mark.parametrize(
    "pairs",
    [
        ["security.protocol=TLS"],
        ["nonsense=1"],
        ["sasl.username"],
        ["security.protocol=SASL_PLAINTEXT", "sasl.username=alice"],
        [
            "security.protocol=SASL_SSL",
            "sasl.mechanism=GSSAPI",
            "sasl.username=a",
            "sasl.password=b",
        ],
        ["ssl.endpoint.identification.algorithm=sometimes"],
    ],
)
def test_bad_settings_are_one_line_errors(pairs: list[str]) -> None:
    with pytest.raises(CliError):
        parse_client_properties(pairs)
