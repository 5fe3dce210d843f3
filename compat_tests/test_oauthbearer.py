"""SASL/OAUTHBEARER end to end, against the real `weir` process: the broker loads its
JWKS over http from a server the test runs, confluent-kafka logs in with signed JWTs
from an `oauth_cb`, and acts as the token's subject; expired, forged, wrong-issuer,
wrong-audience and unsigned (`alg: none`) tokens are refused with an authentication
error; the session lasts as long as the token (KIP-368), librdkafka refreshes its token
and re-authenticates before it ends, and a raw client that does not is closed on its
next request.

One broker for the module, with ACLs on and `alice` as its only super user, so a token
for another subject can log in but not touch a topic."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.harness import WeirProcess, free_ports
from compat_tests.sasl_wire import (
    TokenIssuer,
    authenticate,
    closed_by_peer,
    handshake,
    metadata,
    metric_value,
    oauthbearer_login,
    send_metadata_expecting_close,
)

pytestmark = pytest.mark.timeout(90)

ISSUER = "https://issuer.weir.test"
AUDIENCE = "weir-brokers"
SASL_AUTHENTICATION_FAILED = 58
TOPIC_AUTHORIZATION_FAILED = 29
CLIENT_WAIT_S = 15.0
# The re-authentication test's tokens: the JWT's life (the broker's session), and
# the shorter life librdkafka is told (when it asks for the next one).
TOKEN_LIFETIME_S = 5.0
CLIENT_TOKEN_LIFETIME_S = 2.0
PRODUCE_SPAN_S = 9.0


class JwksServer:
    """The identity provider's JWKS endpoint: GET /jwks.json, counted."""

    def __init__(self, document: dict[str, object]) -> None:
        body = json.dumps(document).encode()
        self.requests = 0
        server_state = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server hook's name)
                server_state.requests += 1
                status = 200 if self.path == "/jwks.json" else 404
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/jwks.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> JwksServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class OAuthBroker:
    def __init__(self, process: WeirProcess, port: int, issuer: TokenIssuer, jwks: JwksServer):
        self.process = process
        self.port = port
        self.issuer = issuer
        self.jwks = jwks

    def client_config(self, oauth_cb: Callable[[str], tuple[str, float]]) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": oauth_cb,
        }

    def metric(self, name: str, labels: str) -> float:
        """One sample of /metrics, read with a Bearer token for the super user."""
        bearer = f"Bearer {self.issuer.token('alice')}"
        return metric_value(self.process.http_url, bearer, name, labels)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthBroker]:
    issuer = TokenIssuer(ISSUER, AUDIENCE)
    [port] = free_ports(1)
    with JwksServer(issuer.jwks()) as jwks:
        settings = f"""
[security]
listeners = "SASL_PLAINTEXT://127.0.0.1:{port}"
sasl_enabled_mechanisms = ["OAUTHBEARER"]
sasl_oauthbearer_jwks_endpoint_url = "{jwks.url}"
sasl_oauthbearer_expected_issuer = "{ISSUER}"
sasl_oauthbearer_expected_audience = ["{AUDIENCE}"]
authorizer_enabled = true
super_users = ["User:alice"]
"""
        process = WeirProcess.configured(tmp_path_factory.mktemp("oauthbearer"), settings)
        process.start()
        try:
            yield OAuthBroker(process, port, issuer, jwks)
        finally:
            process.stop()


def fixed_token(token: str, lifetime_s: float = 300.0) -> Callable[[str], tuple[str, float]]:
    """An oauth_cb handing out `token`, telling librdkafka it lives `lifetime_s`."""

    def oauth_cb(_config: str) -> tuple[str, float]:
        return token, time.time() + lifetime_s

    return oauth_cb


def create_topic(broker: OAuthBroker) -> str:
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(broker.client_config(fixed_token(broker.issuer.token("alice"))))
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=CLIENT_WAIT_S)
    return topic


def test_the_broker_loads_its_jwks_over_http(broker: OAuthBroker) -> None:
    assert broker.jwks.requests >= 1


def test_a_signed_token_produces_and_consumes_as_its_subject(broker: OAuthBroker) -> None:
    topic = create_topic(broker)
    config = broker.client_config(fixed_token(broker.issuer.token("alice")))
    producer = Producer(config)
    producer.produce(topic, b"signed by the issuer")
    assert producer.flush(CLIENT_WAIT_S) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + CLIENT_WAIT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                assert message.value() == b"signed by the issuer"
                break
        else:
            pytest.fail("the record produced with a token was not consumed")
    finally:
        consumer.close()


def test_the_principal_is_the_tokens_subject(broker: OAuthBroker) -> None:
    """A valid token for a subject with no ACLs logs in, and is refused the topic
    as that subject (and the audit line names it)."""
    topic = create_topic(broker)
    delivered: list[KafkaError | None] = []
    config = broker.client_config(fixed_token(broker.issuer.token("mallory")))
    producer = Producer({**config, "message.timeout.ms": 5000})
    producer.produce(topic, b"x", on_delivery=lambda error, _message: delivered.append(error))
    producer.flush(CLIENT_WAIT_S)
    [error] = delivered
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert re.search(
        r"weir\.audit: DENIED principal=User:mallory host=127\.0\.0\.1 "
        rf"operation=(?:DESCRIBE|WRITE) resource=TOPIC:{topic} ",
        broker.process.stderr_text(),
    )


BAD_TOKENS: dict[str, Callable[[TokenIssuer], str]] = {
    # Expired beyond the broker's 30 s clock skew.
    "expired": lambda issuer: issuer.token("alice", lifetime_s=-120),
    "forged": lambda issuer: issuer.forged_token("alice"),
    "wrong_issuer": lambda issuer: issuer.token("alice", iss="https://elsewhere.test"),
    "wrong_audience": lambda issuer: issuer.token("alice", aud="another-service"),
    "alg_none": lambda issuer: issuer.unsigned_token("alice"),
}


@pytest.mark.parametrize("kind", sorted(BAD_TOKENS))
def test_a_bad_token_is_refused_on_the_wire(broker: OAuthBroker, kind: str) -> None:
    token = BAD_TOKENS[kind](broker.issuer)
    with _connect(broker) as sock:
        response = oauthbearer_login(sock, token)
        assert response.error_code == SASL_AUTHENTICATION_FAILED
        assert response.error_message == '{"status":"invalid_token"}'
        assert closed_by_peer(sock)
    assert broker.process.is_running()


@pytest.mark.parametrize("kind", sorted(BAD_TOKENS))
def test_a_bad_token_is_an_authentication_error_for_librdkafka_not_a_hang(
    broker: OAuthBroker, kind: str
) -> None:
    errors: list[KafkaError] = []
    # librdkafka is told the token is good for 5 minutes: only the broker can refuse it.
    config = broker.client_config(fixed_token(BAD_TOKENS[kind](broker.issuer)))
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + CLIENT_WAIT_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, f"no error reported for the {kind} token"
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors[0]


MALFORMED_INITIAL_RESPONSES = {
    "not_gs2": b"this is not an OAUTHBEARER message",
    "basic_scheme": b"n,,\x01auth=Basic YWxpY2U6c2VjcmV0\x01\x01",
    "no_auth": b"n,,\x01host=weir\x01\x01",
    "token_too_large": b"n,,\x01auth=Bearer " + b"a" * 40_000 + b"\x01\x01",
    "not_ascii": "n,,\x01auth=Bearer \u00e9\u00e9\x01\x01".encode(),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_INITIAL_RESPONSES))
def test_a_malformed_oauthbearer_message_fails_authentication_and_closes(
    broker: OAuthBroker, case: str
) -> None:
    with _connect(broker) as sock:
        assert handshake(sock, "OAUTHBEARER").error_code == 0
        response = authenticate(sock, MALFORMED_INITIAL_RESPONSES[case])
        assert response.error_code == SASL_AUTHENTICATION_FAILED
        assert closed_by_peer(sock)
    assert broker.process.is_running()


def test_the_session_lasts_as_long_as_the_token_and_then_a_request_closes_it(
    broker: OAuthBroker,
) -> None:
    lifetime_s = 2.0
    with _connect(broker) as sock:
        response = oauthbearer_login(sock, broker.issuer.token("alice", lifetime_s=lifetime_s))
        assert response.error_code == 0, response
        assert 1000 < response.session_lifetime_ms <= lifetime_s * 1000
        assert metadata(sock).brokers, "Metadata is served while the session lasts"
        time.sleep(response.session_lifetime_ms / 1000 + 0.3)
        assert send_metadata_expecting_close(sock)


def test_librdkafka_refreshes_its_token_and_reauthenticates_before_the_session_ends(
    broker: OAuthBroker,
) -> None:
    """What librdkafka does (its debug log, `debug=security`): it asks the oauth_cb
    for a new token at 80% of the life it was told (checked on a 1 s timer), and
    re-authenticates each connection at 90% of the `session_lifetime_ms` the broker
    sent ("Received session lifetime N ms from broker", then a REAUTH op), with the
    token it holds then. So the client is told a shorter life than the JWT's: it
    refreshes every ~2 s and re-authenticates with a fresh token every few seconds.
    (Told the JWT's own short life, it re-authenticates with the old token ever
    closer to its expiry, and a request can land after the session ended: the
    broker then closes the connection, as Kafka does.) It keeps producing, and the
    broker never has to close an expired session."""
    topic = create_topic(broker)
    tokens_issued: list[float] = []

    def oauth_cb(_config: str) -> tuple[str, float]:
        tokens_issued.append(time.monotonic())
        token = broker.issuer.token("alice", lifetime_s=TOKEN_LIFETIME_S)
        return token, time.time() + CLIENT_TOKEN_LIFETIME_S

    closed_before = broker.metric("weir_connections_closed_by_broker_total", 'reason="request"')
    logins_before = broker.metric("weir_sasl_authentications_total", 'result="success"')
    errors: list[KafkaError] = []
    failed: list[KafkaError] = []
    producer = Producer({**broker.client_config(oauth_cb), "error_cb": errors.append})
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < PRODUCE_SPAN_S:
        producer.produce(topic, b"%d" % sent, on_delivery=lambda e, _m: e and failed.append(e))
        sent += 1
        producer.poll(0.1)
    assert producer.flush(CLIENT_WAIT_S) == 0
    assert (errors, failed) == ([], [])
    assert len(tokens_issued) >= 3, f"{len(tokens_issued)} tokens in {PRODUCE_SPAN_S} s"
    logins = broker.metric("weir_sasl_authentications_total", 'result="success"') - logins_before
    assert logins >= 4, f"{logins} logins: no re-authentication"
    closed = broker.metric("weir_connections_closed_by_broker_total", 'reason="request"')
    assert closed == closed_before, "the broker closed a connection whose session expired"


def _connect(broker: OAuthBroker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10)
