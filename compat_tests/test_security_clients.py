"""Every client over SASL_SSL (SCRAM), over mutual TLS, and failing as it should with a wrong
password or an untrusted CA, against a secured broker.

The broker is parametrized: today Apache Kafka 4.4 (benchmarks/kafka_peer.py, the
reference each client's settings are proven against), later Weir with the same
listeners. `start_secured_broker` is the one place a broker is started: it gets the
listener ports, the security material of compat_tests/security_harness.py (CA, broker
certificate, users and passwords, JWKS) and returns the bootstrap address of each
listener. One broker serves the whole module: SASL_SSL (PLAIN, SCRAM-SHA-256/512,
OAUTHBEARER), SSL requiring a client certificate, and SASL_PLAINTEXT. After it starts,
the super user `admin` grants `User:alice` (the SCRAM user, and the principal of
alice's certificate: CN=alice,OU=eng,O=Weir mapped by
`RULE:^CN=([^,]+),.*$/$1/,DEFAULT`) ALL on topics and groups prefixed `sec-`.

The Kafka runs need the JVM and Kafka's jars (benchmarks/kafka_peer.py fetch) and take
a minute: they run only with WEIR_TEST_KAFKA_PEER=1, e.g.

    WEIR_TEST_KAFKA_PEER=1 PYTHONPATH=$PWD .venv/bin/python -m pytest \\
        compat_tests/test_security_clients.py -q
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
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

from compat_tests import security_harness as sec
from compat_tests.harness import WeirProcess, clean_environment, unique_topic_name

REPO_ROOT = Path(__file__).resolve().parent.parent
KAFKA_PEER_ENV = "WEIR_TEST_KAFKA_PEER"
TOPIC_PREFIX = "sec-"
RECORDS = 10
CLIENT_TIMEOUT_S = 30
# a client must report a failed login or handshake within this, not retry forever
FAILURE_DEADLINE_S = 20

# The SASL_SSL login each positive test uses; mutual TLS is the other.
MODES = ("scram-sha-256", "scram-sha-512", "mtls")


def _kafka_peer_enabled() -> bool:
    return os.environ.get(KAFKA_PEER_ENV) == "1"


BROKERS = [
    pytest.param(
        "kafka",
        marks=pytest.mark.skipif(
            not _kafka_peer_enabled(),
            reason=f"Apache Kafka 4.4 peer runs only with {KAFKA_PEER_ENV}=1 (not in CI)",
        ),
    ),
    "weir",
]
SCRAM_MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}


# --------------------------------------------------------------------------- the broker


@dataclass(frozen=True)
class SecuredBroker:
    """A running broker with one listener per security protocol."""

    name: str  # "kafka" or "weir"
    material: sec.SecurityMaterial
    bootstrap: dict[str, str]  # security protocol -> host:port

    def client(self, mode: str) -> tuple[str, sec.ClientSecurity]:
        """The bootstrap and settings of alice logging in with `mode`."""
        return client_for(self, mode)


def client_for(
    broker: SecuredBroker, mode: str, user: str = "alice"
) -> tuple[str, sec.ClientSecurity]:
    material = broker.material
    if mode == "mtls":
        return broker.bootstrap["SSL"], sec.mutual_tls(material, user)
    mechanism = {
        "plain": "PLAIN",
        "scram-sha-256": "SCRAM-SHA-256",
        "scram-sha-512": "SCRAM-SHA-512",
        "oauthbearer": "OAUTHBEARER",
    }[mode]
    return broker.bootstrap["SASL_SSL"], sec.sasl_ssl(material, mechanism, user)


def start_secured_broker(
    name: str, work_dir: Path, material: sec.SecurityMaterial, ports: dict[str, int]
) -> AbstractContextManager[SecuredBroker]:
    """THE FIXTURE POINT: start broker `name` with one listener per protocol of `ports`
    (SASL_SSL, SSL, SASL_PLAINTEXT), all on 127.0.0.1, secured with `material`:

    - TLS: `material.broker.keystore` (PKCS#8 key then chain; or `.cert` + `.key`),
      clients' certificates chain to `material.ca_file`; the SSL listener requires one;
    - SASL: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for every `material.users` entry,
      OAUTHBEARER validating RS256 JWTs against `material.jwks_file` with issuer
      `sec.JWT_ISSUER` and audience `sec.JWT_AUDIENCE`;
    - principals: ssl.principal.mapping.rules `RULE:^CN=([^,]+),.*$/$1/,DEFAULT`;
    - ACLs on (deny by default), super user `User:admin`: the module grants the rest
      through CreateAcls as admin.
    """
    if name == "kafka":
        return _kafka_peer(work_dir, material, ports)
    if name == "weir":
        return _weir_broker(work_dir, material, ports)
    raise NotImplementedError(f"no secured {name} broker: plug it in here")


def weir_security_table(material: sec.SecurityMaterial, ports: dict[str, int]) -> str:
    """The `[security]` table of a Weir broker secured as the Kafka peer is: one listener
    per protocol of `ports`, SCRAM/PLAIN/OAUTHBEARER, mutual TLS on the SSL listener,
    ACLs with `admin` (the inter-broker user, stored at start) as the super user."""
    listeners = ",".join(f"{protocol}://127.0.0.1:{port}" for protocol, port in ports.items())
    mechanisms = ", ".join(f'"{mechanism}"' for mechanism in sec.MECHANISMS)
    return f"""
[security]
listeners = "{listeners}"
ssl_certfile = "{material.broker.cert}"
ssl_keyfile = "{material.broker.key}"
ssl_cafile = "{material.ca_file}"
ssl_client_auth = "required"
ssl_principal_mapping_rules = "{sec.SSL_PRINCIPAL_MAPPING_RULES}"
sasl_enabled_mechanisms = [{mechanisms}]
sasl_oauthbearer_jwks_endpoint_url = "{material.jwks_file}"
sasl_oauthbearer_expected_issuer = "{sec.JWT_ISSUER}"
sasl_oauthbearer_expected_audience = ["{sec.JWT_AUDIENCE}"]
authorizer_enabled = true
super_users = ["User:{sec.ADMIN_USER}"]
inter_broker_sasl_username = "{sec.ADMIN_USER}"
inter_broker_sasl_password = "{material.admin_password}"
"""


@contextmanager
def _weir_broker(
    work_dir: Path, material: sec.SecurityMaterial, ports: dict[str, int]
) -> Iterator[SecuredBroker]:
    broker = WeirProcess.configured(work_dir, weir_security_table(material, ports))
    broker.start()
    try:
        secured = SecuredBroker(
            "weir", material, {protocol: f"127.0.0.1:{port}" for protocol, port in ports.items()}
        )
        create_scram_users(secured)
        yield secured
    finally:
        broker.stop()


def create_scram_users(broker: SecuredBroker) -> None:
    """Every user but admin (stored by the broker at start), with both SCRAM mechanisms,
    through AlterUserScramCredentials as admin: what the Kafka peer gets at format time.
    One request per mechanism: a request may name a user once (Kafka's rule too)."""
    admin = admin_client(broker)
    users = [user for user in sec.scram_users(broker.material) if user.name != sec.ADMIN_USER]
    for mechanism in SCRAM_MECHANISMS:
        upserts = [
            UserScramCredentialUpsertion(
                user.name,
                ScramCredentialInfo(SCRAM_MECHANISMS[mechanism], user.iterations),
                user.password.encode(),
            )
            for user in users
            if mechanism in user.mechanisms
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=CLIENT_TIMEOUT_S)


@contextmanager
def _kafka_peer(
    work_dir: Path, material: sec.SecurityMaterial, ports: dict[str, int]
) -> Iterator[SecuredBroker]:
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    import kafka_peer  # noqa: PLC0415  (benchmarks/ is not a package)

    listeners = tuple(ports.items())
    security = kafka_peer.PeerSecurity(
        listeners=listeners,
        keystore_file=material.broker.keystore,
        ca_file=material.ca_file,
        users=material.users,
        admin_user=sec.ADMIN_USER,
        jwks_file=material.jwks_file,
        jwt_issuer=sec.JWT_ISSUER,
        jwt_audience=sec.JWT_AUDIENCE,
    )
    node = kafka_peer.start_kafka(
        listeners[0][1],
        work_dir,
        security=security,
        die_with_parent=True,
        log=lambda _message: None,
    )
    try:
        bootstrap = {protocol: f"127.0.0.1:{port}" for protocol, port in listeners}
        yield SecuredBroker("kafka", material, bootstrap)
    finally:
        node.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def admin_client(broker: SecuredBroker) -> AdminClient:
    bootstrap, security = client_for(broker, "scram-sha-512", sec.ADMIN_USER)
    return AdminClient({"bootstrap.servers": bootstrap, **sec.confluent_config(security)})


def grant_alice(broker: SecuredBroker) -> None:
    """User:alice may do anything to topics and groups whose names start with `sec-`."""
    bindings = [
        AclBinding(
            resource,
            TOPIC_PREFIX,
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        )
        for resource in (ResourceType.TOPIC, ResourceType.GROUP)
    ]
    admin = admin_client(broker)  # kept referenced: a destroyed handle fails its futures
    for future in admin.create_acls(bindings).values():
        future.result(timeout=CLIENT_TIMEOUT_S)


# Weir's runs are in CI, so they are trimmed: each client round-trips over SCRAM-SHA-256
# on SASL_SSL and over mutual TLS, plus the modes a client is the proof of (OAUTHBEARER
# for confluent-kafka and the Java client, PLAIN for kcat, whose librdkafka 2.0.2 fails
# SCRAM); every negative case runs. WEIR_TEST_SECURITY_FULL=1 runs every mode against
# Weir too; Kafka's runs (WEIR_TEST_KAFKA_PEER=1) always do.
FULL_MATRIX_ENV = "WEIR_TEST_SECURITY_FULL"
WEIR_CI_MODES = ("scram-sha-256", "mtls")
WEIR_CI_EXTRA_MODES = {
    "test_confluent_kafka_produces_and_consumes": ("oauthbearer",),
    "test_kcat_produces_and_consumes": ("plain",),
    "test_java_client_logs_in_or_fails_as_expected": ("oauthbearer",),
}


def in_matrix(broker_name: str, test_name: str, mode: str) -> bool:
    """Whether the run covers `mode` for this test against `broker_name`."""
    if broker_name != "weir" or os.environ.get(FULL_MATRIX_ENV) == "1":
        return True
    return mode in (*WEIR_CI_MODES, *WEIR_CI_EXTRA_MODES.get(test_name, ()))


@pytest.fixture(autouse=True)
def _trimmed_matrix(request: pytest.FixtureRequest) -> None:
    """Skips a round trip the CI matrix leaves out, before its topic is created."""
    params = getattr(request.node, "callspec", None)
    if params is None or "mode" not in params.params:
        return
    broker_name, mode = params.params["secured"], params.params["mode"]
    if not in_matrix(broker_name, request.node.originalname, mode):
        pytest.skip(f"{mode} against {broker_name} runs with {FULL_MATRIX_ENV}=1")


@pytest.fixture(scope="module", params=BROKERS)
def secured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecuredBroker]:
    base = tmp_path_factory.mktemp("secured")
    material = sec.make_security_material(base / "security")
    ports = {protocol: free_port() for protocol in ("SASL_SSL", "SSL", "SASL_PLAINTEXT")}
    with start_secured_broker(request.param, base / "broker", material, ports) as broker:
        grant_alice(broker)
        yield broker


def create_topic(broker: SecuredBroker) -> str:
    """A fresh topic (3 partitions) alice may use, created by admin."""
    name = unique_topic_name(TOPIC_PREFIX + "t")
    admin = admin_client(broker)
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(timeout=CLIENT_TIMEOUT_S)
    return name


@pytest.fixture
def topic(secured: SecuredBroker) -> str:
    return create_topic(secured)


def values(count: int = RECORDS) -> list[bytes]:
    return [f"secured-{i}".encode() for i in range(count)]


# --------------------------------------------------------------------------- confluent-kafka


def confluent_round_trip(bootstrap: str, security: sec.ClientSecurity, topic: str) -> list[bytes]:
    """Produce RECORDS values, then read them back in a group; returns what was read."""
    config = {"bootstrap.servers": bootstrap, **sec.confluent_config(security)}
    producer = Producer(config)
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(error)

    for value in values():
        producer.produce(topic, value, on_delivery=delivered)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0 and not failures, failures
    consumer = Consumer({**config, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read: list[bytes] = []
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    try:
        while len(read) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            read.append(message.value() or b"")
    finally:
        consumer.close()
    return read


def confluent_login_errors(
    bootstrap: str, security: sec.ClientSecurity, expected: Callable[[KafkaError], bool]
) -> list[KafkaError]:
    """What librdkafka reports (error_cb) while metadata requests fail to get through,
    until it reports an `expected` error (or FAILURE_DEADLINE_S / 2 passes)."""
    errors: list[KafkaError] = []
    config = {
        "bootstrap.servers": bootstrap,
        **sec.confluent_config(security),
        "error_cb": errors.append,
    }
    admin = AdminClient(config)
    deadline = time.monotonic() + FAILURE_DEADLINE_S / 2
    while not any(expected(e) for e in errors) and time.monotonic() < deadline:
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=1.0)
        admin.poll(0)
    return errors


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", [*MODES, "plain", "oauthbearer"])
def test_confluent_kafka_produces_and_consumes(
    secured: SecuredBroker, topic: str, mode: str
) -> None:
    bootstrap, security = secured.client(mode)
    assert sorted(confluent_round_trip(bootstrap, security, topic)) == sorted(values())


@pytest.mark.timeout(60)
def test_confluent_kafka_wrong_password_is_an_authentication_error(secured: SecuredBroker) -> None:
    bootstrap, security = secured.client("scram-sha-256")
    errors = confluent_login_errors(
        bootstrap,
        security.with_password("not-the-password"),
        lambda e: e.code() == KafkaError._AUTHENTICATION,
    )
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


@pytest.mark.timeout(60)
def test_confluent_kafka_untrusted_ca_fails_the_handshake(secured: SecuredBroker) -> None:
    bootstrap, security = secured.client("scram-sha-256")
    errors = confluent_login_errors(
        bootstrap,
        security.trusting(secured.material.other_ca_file),
        lambda e: e.code() == KafkaError._SSL and "certificate verify failed" in e.str(),
    )
    assert any(e.code() == KafkaError._SSL for e in errors), errors
    assert any("certificate verify failed" in e.str() for e in errors), errors


# --------------------------------------------------------------------------- kafka-python


def kafka_python_round_trip(
    bootstrap: str, security: sec.ClientSecurity, topic: str
) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer  # noqa: PLC0415

    kwargs = sec.kafka_python_kwargs(security)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **kwargs)
    try:
        for future in [producer.send(topic, value) for value in values()]:
            future.get(timeout=CLIENT_TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"{topic}-kp",
        auto_offset_reset="earliest",
        consumer_timeout_ms=CLIENT_TIMEOUT_S * 1000,
        **kwargs,
    )
    read: list[bytes] = []
    try:
        for message in consumer:
            read.append(message.value)
            if len(read) == RECORDS:
                break
    finally:
        consumer.close()
    return read


def kafka_python_failure(
    bootstrap: str, security: sec.ClientSecurity, caplog: pytest.LogCaptureFixture
) -> list[str]:
    """kafka-python 3 retries a failed login until its bootstrap timeout, then raises
    KafkaTimeoutError; the cause is in its log (kafka.net.manager's warnings)."""
    from kafka import KafkaAdminClient  # noqa: PLC0415
    from kafka.errors import KafkaTimeoutError  # noqa: PLC0415

    started = time.monotonic()
    with caplog.at_level("WARNING", logger="kafka"), pytest.raises(KafkaTimeoutError):
        KafkaAdminClient(
            bootstrap_servers=bootstrap,
            bootstrap_timeout_ms=FAILURE_DEADLINE_S * 1000 // 4,
            **sec.kafka_python_kwargs(security),
        ).close()
    assert time.monotonic() - started < FAILURE_DEADLINE_S
    return [record.getMessage() for record in caplog.records]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", [*MODES, "plain", "oauthbearer"])
def test_kafka_python_produces_and_consumes(secured: SecuredBroker, topic: str, mode: str) -> None:
    bootstrap, security = secured.client(mode)
    assert sorted(kafka_python_round_trip(bootstrap, security, topic)) == sorted(values())


@pytest.mark.timeout(60)
def test_kafka_python_wrong_password_is_an_authentication_error(
    secured: SecuredBroker, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap, security = secured.client("scram-sha-512")
    logged = kafka_python_failure(bootstrap, security.with_password("not-the-password"), caplog)
    assert any("SaslAuthenticationFailedError" in line for line in logged), logged


@pytest.mark.timeout(60)
def test_kafka_python_untrusted_ca_fails_the_handshake(
    secured: SecuredBroker, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap, security = secured.client("scram-sha-512")
    untrusted = security.trusting(secured.material.other_ca_file)
    logged = kafka_python_failure(bootstrap, untrusted, caplog)
    assert any("CERTIFICATE_VERIFY_FAILED" in line for line in logged), logged


# --------------------------------------------------------------------------- aiokafka


async def aiokafka_round_trip(
    bootstrap: str, security: sec.ClientSecurity, topic: str
) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415

    kwargs = sec.aiokafka_kwargs(security)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **kwargs)
    await producer.start()
    try:
        for value in values():
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"{topic}-aio",
        auto_offset_reset="earliest",
        **kwargs,
    )
    await consumer.start()
    read: list[bytes] = []
    try:
        async with asyncio.timeout(CLIENT_TIMEOUT_S):
            async for message in consumer:
                read.append(message.value)
                if len(read) == RECORDS:
                    break
    finally:
        await consumer.stop()
    return read


async def aiokafka_failure(bootstrap: str, security: sec.ClientSecurity) -> BaseException:
    from aiokafka import AIOKafkaProducer  # noqa: PLC0415

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        request_timeout_ms=FAILURE_DEADLINE_S * 1000,
        **sec.aiokafka_kwargs(security),
    )
    try:
        async with asyncio.timeout(FAILURE_DEADLINE_S):
            await producer.start()
    except Exception as error:  # noqa: BLE001  (the test checks its type)
        return error
    finally:
        await producer.stop()
    raise AssertionError("aiokafka started with a bad login")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", [*MODES, "plain", "oauthbearer"])
def test_aiokafka_produces_and_consumes(secured: SecuredBroker, topic: str, mode: str) -> None:
    bootstrap, security = secured.client(mode)
    read = asyncio.run(aiokafka_round_trip(bootstrap, security, topic))
    assert sorted(read) == sorted(values())


@pytest.mark.timeout(60)
def test_aiokafka_wrong_password_is_an_authentication_error(
    secured: SecuredBroker, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap, security = secured.client("scram-sha-256")
    with caplog.at_level("ERROR", logger="aiokafka"):
        error = asyncio.run(aiokafka_failure(bootstrap, security.with_password("not-the-password")))
    # aiokafka raises "Unable to bootstrap" and logs the broker's answer
    assert type(error).__name__ == "KafkaConnectionError", repr(error)
    assert any("SaslAuthenticationFailed" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(60)
def test_aiokafka_untrusted_ca_fails_the_handshake(secured: SecuredBroker) -> None:
    bootstrap, security = secured.client("scram-sha-256")
    untrusted = security.trusting(secured.material.other_ca_file)
    error = asyncio.run(aiokafka_failure(bootstrap, untrusted))
    assert "KafkaConnectionError" in repr(error) or "SSL" in repr(error), repr(error)


# --------------------------------------------------------------------------- kcat


def run_kcat(
    bootstrap: str, security: sec.ClientSecurity, args: list[str], stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.fail("kcat is not installed: run scripts/test (apt-get install kcat)")
    return subprocess.run(
        [kcat, "-b", bootstrap, *sec.kcat_args(security), *args],
        input=stdin,
        capture_output=True,
        timeout=CLIENT_TIMEOUT_S,
        env=clean_environment(),
        check=False,
    )


# Debian's kcat 1.7.1 links librdkafka 2.0.2, whose SCRAM client-final message repeats
# the client nonce (fixed in librdkafka 2.6.1, confluentinc/librdkafka#4895); Kafka 4.x
# compares the nonce strictly (RFC 5802) and answers "invalid credentials". Weir does
# the same (its log: "Invalid client nonce in the final client message", Kafka's words):
# a newer kcat, or PLAIN over TLS, works with both.
KCAT_SCRAM_REJECTED_BY = {"kafka", "weir"}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", [*MODES, "plain"])
def test_kcat_produces_and_consumes(secured: SecuredBroker, topic: str, mode: str) -> None:
    bootstrap, security = secured.client(mode)
    if security.scram and secured.name in KCAT_SCRAM_REJECTED_BY:
        pytest.xfail(f"librdkafka 2.0.2's SCRAM nonce is rejected by {secured.name}")
    lines = b"\n".join(values()) + b"\n"
    produced = run_kcat(bootstrap, security, ["-P", "-t", topic], lines)
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = run_kcat(
        bootstrap,
        security,
        ["-C", "-t", topic, "-o", "beginning", "-e", "-c", str(RECORDS), "-f", "%s\n"],
    )
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert sorted(consumed.stdout.split()) == sorted(values())


def test_kcat_scram_is_refused_by_a_strict_nonce_check(secured: SecuredBroker) -> None:
    """The librdkafka 2.0.2 quirk above, as the broker reports it (proves the xfail's cause)."""
    if secured.name not in KCAT_SCRAM_REJECTED_BY:
        pytest.skip(f"{secured.name} accepts librdkafka 2.0.2's SCRAM")
    bootstrap, security = secured.client("scram-sha-256")
    listed = run_kcat(bootstrap, security, ["-L", "-m", "5"])
    assert b"invalid credentials with SASL mechanism SCRAM-SHA-256" in listed.stderr


@pytest.mark.timeout(60)
def test_kcat_wrong_password_is_an_authentication_error(secured: SecuredBroker) -> None:
    bootstrap, security = secured.client("plain")
    listed = run_kcat(bootstrap, security.with_password("not-the-password"), ["-L", "-m", "5"])
    assert listed.returncode != 0
    assert b"SASL authentication error" in listed.stderr, listed.stderr


@pytest.mark.timeout(60)
def test_kcat_untrusted_ca_fails_the_handshake(secured: SecuredBroker) -> None:
    bootstrap, security = secured.client("mtls")
    listed = run_kcat(
        bootstrap, security.trusting(secured.material.other_ca_file), ["-L", "-m", "5"]
    )
    assert listed.returncode != 0
    assert b"certificate verify failed" in listed.stderr, listed.stderr


@pytest.mark.timeout(60)
def test_kcat_client_certificate_from_another_ca_is_refused(secured: SecuredBroker) -> None:
    bootstrap, security = client_for(secured, "mtls", sec.UNTRUSTED_CLIENT)
    listed = run_kcat(bootstrap, security, ["-L", "-m", "5"])
    assert listed.returncode != 0
    # the broker refuses the certificate during the handshake: librdkafka sees the
    # connection closed ("Disconnected"/"transport failure"), never an authenticated one
    assert b"Broker transport failure" in listed.stderr, listed.stderr


# --------------------------------------------------------------------------- kafkajs

KAFKAJS_SCRIPT = Path(__file__).with_name("kafkajs") / "security.js"


def run_kafkajs(bootstrap: str, security: sec.ClientSecurity, scenario: str, topic: str) -> Any:
    node = shutil.which("node")
    if node is None or not (KAFKAJS_SCRIPT.parent / "node_modules" / "kafkajs").is_dir():
        pytest.fail("node or kafkajs is missing: run scripts/test, which installs them")
    result = subprocess.run(
        [node, str(KAFKAJS_SCRIPT), bootstrap, scenario, topic],
        capture_output=True,
        timeout=CLIENT_TIMEOUT_S * 2,
        env=clean_environment(WEIR_KAFKAJS_SECURITY=sec.kafkajs_json(security)),
        check=False,
    )
    lines = result.stdout.decode().strip().splitlines()
    assert lines, result.stderr.decode()
    return json.loads(lines[-1])


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", [*MODES, "plain", "oauthbearer"])
def test_kafkajs_produces_and_consumes(secured: SecuredBroker, topic: str, mode: str) -> None:
    bootstrap, security = secured.client(mode)
    result = run_kafkajs(bootstrap, security, "round-trip", topic)
    assert result == {"read": sorted(v.decode() for v in values())}


@pytest.mark.timeout(60)
def test_kafkajs_wrong_password_is_an_authentication_error(secured: SecuredBroker) -> None:
    bootstrap, security = secured.client("scram-sha-512")
    result = run_kafkajs(bootstrap, security.with_password("not-the-password"), "connect", "-")
    assert result["error"] == "KafkaJSSASLAuthenticationError", result


@pytest.mark.timeout(60)
def test_kafkajs_untrusted_ca_fails_the_handshake(secured: SecuredBroker) -> None:
    bootstrap, security = secured.client("mtls")
    untrusted = security.trusting(secured.material.other_ca_file)
    result = run_kafkajs(bootstrap, untrusted, "connect", "-")
    assert result["error"] is not None and "certificate" in result["message"], result


# --------------------------------------------------------------------------- franz-go, sarama

GO_MODULE = REPO_ROOT / "compat_tests" / "go"
GO_TESTS = {"franz-go": "TestSecurityFranzGo", "sarama": "TestSecuritySarama"}


def run_go_security_test(
    client: str, bootstrap: str, security: sec.ClientSecurity, topic: str, expect: str
) -> None:
    """compat_tests/go/security_test.go (-tags security) for one client and one case."""
    from compat_tests.test_go_clients import GoTestRun, go_environment  # noqa: PLC0415

    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not on PATH: install Go 1.26+ (scripts/test builds the suite)")
    env = go_environment(bootstrap)
    env.update(sec.go_env(security), WEIR_SECURITY_TOPIC=topic, WEIR_SECURITY_EXPECT=expect)
    result = subprocess.run(
        [
            go,
            "test",
            "-tags",
            "security",
            "-json",
            "-count=1",
            "-run",
            f"^{GO_TESTS[client]}$",
            ".",
        ],
        cwd=GO_MODULE,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,  # compiles the security-tagged binary on a cold build cache
        stdin=subprocess.DEVNULL,
        check=False,
    )
    run = GoTestRun.parse(result.stdout)
    report = run.report(result.returncode, result.stderr)
    assert result.returncode == 0 and run.passed == [GO_TESTS[client]], report


@pytest.mark.timeout(300)
@pytest.mark.parametrize("client", GO_TESTS)
@pytest.mark.parametrize("mode", [*MODES, "plain", "oauthbearer"])
def test_go_client_produces_and_consumes(
    secured: SecuredBroker, topic: str, client: str, mode: str
) -> None:
    bootstrap, security = secured.client(mode)
    run_go_security_test(client, bootstrap, security, topic, "round-trip")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("client", GO_TESTS)
def test_go_client_wrong_password_is_an_authentication_error(
    secured: SecuredBroker, client: str
) -> None:
    bootstrap, security = secured.client("scram-sha-256")
    wrong = security.with_password("not-the-password")
    run_go_security_test(client, bootstrap, wrong, "-", "authentication-error")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("client", GO_TESTS)
def test_go_client_untrusted_ca_fails_the_handshake(secured: SecuredBroker, client: str) -> None:
    bootstrap, security = secured.client("mtls")
    untrusted = security.trusting(secured.material.other_ca_file)
    run_go_security_test(client, bootstrap, untrusted, "-", "tls-error")


# --------------------------------------------------------------------------- the Java client

JAVA_CLIENT_VERSION = "4.4.0"
JAVA_RUN_TIMEOUT_S = 240


def write_java_case(
    directory: Path,
    name: str,
    bootstrap: str,
    security: sec.ClientSecurity,
    topic: str,
    expect: str,
) -> None:
    path = sec.write_java_properties(security, directory / f"{name}.properties")
    with path.open("a") as properties:
        properties.write(
            f"bootstrap.servers={bootstrap}\nweir.topic={topic}\nweir.expect={expect}\n"
        )


@pytest.mark.timeout(JAVA_RUN_TIMEOUT_S + 30)
def test_java_client_logs_in_or_fails_as_expected(secured: SecuredBroker, tmp_path: Path) -> None:
    """One Maven run of SecurityTest over every case: the Java client 4.4 produces and
    consumes over each mode, OAUTHBEARER with a JWT read from a file (FileJwtRetriever),
    and fails with SaslAuthenticationException / SslAuthenticationException."""
    from compat_tests.maven import (  # noqa: PLC0415
        JAVA_SUITE,
        JAVA_SUITE_BUILDS,
        require_maven_build,
        run_offline,
        surefire_outcomes,
        tail,
    )

    mvn = require_maven_build(JAVA_SUITE_BUILDS / f"kafka-clients-{JAVA_CLIENT_VERSION}")
    cases = tmp_path / "cases"
    cases.mkdir()
    system_properties: dict[str, str] = {}
    modes = [
        mode
        for mode in [*MODES, "plain", "oauthbearer"]
        if in_matrix(secured.name, "test_java_client_logs_in_or_fails_as_expected", mode)
    ]
    for mode in modes:
        bootstrap, security = secured.client(mode)
        write_java_case(cases, mode, bootstrap, security, create_topic(secured), "round-trip")
        system_properties.update(sec.java_oauth_system_properties(security))
    bootstrap, security = secured.client("scram-sha-256")
    write_java_case(
        cases,
        "wrong-password",
        bootstrap,
        security.with_password("not-the-password"),
        "-",
        "authentication-error",
    )
    untrusted = security.trusting(secured.material.other_ca_file)
    write_java_case(cases, "untrusted-ca", bootstrap, untrusted, "-", "tls-error")
    reports = tmp_path / "surefire-reports"
    result = run_offline(
        mvn,
        f"-Dkafka.version={JAVA_CLIENT_VERSION}",
        f"-Dweir.security.cases={cases}",
        # Weir.java's producer/consumer defaults want one; each case sets its own
        f"-Dweir.bootstrap={secured.bootstrap['SASL_SSL']}",
        f"-Dweir.reports.dir={reports}",
        "-Dtest=SecurityTest",
        "-DargLine=" + " ".join(f"-D{key}={value}" for key, value in system_properties.items()),
        "test",
        pom=JAVA_SUITE / "pom.xml",
        timeout_s=JAVA_RUN_TIMEOUT_S,
    )
    outcomes = surefire_outcomes(reports)
    broken = [o for o in outcomes if o.outcome != "passed"]
    assert result.returncode == 0 and not broken and len(outcomes) == len(modes) + 2, (
        "\n\n".join(f"{o.outcome}: {o.name}\n{o.message[:2000]}" for o in broken)
        + "\n--- mvn ---\n"
        + tail(result.stdout)
    )


# --------------------------------------------------------------------------- Kafka's tools


@pytest.mark.timeout(180)
def test_kafka_tools_grant_acls_and_move_records_with_command_config(
    secured: SecuredBroker, tmp_path: Path
) -> None:
    """Kafka's tools with `--command-config`: admin creates a topic (kafka-topics) outside
    alice's `sec-` grants and gives her the producer and consumer roles (kafka-acls); alice
    produces over SASL_SSL with SCRAM (console producer) and reads over mutual TLS
    (console consumer)."""
    from compat_tests.test_kafka_tools import (  # noqa: PLC0415
        CONSOLE_CONSUMER,
        CONSOLE_PRODUCER,
        TOPICS,
        run_tool,
    )

    topic, group = unique_topic_name("tools-acl"), unique_topic_name("tools-acl-g")
    bootstrap, admin = client_for(secured, "scram-sha-512", sec.ADMIN_USER)
    admin_config = str(sec.write_java_properties(admin, tmp_path / "admin.properties"))
    as_admin = ("--bootstrap-server", bootstrap, "--command-config", admin_config)
    created = run_tool(TOPICS, *as_admin, "--create", "--topic", topic, "--partitions", "2")
    assert f"Created topic {topic}." in created.lines
    # --producer: WRITE, DESCRIBE, CREATE on the topic; --consumer: READ, DESCRIBE on the
    # topic and READ on the group
    roles = ("--allow-principal", "User:alice", "--producer", "--consumer")
    run_tool(ACLS, *as_admin, "--add", *roles, "--topic", topic, "--group", group)
    listed = run_tool(ACLS, *as_admin, "--list", "--topic", topic)
    assert "principal=User:alice" in listed.stdout and "operation=WRITE" in listed.stdout, (
        listed.stdout
    )

    scram_bootstrap, scram = secured.client("scram-sha-256")
    scram_config = str(sec.write_java_properties(scram, tmp_path / "alice-scram.properties"))
    lines = [value.decode() for value in values()]
    run_tool(
        CONSOLE_PRODUCER,
        *("--bootstrap-server", scram_bootstrap, "--command-config", scram_config),
        *("--topic", topic),
        stdin="\n".join(lines) + "\n",
    )
    mtls_bootstrap, mtls = secured.client("mtls")
    mtls_config = str(sec.write_java_properties(mtls, tmp_path / "alice-mtls.properties"))
    consumed = run_tool(
        CONSOLE_CONSUMER,
        *("--bootstrap-server", mtls_bootstrap, "--command-config", mtls_config),
        *("--topic", topic, "--group", group, "--from-beginning"),
        *("--max-messages", str(RECORDS)),
    )
    assert sorted(consumed.lines) == sorted(lines)


ACLS = "org.apache.kafka.tools.AclCommand"  # bin/kafka-acls.sh


# --------------------------------------------------------------------------- Spark


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One SparkSession (with Spark's Kafka connector) for the module, started on first use."""
    from spark_demo.session import build_session  # noqa: PLC0415

    session = build_session("compat-tests-security")
    yield session
    session.stop()


@pytest.mark.timeout(300)
def test_spark_writes_and_reads_over_sasl_ssl_with_kafka_prefixed_options(
    secured: SecuredBroker, topic: str, spark: Any
) -> None:
    """Spark's connector (its own kafka-clients) writes a DataFrame and reads it back in
    batch as alice over SASL_SSL with SCRAM-SHA-512: the Java client's settings, each
    prefixed `kafka.`."""
    bootstrap, security = secured.client("scram-sha-512")
    options = {"kafka.bootstrap.servers": bootstrap, **sec.spark_options(security)}
    rows = [(f"k{i}", value.decode()) for i, value in enumerate(values())]
    frame = spark.createDataFrame(rows, "key string, value string")
    frame.write.format("kafka").options(**options).option("topic", topic).save()
    read = (
        spark.read.format("kafka")
        .options(**options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("groupIdPrefix", f"{TOPIC_PREFIX}spark")
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
        .collect()
    )
    assert sorted((row["key"], row["value"]) for row in read) == sorted(rows)
