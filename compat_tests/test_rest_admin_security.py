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
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from compat_tests.secured_http_broker import ADMIN_PASSWORD, CLIENT_WAIT_S, SecuredHttpBroker

pytestmark = pytest.mark.timeout(90)

ALICE_PASSWORD = "alice-secret"


class SecuredBroker(SecuredHttpBroker):
    suffix = uuid.uuid4().hex[:6]
    alice_topic = f"alice-{suffix}"
    other_topic = f"other-{suffix}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    """alice, her one ACL (DESCRIBE on her topic), and two topics."""
    base = tmp_path_factory.mktemp("rest-admin-security")
    with SecuredBroker.running(base / "broker") as secured:
        secured.create_users({"alice": ALICE_PASSWORD})
        secured.grant("User:alice", (ResourceType.TOPIC, secured.alice_topic),
                      [AclOperation.DESCRIBE])  # fmt: skip
        secured.create_topics(secured.alice_topic, secured.other_topic)
        yield secured


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
    broker.grant("User:alice", (ResourceType.GROUP, group), [AclOperation.DESCRIBE])
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
