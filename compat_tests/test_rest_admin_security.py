"""The REST admin API with security on, against a real `weir serve`: each call runs
as the HTTP caller (HTTP Basic: a user's SCRAM password) under the Kafka API's own
ACLs, so what a user may not do over Kafka is 403 (error_code 40301) over HTTP, a
list holds only what the user may describe, and ACLs made over HTTP are the
Kafka API's ACLs.

One broker: a SASL_PLAINTEXT Kafka listener, ACLs on with `admin` as super user,
`alice` allowed to DESCRIBE one topic and nothing else."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
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

pytestmark = pytest.mark.timeout(90)

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"
CLIENT_WAIT_S = 15.0


class SecuredBroker:
    def __init__(self, process: WeirProcess, kafka_port: int) -> None:
        self.process = process
        self.kafka_port = kafka_port
        suffix = uuid.uuid4().hex[:6]
        self.alice_topic = f"alice-{suffix}"
        self.other_topic = f"other-{suffix}"
        self.cluster_path = ""

    def admin_config(self) -> dict[str, object]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.kafka_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD,
        }

    def client(self, user: str | None, password: str = "") -> httpx.Client:
        auth = None if user is None else httpx.BasicAuth(user, password)
        limits = httpx.Limits(max_keepalive_connections=0)
        return httpx.Client(base_url=self.process.http_url, auth=auth, timeout=30, limits=limits)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    base = tmp_path_factory.mktemp("rest-admin-security")
    [kafka_port] = free_ports(1)
    settings = f"""
[security]
listeners = "SASL_PLAINTEXT://127.0.0.1:{kafka_port}"
sasl_enabled_mechanisms = ["SCRAM-SHA-512"]
authorizer_enabled = true
super_users = ["User:admin"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
connection_failed_authentication_delay_ms = 10
"""
    process = WeirProcess.configured(base / "broker", settings)
    process.start()
    try:
        secured = SecuredBroker(process, kafka_port)
        _set_up(secured)
        yield secured
    finally:
        process.stop()


def _set_up(broker: SecuredBroker) -> None:
    """alice, her one ACL (DESCRIBE on her topic), and two topics."""
    admin = AdminClient(broker.admin_config())
    alice = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), ALICE_PASSWORD.encode()
    )
    admin.alter_user_scram_credentials([alice])["alice"].result(timeout=CLIENT_WAIT_S)
    acl = AclBinding(ResourceType.TOPIC, broker.alice_topic, ResourcePatternType.LITERAL,
                     "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)  # fmt: skip
    for future in admin.create_acls([acl]).values():
        future.result(timeout=CLIENT_WAIT_S)
    topics = [NewTopic(broker.alice_topic, 1, 1), NewTopic(broker.other_topic, 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result(timeout=CLIENT_WAIT_S)
    with broker.client("admin", ADMIN_PASSWORD) as http:
        cluster_id = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    broker.cluster_path = f"/v3/clusters/{cluster_id}"


def forbidden(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 403, response.text
    document = response.json()
    assert document["error_code"] == 40301, document
    return dict(document)


def test_without_credentials_the_admin_api_answers_401(broker: SecuredBroker) -> None:
    with broker.client(None) as http:
        assert http.get(f"{broker.cluster_path}/topics").status_code == 401
        assert http.get("/v3/clusters").status_code == 401


def test_what_the_acls_deny_is_403(broker: SecuredBroker) -> None:
    path = broker.cluster_path
    with broker.client("alice", ALICE_PASSWORD) as alice:
        assert alice.get(f"{path}/topics/{broker.alice_topic}").status_code == 200
        forbidden(alice.get(f"{path}/topics/{broker.other_topic}"))
        forbidden(alice.post(f"{path}/topics", json={"topic_name": f"{broker.alice_topic}-new"}))
        forbidden(alice.delete(f"{path}/topics/{broker.alice_topic}"))
        forbidden(alice.get(f"{path}/topics/{broker.alice_topic}/configs"))
        forbidden(alice.get(f"{path}/acls"))
        listed = alice.get(f"{path}/topics").json()["data"]
        assert [t["topic_name"] for t in listed] == [broker.alice_topic]
    with broker.client("admin", ADMIN_PASSWORD) as admin:
        listed = admin.get(f"{path}/topics").json()["data"]
        assert {broker.alice_topic, broker.other_topic} <= {t["topic_name"] for t in listed}


def test_acls_made_over_http_are_the_kafka_apis_acls(broker: SecuredBroker) -> None:
    path = broker.cluster_path
    acl = {
        "resource_type": "TOPIC",
        "resource_name": broker.other_topic,
        "pattern_type": "LITERAL",
        "principal": "User:alice",
        "host": "*",
        "operation": "DESCRIBE",
        "permission": "ALLOW",
    }
    with (
        broker.client("admin", ADMIN_PASSWORD) as admin,
        broker.client("alice", ALICE_PASSWORD) as alice,
    ):
        forbidden(alice.get(f"{path}/topics/{broker.other_topic}"))
        created = admin.post(f"{path}/acls", json=acl)
        assert created.status_code == 201, created.text
        assert created.json()["kind"] == "KafkaAcl"
        kafka_admin = AdminClient(broker.admin_config())
        found = kafka_admin.describe_acls(
            AclBindingFilter(
                ResourceType.TOPIC,
                broker.other_topic,
                ResourcePatternType.ANY,
                "User:alice",
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )  # fmt: skip
        ).result(timeout=CLIENT_WAIT_S)
        assert [b.operation for b in found] == [AclOperation.DESCRIBE]
        assert alice.get(f"{path}/topics/{broker.other_topic}").status_code == 200

        query = {"principal": "User:alice", "resource_name": broker.other_topic}
        listed = admin.get(f"{path}/acls", params=query).json()
        assert listed["kind"] == "KafkaAclList"
        assert [a["operation"] for a in listed["data"]] == ["DESCRIBE"]
        deleted = admin.delete(f"{path}/acls", params={"resource_type": "TOPIC", **query})
        assert deleted.status_code == 200, deleted.text
        assert [a["resource_name"] for a in deleted.json()["data"]] == [broker.other_topic]
        forbidden(alice.get(f"{path}/topics/{broker.other_topic}"))


def test_group_reset_and_delete_need_the_kafka_apis_group_acls(broker: SecuredBroker) -> None:
    """alice may DESCRIBE the group (so she sees it and a dry run of its reset) but
    not READ it (OffsetCommit) or DELETE it (DeleteGroups); a group she has no ACL
    on is not listed at all."""
    path = broker.cluster_path
    group, hidden = f"alice-group-{uuid.uuid4().hex[:6]}", f"hidden-{uuid.uuid4().hex[:6]}"
    for name in (group, hidden):
        consumer = Consumer({**broker.admin_config(), "group.id": name})
        try:
            offsets = [TopicPartition(broker.alice_topic, 0, 0)]
            consumer.commit(offsets=offsets, asynchronous=False)
        finally:
            consumer.close()
    acl = AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL,
                     "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)  # fmt: skip
    kafka_admin = AdminClient(broker.admin_config())  # alive until the result
    for future in kafka_admin.create_acls([acl]).values():
        future.result(timeout=CLIENT_WAIT_S)
    groups = f"{path}/consumer-groups"
    with broker.client("alice", ALICE_PASSWORD) as alice:
        listed = alice.get(groups, params={"q": "-", "page_size": 500}).json()["data"]
        names = {g["consumer_group_id"] for g in listed}
        assert group in names and hidden not in names
        dry_run = alice.post(f"{groups}/{group}/reset-offsets", json={"strategy": "latest"})
        assert dry_run.status_code == 200, dry_run.text
        apply = {"strategy": "latest", "dry_run": False}
        forbidden(alice.post(f"{groups}/{group}/reset-offsets", json=apply))
        forbidden(alice.delete(f"{groups}/{group}"))
        forbidden(alice.post(f"{groups}/{hidden}/reset-offsets", json=apply))
        forbidden(alice.delete(f"{groups}/{hidden}"))
    with broker.client("admin", ADMIN_PASSWORD) as admin:
        assert admin.delete(f"{groups}/{group}").status_code == 204


def test_the_consoles_cluster_views_need_describe_on_the_cluster_and_pages_hold_what_one_may_see(
    broker: SecuredBroker,
) -> None:
    path = broker.cluster_path
    with broker.client("alice", ALICE_PASSWORD) as alice:
        forbidden(alice.get(f"{path}/health"))
        forbidden(alice.get(f"{path}/brokers/1/stats"))
        page = alice.get(f"{path}/topics", params={"page_size": 10}).json()
        assert [t["topic_name"] for t in page["data"]] == [broker.alice_topic]
        assert page["metadata"]["total"] == 1
    with broker.client("admin", ADMIN_PASSWORD) as admin:
        assert admin.get(f"{path}/health").json()["brokers"][0]["live"] is True
        stats = admin.get(f"{path}/brokers/1/stats", params={"topics": broker.other_topic})
        assert stats.json()["topics"][0]["topic_name"] == broker.other_topic
