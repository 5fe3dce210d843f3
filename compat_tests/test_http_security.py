"""The HTTP endpoints with security on, against the real `weir` process: the health
checks stay open; /metrics and the group views ask for credentials (401 with a
challenge), take HTTP Basic (a user's SCRAM password) or a Bearer JWT (checked as
OAUTHBEARER checks one), and apply the same ACLs as the Kafka API (403 without
CLUSTER DESCRIBE on /metrics, only the groups a user may DESCRIBE listed); the
listener speaks HTTPS (`http_tls`), and plain http to it fails without hurting the
broker.

One broker for the module: a SASL_PLAINTEXT Kafka listener (to set users, ACLs and
groups up), ACLs on with `admin` as super user, `alice` allowed to DESCRIBE one group
and nothing else, OAUTHBEARER with a JWKS file, and the HTTP listener over TLS."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from compat_tests.harness import WeirProcess, free_ports
from compat_tests.sasl_wire import TokenIssuer, basic_authorization, http_get, metric_value

pytestmark = pytest.mark.timeout(60)

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"
ISSUER = "https://issuer.weir.test"
AUDIENCE = "weir-http"
FAILED_LOGIN_DELAY_MS = 200
CLIENT_WAIT_S = 15.0
ADMIN = basic_authorization("admin", ADMIN_PASSWORD)
ALICE = basic_authorization("alice", ALICE_PASSWORD)


class HttpBroker:
    def __init__(
        self, process: WeirProcess, kafka_port: int, ca: Path, issuer: TokenIssuer
    ) -> None:
        self.process = process
        self.kafka_port = kafka_port
        self.issuer = issuer
        self.tls = ssl.create_default_context(cafile=str(ca))
        self.groups = {"alice": f"alice-group-{uuid.uuid4().hex[:6]}",
                       "other": f"other-group-{uuid.uuid4().hex[:6]}"}  # fmt: skip

    def get(self, path: str, authorization: str | None = None) -> tuple[int, dict[str, str], bytes]:
        return http_get(f"{self.process.http_url}{path}", authorization, tls=self.tls)

    def failures(self) -> float:
        labels = 'result="failure"'
        return metric_value(
            self.process.http_url, ADMIN, "weir_sasl_authentications_total", labels, self.tls
        )

    def admin_config(self) -> dict[str, object]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.kafka_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD,
        }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpBroker]:
    base = tmp_path_factory.mktemp("http-security")
    ca = trustme.CA()
    certificate = ca.issue_cert("127.0.0.1", "localhost")
    paths = {name: base / f"{name}.pem" for name in ("ca", "cert", "key")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    paths["cert"].write_bytes(b"".join(blob.bytes() for blob in certificate.cert_chain_pems))
    certificate.private_key_pem.write_to_path(str(paths["key"]))
    issuer = TokenIssuer(ISSUER, AUDIENCE)
    jwks = base / "jwks.json"
    jwks.write_text(json.dumps(issuer.jwks()))
    [kafka_port] = free_ports(1)
    settings = f"""
[security]
listeners = "SASL_PLAINTEXT://127.0.0.1:{kafka_port}"
ssl_certfile = "{paths["cert"]}"
ssl_keyfile = "{paths["key"]}"
http_tls = true
sasl_enabled_mechanisms = ["SCRAM-SHA-512", "OAUTHBEARER"]
sasl_oauthbearer_jwks_endpoint_url = "{jwks}"
sasl_oauthbearer_expected_issuer = "{ISSUER}"
sasl_oauthbearer_expected_audience = ["{AUDIENCE}"]
connection_failed_authentication_delay_ms = {FAILED_LOGIN_DELAY_MS}
authorizer_enabled = true
super_users = ["User:admin"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
"""
    process = WeirProcess.configured(base / "broker", settings, http_cafile=paths["ca"])
    process.start()
    try:
        secured = HttpBroker(process, kafka_port, paths["ca"], issuer)
        _set_up(secured)
        yield secured
    finally:
        process.stop()


def _set_up(broker: HttpBroker) -> None:
    """alice, her one ACL (DESCRIBE on her group), and two groups with offsets."""
    admin = AdminClient(broker.admin_config())
    alice = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), ALICE_PASSWORD.encode()
    )
    admin.alter_user_scram_credentials([alice])["alice"].result(timeout=CLIENT_WAIT_S)
    acl = AclBinding(ResourceType.GROUP, broker.groups["alice"], ResourcePatternType.LITERAL,
                     "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)  # fmt: skip
    for future in admin.create_acls([acl]).values():
        future.result(timeout=CLIENT_WAIT_S)
    topic = f"http-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=CLIENT_WAIT_S)
    for group in broker.groups.values():
        consumer = Consumer({**broker.admin_config(), "group.id": group})
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        finally:
            consumer.close()


@pytest.mark.parametrize("path", ["/health/live", "/health/ready"])
def test_health_endpoints_stay_open_without_credentials(broker: HttpBroker, path: str) -> None:
    status, _, _ = broker.get(path)
    assert status == 200


@pytest.mark.parametrize("path", ["/metrics", "/v1/groups", "/v1/groups/some-group"])
def test_without_credentials_an_endpoint_answers_401_with_a_challenge(
    broker: HttpBroker, path: str
) -> None:
    status, headers, _ = broker.get(path)
    assert status == 401
    challenge = {name.lower(): value for name, value in headers.items()}["www-authenticate"]
    assert "Basic" in challenge and "Bearer" in challenge


def test_a_wrong_password_is_401_after_the_delay_and_the_same_as_an_unknown_user(
    broker: HttpBroker,
) -> None:
    started = time.monotonic()
    wrong_password = broker.get("/metrics", basic_authorization("alice", "wrong"))
    elapsed_s = time.monotonic() - started
    unknown_user = broker.get("/metrics", basic_authorization("nobody", ALICE_PASSWORD))
    assert wrong_password[0] == unknown_user[0] == 401
    assert wrong_password[2] == unknown_user[2]
    assert elapsed_s >= FAILED_LOGIN_DELAY_MS / 1000


@pytest.mark.parametrize("path", ["/metrics", "/v1/groups"])
def test_the_admin_is_served_with_http_basic(broker: HttpBroker, path: str) -> None:
    status, _, _ = broker.get(path, ADMIN)
    assert status == 200


def test_metrics_are_forbidden_to_a_user_without_cluster_describe(broker: HttpBroker) -> None:
    status, _, body = broker.get("/metrics", ALICE)
    assert status == 403
    assert b"weir_" not in body


def test_the_group_list_holds_only_the_groups_the_user_may_describe(broker: HttpBroker) -> None:
    def listed(authorization: str) -> set[str]:
        status, _, body = broker.get("/v1/groups", authorization)
        assert status == 200
        return {group["group_id"] for group in json.loads(body)["groups"]}

    assert set(broker.groups.values()) <= listed(ADMIN)
    assert listed(ALICE) == {broker.groups["alice"]}


@pytest.mark.parametrize("which", ["other", "missing"])
def test_a_group_the_user_may_not_describe_is_forbidden_whether_it_exists_or_not(
    broker: HttpBroker, which: str
) -> None:
    group = broker.groups.get(which, f"missing-{uuid.uuid4().hex[:6]}")
    status, _, _ = broker.get(f"/v1/groups/{group}", ALICE)
    assert status == 403
    assert broker.get(f"/v1/groups/{broker.groups['alice']}", ALICE)[0] == 200


def test_a_bearer_jwt_authenticates_as_its_subject(broker: HttpBroker) -> None:
    assert broker.get("/metrics", f"Bearer {broker.issuer.token('admin')}")[0] == 200
    assert broker.get("/metrics", f"Bearer {broker.issuer.token('alice')}")[0] == 403


@pytest.mark.parametrize("kind", ["forged", "expired", "wrong_audience", "alg_none"])
def test_a_bad_bearer_jwt_is_401(broker: HttpBroker, kind: str) -> None:
    issuer = broker.issuer
    token = {
        "forged": lambda: issuer.forged_token("admin"),
        "expired": lambda: issuer.token("admin", lifetime_s=-120),
        "wrong_audience": lambda: issuer.token("admin", aud="someone-else"),
        "alg_none": lambda: issuer.unsigned_token("admin"),
    }[kind]()
    assert broker.get("/metrics", f"Bearer {token}")[0] == 401


def test_failed_http_logins_are_counted_with_the_kafka_ones(broker: HttpBroker) -> None:
    before = broker.failures()
    assert broker.get("/metrics", basic_authorization("alice", "wrong"))[0] == 401
    assert broker.get("/metrics", f"Bearer {broker.issuer.forged_token('admin')}")[0] == 401
    assert broker.failures() == before + 2


def test_a_dot_segment_path_does_not_skip_authentication(broker: HttpBroker) -> None:
    """The health checks are open by path prefix: `/health/../metrics` must not
    reach /metrics without credentials."""
    port = broker.process.http_port
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=broker.tls, timeout=5)
    try:
        connection.request("GET", "/health/../metrics")
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    assert response.status in (401, 404)
    assert b"weir_" not in body


def test_https_with_the_ca_is_served(broker: HttpBroker) -> None:
    assert broker.process.http_url.startswith("https://")
    assert broker.get("/health/ready")[0] == 200


def test_plain_http_to_the_tls_port_fails_and_the_broker_stays_up(broker: HttpBroker) -> None:
    port = broker.process.http_port
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        try:
            while chunk := sock.recv(4096):
                answer += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    assert b"live" not in answer and not answer.startswith(b"HTTP/1.1 200")
    assert broker.process.is_running()
    assert broker.get("/health/live")[0] == 200
