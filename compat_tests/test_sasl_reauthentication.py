"""KIP-368 re-authentication with `connections_max_reauth_ms`, against the real `weir`
process: SaslAuthenticate tells the client its session's lifetime; librdkafka
(confluent-kafka) re-authenticates on the same connection before it ends and keeps
producing; a raw client that does not is closed on its first request after the
session ended; a re-authentication in time extends the session; and a connection
cannot re-authenticate as someone else, or with a wrong password.

One broker for the module: a SASL_PLAINTEXT listener with PLAIN and SCRAM, sessions of
`REAUTH_MS`, the inter-broker user `admin` (the bootstrap admin) and a second user."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from compat_tests.harness import WeirProcess, free_ports
from compat_tests.sasl_wire import (
    basic_authorization,
    closed_by_peer,
    login,
    metadata,
    metric_value,
    send_metadata_expecting_close,
)

pytestmark = pytest.mark.timeout(60)

REAUTH_MS = 3000
ADMIN_PASSWORD = "admin-secret"
BOB_PASSWORD = "bob-secret"
SASL_AUTHENTICATION_FAILED = 58
CLIENT_WAIT_S = 15.0
PRODUCE_SPAN_S = 9.0


class ReauthBroker:
    def __init__(self, process: WeirProcess, port: int) -> None:
        self.process = process
        self.port = port

    def config(self, mechanism: str = "SCRAM-SHA-512") -> dict[str, object]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD,
        }

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def metric(self, name: str, labels: str) -> float:
        authorization = basic_authorization("admin", ADMIN_PASSWORD)
        return metric_value(self.process.http_url, authorization, name, labels)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReauthBroker]:
    [port] = free_ports(1)
    settings = f"""
[security]
listeners = "SASL_PLAINTEXT://127.0.0.1:{port}"
sasl_enabled_mechanisms = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
connections_max_reauth_ms = {REAUTH_MS}
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
"""
    process = WeirProcess.configured(tmp_path_factory.mktemp("reauth"), settings)
    process.start()
    try:
        secured = ReauthBroker(process, port)
        admin = AdminClient(secured.config())
        bob = UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), BOB_PASSWORD.encode()
        )
        admin.alter_user_scram_credentials([bob])["bob"].result(timeout=CLIENT_WAIT_S)
        yield secured
    finally:
        process.stop()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_authenticate_reports_the_configured_session_lifetime(
    broker: ReauthBroker, mechanism: str
) -> None:
    with broker.connect() as sock:
        response = login(sock, mechanism, "admin", ADMIN_PASSWORD)
        assert (response.error_code, response.session_lifetime_ms) == (0, REAUTH_MS)


def test_librdkafka_keeps_producing_across_reauthentications(broker: ReauthBroker) -> None:
    """librdkafka re-authenticates at 90% of the session lifetime (its debug log:
    "Received session lifetime 3000 ms from broker", then a REAUTH op every 2.7 s):
    over 9 s each of its connections re-authenticates at least twice, every record
    is delivered, and the broker never closes an expired session."""
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(broker.config())
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=CLIENT_WAIT_S)
    closed_before = broker.metric("weir_connections_closed_by_broker_total", 'reason="request"')
    logins_before = broker.metric("weir_sasl_authentications_total", 'result="success"')
    errors: list[KafkaError] = []
    failed: list[KafkaError] = []
    producer = Producer({**broker.config(), "acks": "all", "error_cb": errors.append})
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < PRODUCE_SPAN_S:
        producer.produce(topic, b"%d" % sent, on_delivery=lambda e, _m: e and failed.append(e))
        sent += 1
        producer.poll(0.1)
    assert producer.flush(CLIENT_WAIT_S) == 0
    assert (errors, failed) == ([], [])
    logins = broker.metric("weir_sasl_authentications_total", 'result="success"') - logins_before
    # Two connections (bootstrap, then the broker's own), three logins each at least.
    assert logins >= 5, f"{logins} logins in {PRODUCE_SPAN_S} s: no re-authentication"
    closed = broker.metric("weir_connections_closed_by_broker_total", 'reason="request"')
    assert closed == closed_before, "the broker closed a connection whose session expired"


def test_a_client_that_does_not_reauthenticate_is_closed_on_its_first_request_after_expiry(
    broker: ReauthBroker,
) -> None:
    with broker.connect() as sock:
        assert login(sock, "SCRAM-SHA-256", "admin", ADMIN_PASSWORD).error_code == 0
        assert metadata(sock).brokers
        time.sleep(REAUTH_MS / 1000 + 0.3)
        assert send_metadata_expecting_close(sock)
    assert broker.process.is_running()


def test_reauthenticating_before_expiry_extends_the_session(broker: ReauthBroker) -> None:
    with broker.connect() as sock:
        assert login(sock, "SCRAM-SHA-512", "admin", ADMIN_PASSWORD).error_code == 0
        time.sleep(REAUTH_MS / 1000 * 0.6)
        again = login(sock, "SCRAM-SHA-512", "admin", ADMIN_PASSWORD)
        assert (again.error_code, again.session_lifetime_ms) == (0, REAUTH_MS)
        time.sleep(REAUTH_MS / 1000 * 0.6)  # past the first session's end
        assert metadata(sock).brokers


def test_reauthentication_as_another_user_is_refused_and_closes_the_connection(
    broker: ReauthBroker,
) -> None:
    failures_before = broker.metric("weir_sasl_authentications_total", 'result="failure"')
    with broker.connect() as sock:
        assert login(sock, "SCRAM-SHA-512", "admin", ADMIN_PASSWORD).error_code == 0
        again = login(sock, "SCRAM-SHA-512", "bob", BOB_PASSWORD)
        assert again.error_code == SASL_AUTHENTICATION_FAILED
        assert "principal" in (again.error_message or "")
        assert closed_by_peer(sock)
    failures = broker.metric("weir_sasl_authentications_total", 'result="failure"')
    assert failures == failures_before + 1, "the refused re-authentication is not counted"


def test_reauthentication_with_a_wrong_password_is_refused_and_closes_the_connection(
    broker: ReauthBroker,
) -> None:
    with broker.connect() as sock:
        assert login(sock, "PLAIN", "admin", ADMIN_PASSWORD).error_code == 0
        again = login(sock, "PLAIN", "admin", "not-the-password")
        assert again.error_code == SASL_AUTHENTICATION_FAILED
        assert closed_by_peer(sock)
