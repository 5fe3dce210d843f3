"""Users (SCRAM credentials) and client quotas over the REST admin API, against a real
`weir serve` with security on: a user made over HTTP logs in over HTTP and over
Kafka (confluent-kafka, SCRAM), its password changed and deleted as the Kafka API
does it; client quotas (AlterClientQuotas / DescribeClientQuotas through the gateway)
set, listed and removed; what the ACLs deny is 403; hostile bodies are 400 and a
password is never answered nor logged.

One broker: a SASL_PLAINTEXT Kafka listener, ACLs on with `admin` as super user,
`alice` allowed DESCRIBE on the cluster (not ALTER, nor the configs)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AclOperation, AdminClient

from compat_tests.secured_http_broker import (
    ADMIN_PASSWORD,
    CLUSTER,
    SecuredHttpBroker,
)

pytestmark = pytest.mark.timeout(90)

ALICE_PASSWORD = "alice-secret"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredHttpBroker]:
    base = tmp_path_factory.mktemp("rest-admin-users")
    mechanisms = ("SCRAM-SHA-512", "SCRAM-SHA-256")
    with SecuredHttpBroker.running(base / "broker", mechanisms=mechanisms) as secured:
        secured.create_users({"alice": ALICE_PASSWORD})
        secured.grant("User:alice", CLUSTER, [AclOperation.DESCRIBE])
        yield secured


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def refused(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    document = response.json()
    assert document["error_code"] // 100 == status, document
    return dict(document)


def kafka_login_works(broker: SecuredHttpBroker, user: str, password: str) -> bool:
    config = {**broker.kafka_config(user, password), "socket.timeout.ms": 5000}
    try:
        AdminClient(config).list_topics(timeout=5)
    except KafkaException:
        return False
    return True


def test_a_user_made_over_http_logs_in_over_http_and_kafka_and_is_deleted(
    broker: SecuredHttpBroker,
) -> None:
    name = f"bob-{uuid.uuid4().hex[:6]}"
    password = f"pw-{uuid.uuid4().hex}"
    users = f"{broker.cluster_path}/users"
    with broker.admin_http() as admin:
        created = admin.post(users, json={"user_name": name, "password": password})
        assert password not in created.text
        document = ok(created, 201)
        assert document["kind"] == "WeirUser"
        assert document["user_name"] == name
        assert document["credentials"] == [
            {"mechanism": "SCRAM-SHA-256", "iterations": 4096},
            {"mechanism": "SCRAM-SHA-512", "iterations": 4096},
        ]
        listed = ok(admin.get(users))
        assert listed["kind"] == "WeirUserList"
        assert {"admin", "alice", name} <= {u["user_name"] for u in listed["data"]}
        assert password not in admin.get(f"{users}/{name}").text

        with broker.client(name, password) as bob:
            assert bob.get("/v3/clusters").status_code == 200
        assert kafka_login_works(broker, name, password)
        refused(admin.post(users, json={"user_name": name, "password": "other"}), 409)

        new_password = f"new-{uuid.uuid4().hex}"
        changed = admin.put(
            f"{users}/{name}", json={"password": new_password, "mechanisms": ["SCRAM-SHA-512"]}
        )
        assert new_password not in changed.text
        ok(changed)
        assert not kafka_login_works(broker, name, password)
        assert kafka_login_works(broker, name, new_password)

        ok(admin.delete(f"{users}/{name}"), 204)
        refused(admin.get(f"{users}/{name}"), 404)
        refused(admin.delete(f"{users}/{name}"), 404)
        with broker.client(name, new_password) as bob:
            assert bob.get("/v3/clusters").status_code == 401
    assert password not in broker.process.stderr_text()
    assert new_password not in broker.process.stderr_text()


def test_quotas_are_set_listed_filtered_and_removed_over_http(broker: SecuredHttpBroker) -> None:
    quotas = f"{broker.cluster_path}/client-quotas"
    with broker.admin_http() as admin:
        body = {
            "entity": {"user": "alice", "client-id": None},
            "set": {"producer_byte_rate": 1048576, "request_percentage": 12.5},
        }
        document = ok(admin.post(quotas, json=body))
        assert document["kind"] == "WeirClientQuota"
        assert document["entity"] == {"client-id": None, "user": "alice"}
        assert document["values"] == {"producer_byte_rate": 1048576.0, "request_percentage": 12.5}
        ok(admin.post(quotas, json={"entity": {"user": None}, "set": {"consumer_byte_rate": 2048}}))

        listed = ok(admin.get(quotas))
        assert listed["kind"] == "WeirClientQuotaList"
        entities = [row["entity"] for row in listed["data"]]
        assert {"user": "alice", "client-id": None} in entities
        assert {"user": None} in entities
        only_alice = ok(admin.get(quotas, params={"user": "alice"}))["data"]
        assert [row["entity"] for row in only_alice] == [{"client-id": None, "user": "alice"}]

        validated = {
            "entity": {"user": None},
            "set": {"consumer_byte_rate": 1},
            "validate_only": True,
        }
        assert ok(admin.post(quotas, json=validated))["values"] == {"consumer_byte_rate": 2048.0}
        removed = {"entity": {"user": None}, "remove": ["consumer_byte_rate"]}
        assert ok(admin.post(quotas, json=removed))["values"] == {}
        assert {"user": None} not in [row["entity"] for row in ok(admin.get(quotas))["data"]]
    with broker.client("alice", ALICE_PASSWORD) as alice:
        refused(alice.get(quotas), 403)


def test_what_the_acls_deny_is_403(broker: SecuredHttpBroker) -> None:
    """alice may DESCRIBE the cluster: she lists the users; she may not ALTER it, nor
    read or change its configs (the quotas)."""
    users = f"{broker.cluster_path}/users"
    quotas = f"{broker.cluster_path}/client-quotas"
    with broker.client("alice", ALICE_PASSWORD) as alice:
        assert "alice" in {u["user_name"] for u in ok(alice.get(users))["data"]}
        ok(alice.get(f"{users}/alice"))
        refused(alice.post(users, json={"user_name": "eve", "password": "eve-secret"}), 403)
        refused(alice.put(f"{users}/alice", json={"password": "mine-now"}), 403)
        refused(alice.put(f"{users}/admin", json={"password": "mine-now"}), 403)
        refused(alice.delete(f"{users}/admin"), 403)
        refused(alice.get(quotas), 403)
        refused(
            alice.post(
                quotas, json={"entity": {"user": "alice"}, "set": {"producer_byte_rate": 1}}
            ),
            403,
        )
    with broker.client(None) as anonymous:
        assert anonymous.get(users).status_code == 401
    # Her attempts changed nothing: both still log in with their passwords.
    assert kafka_login_works(broker, "admin", ADMIN_PASSWORD)
    assert kafka_login_works(broker, "alice", ALICE_PASSWORD)


def test_the_cluster_operations_the_caller_may_do_are_its_acls(broker: SecuredHttpBroker) -> None:
    path = f"{broker.cluster_path}/authorized-operations"
    with broker.client("alice", ALICE_PASSWORD) as alice:
        assert ok(alice.get(path))["cluster"] == ["DESCRIBE"]
    with broker.admin_http() as admin:
        document = ok(admin.get(path))
    assert document["kind"] == "WeirAuthorizedOperations"
    assert {"ALTER", "DESCRIBE", "ALTER_CONFIGS", "CREATE"} <= set(document["cluster"])


SECRET = "hostile-pw-7f3a"
HOSTILE_USER_BODIES: list[object] = [
    [],
    "text",
    {},
    {"user_name": "x"},
    {"password": SECRET},
    {"user_name": "x", "password": SECRET, "iterations": 1},
    {"user_name": "", "password": SECRET},
    {"user_name": 7, "password": SECRET},
    {"user_name": "x" * 2000, "password": SECRET},
    {"user_name": "x", "password": ""},
    {"user_name": "x", "password": 12345},
    {"user_name": "x", "password": ["p"]},
    {"user_name": "x", "password": SECRET + "q" * 2000},
    {"user_name": "x", "password": SECRET, "mechanisms": []},
    {"user_name": "x", "password": SECRET, "mechanisms": "SCRAM-SHA-256"},
    {"user_name": "x", "password": SECRET, "mechanisms": ["MD5"]},
    {"user_name": "x", "password": SECRET, "mechanisms": [1]},
    {"user_name": "x", "password": SECRET, "iterations": 10},
    {"user_name": "x", "password": SECRET, "iterations": 10**9},
    {"user_name": "x", "password": SECRET, "iterations": True},
    {"user_name": "x", "password": SECRET, "iterations": "4096"},
]
HOSTILE_QUOTA_BODIES: list[object] = [
    {},
    {"entity": "user"},
    {"entity": {}},
    {"entity": {"group": "g"}, "set": {"producer_byte_rate": 1}},
    {"entity": {"user": ""}, "set": {"producer_byte_rate": 1}},
    {"entity": {"user": 5}, "set": {"producer_byte_rate": 1}},
    {"entity": {"user": "a"}},
    {"entity": {"user": "a"}, "set": []},
    {"entity": {"user": "a"}, "set": {"producer_byte_rate": "1"}},
    {"entity": {"user": "a"}, "set": {"producer_byte_rate": True}},
    {"entity": {"user": "a"}, "set": {"producer_byte_rate": -1}},
    {"entity": {"user": "a"}, "set": {"producer_byte_rate": 1.5}},
    {"entity": {"user": "a"}, "set": {"no_such_quota": 1}},
    {"entity": {"user": "a"}, "set": {"k" * 100: 1}},
    {"entity": {"user": "a"}, "set": {f"k{i}": 1 for i in range(50)}},
    {"entity": {"user": "a"}, "remove": "producer_byte_rate"},
    {"entity": {"user": "a"}, "remove": [3]},
    {"entity": {"user": "a"}, "set": {"producer_byte_rate": 1}, "remove": ["producer_byte_rate"]},
    {"entity": {"user": "a", "ip": "127.0.0.1"}, "set": {"producer_byte_rate": 1}},
    {"entity": {"ip": "not-an-ip"}, "set": {"connection_creation_rate": 1}},
    {"entity": {"user": "a"}, "set": {"producer_byte_rate": 1}, "validate_only": "yes"},
]


def test_hostile_bodies_are_400_and_never_echo_a_password(broker: SecuredHttpBroker) -> None:
    users = f"{broker.cluster_path}/users"
    quotas = f"{broker.cluster_path}/client-quotas"
    with broker.admin_http() as admin:
        for body in HOSTILE_USER_BODIES:
            answer = admin.post(users, json=body)
            refused(answer, 400)
            assert SECRET not in answer.text, body
        refused(admin.put(f"{users}/x", json={"password": ""}), 400)
        refused(admin.put(f"{users}/x", content=b"{not json"), 400)
        for body in HOSTILE_QUOTA_BODIES:
            assert refused(admin.post(quotas, json=body), 400), body
        # JSON's non-finite extensions, which Python's parser accepts.
        for number in (b"NaN", b"Infinity", b"-Infinity"):
            raw = b'{"entity": {"user": "a"}, "set": {"request_percentage": ' + number + b"}}"
            refused(
                admin.post(quotas, content=raw, headers={"content-type": "application/json"}), 400
            )
        big = json.dumps({"user_name": "x", "password": "q" * 100_000})
        answer = admin.post(users, content=big, headers={"content-type": "application/json"})
        assert answer.status_code == 413
        refused(admin.get(quotas, params={"user": ""}), 400)
        refused(admin.get(quotas, params=[("user", "a"), ("user", "b")]), 400)
        # Nothing was stored by any of them.
        assert "x" not in {u["user_name"] for u in ok(admin.get(users))["data"]}
        assert {"user": "a"} not in [row["entity"] for row in ok(admin.get(quotas))["data"]]
