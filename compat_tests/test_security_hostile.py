"""Hostile and mistaken use of a secured broker, against the real `weir` process: SASL
out of order, unsupported mechanisms, malformed SCRAM and PLAIN messages, oversized
pre-authentication frames, failed logins (delayed, counted, and never saying which
half was wrong), and an authenticated principal probing topics and groups it may not
see. Every bad input has an answer (an error code) or a closed connection, the broker
keeps serving, and every authorization denial is one `weir.audit` line.

One broker for the module: a SASL_PLAINTEXT listener with PLAIN and SCRAM, ACLs on with
`admin` (the inter-broker user, the bootstrap admin) as the super user, and `alice`, a
user whose ACLs reach only topics named `alice-*` and the group `alice-group`."""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
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
from compat_tests.sasl_wire import (
    authenticate,
    basic_authorization,
    closed_by_peer,
    handshake,
    login,
    metadata,
    metric_value,
)
from compat_tests.wire_client import round_trip
from weir.format.record_batch import build_batch
from weir.security.sasl_client import ScramClient
from weir.security.scram import ScramMechanism as WeirScramMechanism
from weir.wire.protocol import encode_request

pytestmark = pytest.mark.timeout(60)

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"
FAILED_LOGIN_DELAY_MS = 400
PRE_AUTH_FRAME_MAX = 4096
MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
CLIENT_WAIT_S = 15.0

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, DESCRIBE_CONFIGS = 0, 1, 2, 8, 32
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30
TOPIC_RESOURCE = 2


class HostileBroker:
    def __init__(self, process: WeirProcess, port: int) -> None:
        self.process = process
        self.port = port

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def connect_as_alice(self) -> socket.socket:
        sock = self.connect()
        assert login(sock, "SCRAM-SHA-512", "alice", ALICE_PASSWORD).error_code == 0
        return sock

    def admin_config(self) -> dict[str, object]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD,
        }

    def metric(self, name: str, labels: str) -> float:
        authorization = basic_authorization("admin", ADMIN_PASSWORD)
        return metric_value(self.process.http_url, authorization, name, labels)

    def create_topic(self, name: str) -> None:
        admin = AdminClient(self.admin_config())
        for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
            future.result(timeout=CLIENT_WAIT_S)

    def audit_denials(self, resource: str) -> list[str]:
        """The broker's audit lines denying alice anything on `resource` (TYPE:name)."""
        pattern = re.compile(
            r"weir\.audit: DENIED principal=User:alice host=127\.0\.0\.1 "
            rf"operation=\w+ resource={re.escape(resource)} "
        )
        return [line for line in self.stderr().splitlines() if pattern.search(line)]

    def stderr(self) -> str:
        return self.process.stderr_path.read_text(errors="replace")


def _allow(resource_type: ResourceType, name: str, pattern: ResourcePatternType,
           operation: AclOperation) -> AclBinding:  # fmt: skip
    return AclBinding(
        resource_type, name, pattern, "User:alice", "*", operation, AclPermissionType.ALLOW
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileBroker]:
    [port] = free_ports(1)
    settings = f"""
[security]
listeners = "SASL_PLAINTEXT://127.0.0.1:{port}"
sasl_enabled_mechanisms = {MECHANISMS!r}
connection_failed_authentication_delay_ms = {FAILED_LOGIN_DELAY_MS}
sasl_server_max_receive_size = {PRE_AUTH_FRAME_MAX}
authorizer_enabled = true
super_users = ["User:admin"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
""".replace("'", '"')
    process = WeirProcess.configured(tmp_path_factory.mktemp("hostile"), settings)
    process.start()
    try:
        hostile = HostileBroker(process, port)
        admin = AdminClient(hostile.admin_config())
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            # One credential of a user per request (Kafka's DUPLICATE_RESOURCE rule).
            upsertion = UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(mechanism, 4096), ALICE_PASSWORD.encode()
            )
            admin.alter_user_scram_credentials([upsertion])["alice"].result(CLIENT_WAIT_S)
        acls = [
            _allow(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, operation)
            for operation in (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
        ] + [_allow(ResourceType.GROUP, "alice-group", ResourcePatternType.LITERAL,
                    AclOperation.READ)]  # fmt: skip
        for future in admin.create_acls(acls).values():
            future.result(timeout=CLIENT_WAIT_S)
        yield hostile
    finally:
        process.stop()


def _alive(broker: HostileBroker) -> bool:
    """The broker still logs a client in and answers it."""
    with broker.connect_as_alice() as sock:
        return metadata(sock).brokers != []


# -- SASL out of order ---------------------------------------------------------------------


def test_sasl_authenticate_before_sasl_handshake_is_an_illegal_sasl_state(
    broker: HostileBroker,
) -> None:
    with broker.connect() as sock:
        response = authenticate(sock, b"n,,n=admin,r=abc")
        assert response.error_code == ILLEGAL_SASL_STATE
        assert closed_by_peer(sock)


def test_a_second_sasl_handshake_mid_exchange_is_an_illegal_sasl_state(
    broker: HostileBroker,
) -> None:
    with broker.connect() as sock:
        assert handshake(sock, "SCRAM-SHA-256").error_code == 0
        client = ScramClient(WeirScramMechanism.SCRAM_SHA_256, "admin", ADMIN_PASSWORD)
        assert authenticate(sock, client.first()).error_code == 0
        again = handshake(sock, "PLAIN")
        assert again.error_code == ILLEGAL_SASL_STATE
        assert closed_by_peer(sock)
    assert _alive(broker)


def test_an_unsupported_mechanism_is_refused_with_the_enabled_list(
    broker: HostileBroker,
) -> None:
    with broker.connect() as sock:
        response = handshake(sock, "GSSAPI")
        assert response.error_code == UNSUPPORTED_SASL_MECHANISM
        assert sorted(response.mechanisms) == sorted(MECHANISMS)
        assert closed_by_peer(sock)


# -- malformed messages --------------------------------------------------------------------


def _scram_first(sock: socket.socket, mechanism: str = "SCRAM-SHA-256") -> str:
    """A well-formed client-first for admin; the server-first's nonce."""
    assert handshake(sock, mechanism).error_code == 0
    response = authenticate(sock, b"n,,n=admin,r=clientnonce")
    assert response.error_code == 0
    return response.auth_bytes.decode().split(",")[0][2:]


MALFORMED: dict[str, tuple[str, bool, bytes]] = {
    # name: (mechanism, after a good client-first, the bad message)
    "scram_first_not_utf8": ("SCRAM-SHA-256", False, b"\xff\xfe\x00garbage"),
    "scram_first_without_nonce": ("SCRAM-SHA-256", False, b"n,,n=admin"),
    "scram_first_channel_binding": ("SCRAM-SHA-512", False, b"p=tls-unique,,n=admin,r=x"),
    "scram_first_empty": ("SCRAM-SHA-512", False, b""),
    "scram_final_garbage": ("SCRAM-SHA-256", True, b"this is not a client-final"),
    "scram_final_wrong_nonce": ("SCRAM-SHA-256", True, b"c=biws,r=another,p=AAAA"),
    "scram_final_proof_not_base64": ("SCRAM-SHA-512", True, b"c=biws,r={nonce},p=!!!"),
    "plain_two_fields": ("PLAIN", False, b"admin\x00" + ADMIN_PASSWORD.encode()),
    "plain_four_fields": ("PLAIN", False, b"\x00admin\x00pw\x00more"),
    "plain_not_utf8": ("PLAIN", False, b"\x00\xff\xfe\x00pw"),
    "plain_empty_password": ("PLAIN", False, b"\x00admin\x00"),
    "plain_huge_username": ("PLAIN", False, b"\x00" + b"a" * 3000 + b"\x00pw"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_sasl_message_fails_authentication_and_closes(
    broker: HostileBroker, case: str
) -> None:
    mechanism, after_first, message = MALFORMED[case]
    with broker.connect() as sock:
        if after_first:
            nonce = _scram_first(sock, mechanism)
            message = message.replace(b"{nonce}", nonce.encode())
        else:
            assert handshake(sock, mechanism).error_code == 0
        response = authenticate(sock, message)
        assert response.error_code == SASL_AUTHENTICATION_FAILED, response
        assert closed_by_peer(sock)
    assert _alive(broker)


def test_two_pipelined_plain_messages_close_the_connection_without_a_broker_error(
    broker: HostileBroker,
) -> None:
    """PLAIN takes one message; a client that sends a second before the first is
    answered is closed, and the broker logs no error (no traceback) for it."""
    message = b"\x00admin\x00" + ADMIN_PASSWORD.encode()
    body = {"auth_bytes": message}
    with broker.connect() as sock:
        assert handshake(sock, "PLAIN").error_code == 0
        frames = [encode_request(36, 2, n, "pipeliner", body) for n in (1, 2)]
        sock.sendall(b"".join(frames))
        assert closed_by_peer(sock)
    assert "Traceback" not in broker.stderr()
    assert _alive(broker)


def test_a_huge_sasl_authenticate_before_authentication_is_closed_by_the_frame_limit(
    broker: HostileBroker,
) -> None:
    closed_before = broker.metric("weir_connections_closed_by_broker_total", 'reason="frame_size"')
    with broker.connect() as sock:
        assert handshake(sock, "PLAIN").error_code == 0
        huge = b"\x00admin\x00" + b"p" * (PRE_AUTH_FRAME_MAX * 4)
        frame = encode_request(36, 2, 5, "huge", {"auth_bytes": huge})
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(frame)
        assert closed_by_peer(sock)
    closed = broker.metric("weir_connections_closed_by_broker_total", 'reason="frame_size"')
    assert closed == closed_before + 1


def test_a_frame_announcing_a_huge_size_before_authentication_is_closed_at_once(
    broker: HostileBroker,
) -> None:
    with broker.connect() as sock:
        sock.sendall(struct.pack(">i", 100 * 1024 * 1024))
        assert closed_by_peer(sock, timeout_s=5)
    assert _alive(broker)


# -- failed logins -------------------------------------------------------------------------


def _timed_login(
    broker: HostileBroker, mechanism: str, username: str, password: str
) -> tuple[Any, float]:
    """The login's last SaslAuthenticate response, and how long that one took."""
    with broker.connect() as sock:
        assert handshake(sock, mechanism).error_code == 0
        if mechanism == "PLAIN":
            started = time.monotonic()
            response = authenticate(sock, f"\x00{username}\x00{password}".encode())
            return response, time.monotonic() - started
        scram = WeirScramMechanism.from_sasl_name(mechanism)
        assert scram is not None
        client = ScramClient(scram, username, password)
        server_first = authenticate(sock, client.first())
        assert server_first.error_code == 0, server_first
        final = client.next(server_first.auth_bytes)
        assert final is not None
        started = time.monotonic()
        response = authenticate(sock, final)
        return response, time.monotonic() - started


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_failed_login_is_answered_only_after_the_delay(
    broker: HostileBroker, mechanism: str
) -> None:
    failed, failed_s = _timed_login(broker, mechanism, "alice", "wrong")
    assert failed.error_code == SASL_AUTHENTICATION_FAILED
    assert failed_s >= FAILED_LOGIN_DELAY_MS / 1000
    succeeded, succeeded_s = _timed_login(broker, mechanism, "alice", ALICE_PASSWORD)
    assert succeeded.error_code == 0
    assert succeeded_s < FAILED_LOGIN_DELAY_MS / 1000


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_failed_login_never_says_which_half_was_wrong(
    broker: HostileBroker, mechanism: str
) -> None:
    unknown_user, _ = _timed_login(broker, mechanism, "nobody", ALICE_PASSWORD)
    wrong_password, _ = _timed_login(broker, mechanism, "alice", "wrong")
    assert unknown_user.error_code == wrong_password.error_code == SASL_AUTHENTICATION_FAILED
    assert unknown_user.error_message == wrong_password.error_message
    assert "nobody" not in (unknown_user.error_message or "")


def test_failed_logins_are_counted_in_metrics(broker: HostileBroker) -> None:
    before = broker.metric("weir_sasl_authentications_total", 'result="failure"')
    for mechanism in MECHANISMS:
        failed, _ = _timed_login(broker, mechanism, "alice", "wrong")
        assert failed.error_code == SASL_AUTHENTICATION_FAILED
    after = broker.metric("weir_sasl_authentications_total", 'result="failure"')
    assert after == before + len(MECHANISMS)


# -- a principal probing what it may not see -----------------------------------------------


@pytest.fixture(scope="module")
def topics(broker: HostileBroker) -> dict[str, str]:
    """A topic alice may use, one she may not, and a name no topic has."""
    names = {
        "own": f"alice-{uuid.uuid4().hex[:8]}",
        "secret": f"secret-{uuid.uuid4().hex[:8]}",
        "missing": f"missing-{uuid.uuid4().hex[:8]}",
    }
    broker.create_topic(names["own"])
    broker.create_topic(names["secret"])
    return names


def test_metadata_for_all_topics_hides_the_ones_a_principal_may_not_describe(
    broker: HostileBroker, topics: dict[str, str]
) -> None:
    with broker.connect_as_alice() as sock:
        listed = {topic.name for topic in metadata(sock).topics}
    assert topics["own"] in listed
    assert topics["secret"] not in listed
    assert broker.audit_denials(f"TOPIC:{topics['secret']}") == []  # a filter, not a denial


@pytest.mark.parametrize("which", ["secret", "missing"])
def test_metadata_naming_a_hidden_topic_is_refused_whether_it_exists_or_not(
    broker: HostileBroker, topics: dict[str, str], which: str
) -> None:
    name = topics[which]
    with broker.connect_as_alice() as sock:
        [answer] = metadata(sock, [name]).topics
    assert (answer.name, answer.error_code) == (name, TOPIC_AUTHORIZATION_FAILED)
    assert answer.partitions == []
    [line] = broker.audit_denials(f"TOPIC:{name}")
    assert "operation=DESCRIBE" in line and "api=METADATA" in line


def _describe_configs(topic: str) -> tuple[int, int, dict[str, Any]]:
    body = {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic}]}
    return DESCRIBE_CONFIGS, 4, body


def _list_offsets(topic: str) -> tuple[int, int, dict[str, Any]]:
    partition = {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [partition]}],
    }
    return LIST_OFFSETS, 7, body


def _fetch(topic: str) -> tuple[int, int, dict[str, Any]]:
    partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}  # fmt: skip
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [partition]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return FETCH, 12, body


def _produce(topic: str) -> tuple[int, int, dict[str, Any]]:
    batch = build_batch([(b"k", b"probe", [])], timestamp_ms=int(time.time() * 1000))
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    return PRODUCE, 9, body


def _error_of(api_key: int, response: Any) -> int:
    if api_key == DESCRIBE_CONFIGS:
        [result] = response.results
        return int(result.error_code)
    if api_key == LIST_OFFSETS:
        [partition] = response.topics[0].partitions
        return int(partition.error_code)
    if api_key == FETCH:
        [partition] = response.responses[0].partitions
        return int(partition.error_code)
    [partition] = response.responses[0].partition_responses
    return int(partition.error_code)


PROBES = {
    "describe_configs": _describe_configs,
    "list_offsets": _list_offsets,
    "fetch": _fetch,
    "produce": _produce,
}


@pytest.mark.parametrize("which", ["secret", "missing"])
@pytest.mark.parametrize("probe", sorted(PROBES))
def test_a_request_on_a_hidden_topic_is_refused_and_audited_once(
    broker: HostileBroker, topics: dict[str, str], probe: str, which: str
) -> None:
    name = f"{topics[which]}-{probe}" if which == "missing" else topics[which]
    before = len(broker.audit_denials(f"TOPIC:{name}"))
    api_key, version, body = PROBES[probe](name)
    with broker.connect_as_alice() as sock:
        response = round_trip(sock, api_key, version, body)
    assert _error_of(api_key, response) == TOPIC_AUTHORIZATION_FAILED
    denials = broker.audit_denials(f"TOPIC:{name}")
    assert len(denials) == before + 1, denials


def test_the_same_requests_on_an_allowed_topic_are_served(
    broker: HostileBroker, topics: dict[str, str]
) -> None:
    """The probes above fail for want of ACLs, not for being malformed."""
    with broker.connect_as_alice() as sock:
        for probe in ("produce", "list_offsets", "fetch"):
            api_key, version, body = PROBES[probe](topics["own"])
            assert _error_of(api_key, round_trip(sock, api_key, version, body)) == 0, probe


def test_offset_commit_to_a_group_it_may_not_read_is_group_authorization_failed(
    broker: HostileBroker, topics: dict[str, str]
) -> None:
    group = f"secret-group-{uuid.uuid4().hex[:6]}"
    partition = {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": None}  # fmt: skip
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": topics["own"], "partitions": [partition]}],
    }
    with broker.connect_as_alice() as sock:
        response = round_trip(sock, OFFSET_COMMIT, 8, body)
    [answer] = response.topics[0].partitions
    assert answer.error_code == GROUP_AUTHORIZATION_FAILED
    [line] = broker.audit_denials(f"GROUP:{group}")
    assert "operation=READ" in line and "api=OFFSET_COMMIT" in line


def test_the_scram_server_first_message_does_not_say_whether_the_user_exists(
    broker: HostileBroker,
) -> None:
    admin = AdminClient(broker.admin_config())
    """An unknown user's server-first message carries the salt size and iteration
    count most stored users have (here carol's and dave's, made by the same tool),
    so it looks like a stored user's. (A user whose shape is unlike most others'
    can still be told apart; Kafka itself fails an unknown user after its first
    message.)"""
    carol, dave = (
        UserScramCredentialUpsertion(
            name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"some-secret"
        )
        for name in ("carol", "dave")
    )
    for future in admin.alter_user_scram_credentials([carol, dave]).values():
        future.result(timeout=CLIENT_WAIT_S)

    def server_first_shape(username: str) -> tuple[int, str]:
        with broker.connect() as sock:
            assert handshake(sock, "SCRAM-SHA-256").error_code == 0
            answer = authenticate(sock, f"n,,n={username},r=probe".encode())
            fields = dict(part.split("=", 1) for part in answer.auth_bytes.decode().split(","))
        return len(fields["s"]), fields["i"]

    assert server_first_shape("carol") == server_first_shape("nobody-at-all")
