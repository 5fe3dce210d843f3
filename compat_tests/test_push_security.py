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

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, ResourceType

from compat_tests.harness import unique_topic_name
from compat_tests.push_receiver import PushReceiver
from compat_tests.secured_http_broker import CLIENT_WAIT_S, CLUSTER, SecuredHttpBroker

pytestmark = pytest.mark.timeout(90)

PASSWORDS = {"hooker": "hooker-secret", "reader": "reader-secret"}
RECORDS = 20


class Secured(SecuredHttpBroker):
    topic = unique_topic_name("push-acl")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with Secured.running(tmp_path_factory.mktemp("push-security") / "b") as secured:
        secured.create_users(PASSWORDS)
        group = "weir-push-hook"
        for user in PASSWORDS:
            for resource in ((ResourceType.TOPIC, secured.topic), (ResourceType.GROUP, group)):
                secured.grant(f"User:{user}", resource, [AclOperation.READ])
        secured.grant("User:hooker", CLUSTER, [AclOperation.ALTER])
        secured.create_topics(secured.topic)
        yield secured


def test_creating_needs_alter_on_the_cluster_and_deliveries_run_as_the_broker(
    secured: Secured,
) -> None:
    receiver = PushReceiver().start()
    try:
        body = {"name": "hook", "topic": secured.topic, "url": receiver.url, "start": "earliest"}
        with secured.client("reader") as http:
            refused = http.post("/v1/subscriptions", json=body)
        assert refused.status_code == 403, refused.text
        with secured.client("hooker") as http:
            created = http.post("/v1/subscriptions", json=body)
        assert created.status_code == 201, created.text
        receiver.secret = created.json()["secret"]
        producer = Producer(secured.kafka_config())
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
