"""Push subscriptions with security on, against a real `weir serve`: creating one
needs ALTER on the cluster (the broker will call a URL the caller chose) and READ on
the topic and the subscription's group; the broker's deliveries then run as the
broker itself, whatever the creator may do later.

One broker for the module: a SASL_PLAINTEXT Kafka listener (users and ACLs are set
up over it), ACLs on with `admin` as super user; `hooker` has what creating needs,
`reader` only READ on the topic and the group."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
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

from compat_tests.harness import WeirProcess, free_ports, unique_topic_name
from compat_tests.push_receiver import PushReceiver

pytestmark = pytest.mark.timeout(90)

ADMIN_PASSWORD = "admin-secret"
PASSWORDS = {"hooker": "hooker-secret", "reader": "reader-secret"}
CLIENT_WAIT_S = 15.0
RECORDS = 20


class Secured:
    def __init__(self, process: WeirProcess, kafka_port: int) -> None:
        self.process = process
        self.topic = unique_topic_name("push-acl")
        self.kafka = {
            "bootstrap.servers": f"127.0.0.1:{kafka_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD,
        }
        self.admin = AdminClient(self.kafka)

    def http(self, user: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.process.http_url,
            auth=(user, PASSWORDS[user]),
            trust_env=False,
            timeout=10.0,
        )


def allow(user: str, kind: Any, name: str, operation: Any) -> AclBinding:
    return AclBinding(kind, name, ResourcePatternType.LITERAL, f"User:{user}", "*", operation,
                      AclPermissionType.ALLOW)  # fmt: skip


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    [kafka_port] = free_ports(1)
    settings = f"""
[security]
listeners = "SASL_PLAINTEXT://127.0.0.1:{kafka_port}"
sasl_enabled_mechanisms = ["SCRAM-SHA-512"]
authorizer_enabled = true
super_users = ["User:admin"]
inter_broker_sasl_username = "admin"
inter_broker_sasl_password = "{ADMIN_PASSWORD}"
"""
    process = WeirProcess.configured(tmp_path_factory.mktemp("push-security") / "b", settings)
    process.start()
    try:
        secured = Secured(process, kafka_port)
        upserts = [
            UserScramCredentialUpsertion(
                name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
            )
            for name, password in PASSWORDS.items()
        ]
        for future in secured.admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=CLIENT_WAIT_S)
        group = "weir-push-hook"
        acls = [
            allow(user, kind, name, AclOperation.READ)
            for user in PASSWORDS
            for kind, name in ((ResourceType.TOPIC, secured.topic), (ResourceType.GROUP, group))
        ] + [allow("hooker", ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)]
        for future in secured.admin.create_acls(acls).values():
            future.result(timeout=CLIENT_WAIT_S)
        for future in secured.admin.create_topics([NewTopic(secured.topic, 1, 1)]).values():
            future.result(timeout=CLIENT_WAIT_S)
        yield secured
    finally:
        process.stop()


def test_creating_needs_alter_on_the_cluster_and_deliveries_run_as_the_broker(
    secured: Secured,
) -> None:
    receiver = PushReceiver().start()
    try:
        body = {"name": "hook", "topic": secured.topic, "url": receiver.url, "start": "earliest"}
        with secured.http("reader") as http:
            refused = http.post("/v1/subscriptions", json=body)
        assert refused.status_code == 403, refused.text
        with secured.http("hooker") as http:
            created = http.post("/v1/subscriptions", json=body)
        assert created.status_code == 201, created.text
        receiver.secret = created.json()["secret"]
        producer = Producer(secured.kafka)
        for i in range(RECORDS):
            producer.produce(secured.topic, value=f"v{i}".encode())
        assert producer.flush(CLIENT_WAIT_S) == 0
        deadline = time.monotonic() + 30
        while len({r["offset"] for d in receiver.snapshot() for r in d.body["records"]}) < RECORDS:
            assert time.monotonic() < deadline, "not every record was pushed"
            time.sleep(0.2)
        assert all(d.verified for d in receiver.snapshot())
    finally:
        receiver.stop()
