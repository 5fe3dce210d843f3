"""Listeners with their own security protocols, against the real `weir` process and
confluent-kafka: SASL_SSL with SCRAM-SHA-256/512 and PLAIN, SASL_PLAINTEXT, SSL
with mutual TLS, PLAINTEXT beside them; and what a mistaken or hostile client gets
(a wrong password, plaintext to the TLS port, TLS to the plaintext port, a request
before authenticating, an oversized frame before authenticating).

One broker for the module: its admin user is the inter-broker user, whose SCRAM
credentials the broker stores at start (the bootstrap documented in docs/security.md)."""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.harness import WeirProcess, free_ports
from weir.wire.messages.metadata import MetadataRequest
from weir.wire.messages.security import SaslHandshakeRequest
from weir.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.timeout(120)

ADMIN_PASSWORD = "admin-secret"


class Listeners:
    def __init__(self, ports: list[int]) -> None:
        self.sasl_ssl, self.sasl_plaintext, self.ssl, self.plaintext = ports


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    broker_cert = ca.issue_cert("127.0.0.1", "localhost")
    client_cert = ca.issue_cert("alice@example.com", common_name="alice")
    other_ca = trustme.CA()
    paths = {
        "ca": directory / "ca.pem",
        "broker": directory / "broker.pem",
        "broker_key": directory / "broker-key.pem",
        "client": directory / "client.pem",
        "client_key": directory / "client-key.pem",
        "other_ca": directory / "other-ca.pem",
        "ca_cert_pem": directory / "ca-cert-only.pem",
        "ca_key_pem": directory / "ca-key.pem",
    }
    ca.cert_pem.write_to_path(str(paths["ca_cert_pem"]))
    ca.private_key_pem.write_to_path(str(paths["ca_key_pem"]))
    ca.cert_pem.write_to_path(str(paths["ca"]))
    broker_cert.private_key_pem.write_to_path(str(paths["broker_key"]))
    paths["broker"].write_bytes(b"".join(blob.bytes() for blob in broker_cert.cert_chain_pems))
    client_cert.private_key_pem.write_to_path(str(paths["client_key"]))
    paths["client"].write_bytes(b"".join(blob.bytes() for blob in client_cert.cert_chain_pems))
    other_ca.cert_pem.write_to_path(str(paths["other_ca"]))
    return paths


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, certificates: dict[str, Path]
) -> Iterator[tuple[WeirProcess, Listeners]]:
    listeners = Listeners(free_ports(4))
    settings = f"""
[security]
listeners = "SASL_SSL://127.0.0.1:{listeners.sasl_ssl},SASL_PLAINTEXT://127.0.0.1:{listeners.sasl_plaintext},SSL://127.0.0.1:{listeners.ssl},PLAINTEXT://127.0.0.1:{listeners.plaintext}"
ssl_certfile = "{certificates["broker"]}"
ssl_keyfile = "{certificates["broker_key"]}"
ssl_cafile = "{certificates["ca"]}"
ssl_client_auth = "requested"
sasl_enabled_mechanisms = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
"""
    broker = WeirProcess.configured(tmp_path_factory.mktemp("secured"), settings)
    broker.start()
    try:
        yield broker, listeners
    finally:
        broker.stop()


def _sasl_ssl(
    port: int, ca: Path, mechanism: str, password: str = ADMIN_PASSWORD
) -> dict[str, object]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": "admin",
        "sasl.password": password,
        "ssl.ca.location": str(ca),
    }


def _round_trip(config: dict[str, object]) -> None:
    topic = f"secured-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=20)
    producer = Producer({**config, "acks": "all"})
    producer.produce(topic, b"over the secured listener")
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                assert message.value() == b"over the secured listener"
                return
        pytest.fail("the record produced over the secured listener was not consumed")
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_sasl_ssl_round_trip_with_each_mechanism(
    secured: tuple[WeirProcess, Listeners], certificates: dict[str, Path], mechanism: str
) -> None:
    _, listeners = secured
    _round_trip(_sasl_ssl(listeners.sasl_ssl, certificates["ca"], mechanism))


def test_sasl_plaintext_round_trip(secured: tuple[WeirProcess, Listeners]) -> None:
    _, listeners = secured
    _round_trip(
        {
            "bootstrap.servers": f"127.0.0.1:{listeners.sasl_plaintext}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD,
        }
    )


def test_mutual_tls_round_trip(
    secured: tuple[WeirProcess, Listeners], certificates: dict[str, Path]
) -> None:
    _, listeners = secured
    _round_trip(
        {
            "bootstrap.servers": f"127.0.0.1:{listeners.ssl}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(certificates["ca"]),
            "ssl.certificate.location": str(certificates["client"]),
            "ssl.key.location": str(certificates["client_key"]),
        }
    )


def test_wrong_password_is_an_authentication_error_not_a_hang(
    secured: tuple[WeirProcess, Listeners], certificates: dict[str, Path]
) -> None:
    _, listeners = secured
    errors: list[KafkaError] = []
    config = _sasl_ssl(listeners.sasl_ssl, certificates["ca"], "SCRAM-SHA-256", "wrong")
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no error reported for a wrong password"
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert "admin" not in errors[0].str() or "password" not in errors[0].str().lower()


def test_untrusted_broker_certificate_is_refused_by_the_client(
    secured: tuple[WeirProcess, Listeners], certificates: dict[str, Path]
) -> None:
    _, listeners = secured
    admin = AdminClient(_sasl_ssl(listeners.sasl_ssl, certificates["other_ca"], "SCRAM-SHA-256"))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


def _raw_frame(api_key: int, api_version: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, api_version, 7, 4) + b"test"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _closed_without_answer(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(4) == b""
    except ConnectionResetError:
        return True


def test_metadata_before_authenticating_closes_the_connection(
    secured: tuple[WeirProcess, Listeners],
) -> None:
    _, listeners = secured
    with socket.create_connection(("127.0.0.1", listeners.sasl_plaintext), timeout=10) as sock:
        sock.sendall(_raw_frame(3, 12, b"\x01\x00\x00"))  # Metadata v12, no topics
        assert _closed_without_answer(sock)


def test_oversized_frame_before_authenticating_closes_the_connection(
    secured: tuple[WeirProcess, Listeners],
) -> None:
    _, listeners = secured
    with socket.create_connection(("127.0.0.1", listeners.sasl_plaintext), timeout=10) as sock:
        sock.sendall(struct.pack(">i", 600_000))  # above sasl_server_max_receive_size
        assert _closed_without_answer(sock)


def test_plaintext_bytes_to_the_tls_port_close_the_connection(
    secured: tuple[WeirProcess, Listeners],
) -> None:
    broker, listeners = secured
    with socket.create_connection(("127.0.0.1", listeners.sasl_ssl), timeout=10) as sock:
        sock.sendall(_raw_frame(18, 3, b"\x00\x00\x01"))  # ApiVersions in clear
        assert _closed_without_answer(sock)
    assert broker.is_running()


def test_tls_handshake_to_the_plaintext_port_fails(secured: tuple[WeirProcess, Listeners]) -> None:
    broker, listeners = secured
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", listeners.plaintext), timeout=10) as raw,
        pytest.raises((ssl.SSLError, ConnectionError, OSError)),
        context.wrap_socket(raw) as tls,
    ):
        tls.recv(1)
    assert broker.is_running()


def _served_certificate(port: int, ca: Path) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        certificate = tls.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


def test_a_renewed_certificate_is_served_without_a_restart(
    secured: tuple[WeirProcess, Listeners], certificates: dict[str, Path]
) -> None:
    broker, listeners = secured
    before = _served_certificate(listeners.ssl, certificates["ca"])
    renewed = trustme.CA.from_pem(
        certificates["ca_cert_pem"].read_bytes(), certificates["ca_key_pem"].read_bytes()
    ).issue_cert("127.0.0.1", "localhost")
    renewed.private_key_pem.write_to_path(str(certificates["broker_key"]))
    certificates["broker"].write_bytes(b"".join(blob.bytes() for blob in renewed.cert_chain_pems))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        time.sleep(0.5)  # the broker looks at the files at most once a second
        if _served_certificate(listeners.ssl, certificates["ca"]) != before:
            break
    assert _served_certificate(listeners.ssl, certificates["ca"]) != before
    assert broker.is_running()


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def _request(sock: socket.socket, api_key: int, version: int, body: object) -> Any:
    sock.sendall(encode_request(api_key, version, 1, "raw", body))
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    return decode_response(api_key, version, memoryview(_read_exactly(sock, size)))[1]


def test_sasl_handshake_v0_then_bare_plain_token_authenticates(
    secured: tuple[WeirProcess, Listeners],
) -> None:
    """Before KIP-152 (SaslHandshake v0) the tokens travel as bare frames, without a
    request header: old sarama and kafka-python 2.0 clients log in that way."""
    _, listeners = secured
    with socket.create_connection(("127.0.0.1", listeners.sasl_plaintext), timeout=10) as sock:
        handshake = _request(sock, 17, 0, SaslHandshakeRequest("PLAIN"))
        assert handshake.error_code == 0
        token = b"\x00admin\x00" + ADMIN_PASSWORD.encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _read_exactly(sock, 4) == b"\x00\x00\x00\x00"  # an empty bare token: done
        metadata = _request(sock, 3, 12, MetadataRequest(topics=None))
        assert metadata.brokers


def test_sasl_handshake_v0_with_a_wrong_password_closes_the_connection(
    secured: tuple[WeirProcess, Listeners],
) -> None:
    _, listeners = secured
    with socket.create_connection(("127.0.0.1", listeners.sasl_plaintext), timeout=10) as sock:
        assert _request(sock, 17, 0, SaslHandshakeRequest("PLAIN")).error_code == 0
        token = b"\x00admin\x00wrong"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _closed_without_answer(sock)
