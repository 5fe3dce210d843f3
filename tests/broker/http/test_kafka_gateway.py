"""The HTTP APIs' Kafka requests (`KafkaGateway`) run as the HTTP caller, under the
Kafka listener's own authorization rules: what an ACL denies a Kafka client it
denies an HTTP caller, and what it allows runs through the same handler."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import attach_group_service
from weir.broker.handlers.request_authorization import Session
from weir.broker.http.kafka_gateway import BROKER, GatewayError, HttpCaller, gateway_of
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.security.acl import AclOperation, ResourceType
from weir.security.principal import user
from weir.wire.api_keys import ApiKey

from ..authorization.authorized_calls import allow, secure


@pytest.fixture
async def broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path, offsets_topic_partition_count=1))
    broker.open_logs()
    groups = attach_group_service(broker)
    await nursery.start(broker.flusher.run)
    await groups.prepare()
    broker.create_topic(broker.controller.plan_topic("orders", 1, 1))
    broker.create_topic(broker.controller.plan_topic("secret", 1, 1))
    yield broker
    broker.close()


def caller(name: str) -> HttpCaller:
    return HttpCaller(Session(user(name), "127.0.0.1", "HTTP"))


def produce_body(topic: str) -> dict[str, object]:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v", [])])}],
            }
        ],
    }


def partition_errors(response: object) -> dict[str, int]:
    return {
        topic.name: partition.error_code
        for topic in response.responses  # type: ignore[attr-defined]
        for partition in topic.partition_responses
    }


async def test_a_produce_allowed_by_an_acl_is_appended_and_one_denied_is_refused(
    broker: Broker,
) -> None:
    secure(broker, [allow("alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")])
    gateway = gateway_of(broker)
    allowed = await gateway.send(caller("alice"), ApiKey.PRODUCE, 9, produce_body("orders"))
    assert partition_errors(allowed) == {"orders": ErrorCode.NONE}
    denied = await gateway.send(caller("alice"), ApiKey.PRODUCE, 9, produce_body("secret"))
    assert partition_errors(denied) == {"secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    replica = broker.partition("orders", 0)
    assert replica is not None and replica.high_watermark == 1


async def test_metadata_shows_an_http_caller_only_the_topics_it_may_describe(
    broker: Broker,
) -> None:
    secure(broker, [allow("bob", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders")])
    response = await gateway_of(broker).send(
        caller("bob"), ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False}
    )
    assert [topic.name for topic in response.topics] == ["orders"]


async def test_with_no_authorizer_every_request_runs(broker: Broker) -> None:
    response = await gateway_of(broker).send(
        HttpCaller(None), ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False}
    )
    names = {topic.name for topic in response.topics}
    assert {"orders", "secret"} <= names


async def test_a_malformed_request_or_an_unserved_version_is_a_gateway_error(
    broker: Broker,
) -> None:
    gateway = gateway_of(broker)
    with pytest.raises(GatewayError):
        await gateway.send(HttpCaller(None), ApiKey.METADATA, 12, {"topics": "not a list"})
    with pytest.raises(GatewayError):
        await gateway.send(HttpCaller(None), ApiKey.METADATA, 99, {"topics": None})


async def test_a_partitions_leader_on_a_single_broker_is_itself(broker: Broker) -> None:
    gateway = gateway_of(broker)
    assert gateway.leader_of("orders", 0) == broker.config.node_id
    assert gateway.leader_of("orders", 1) is None
    assert gateway.leader_of("nope", 0) is None


async def test_the_broker_itself_is_not_checked_against_acls(broker: Broker) -> None:
    secure(broker)  # deny everything to everyone but the super user
    gateway = gateway_of(broker)
    denied = await gateway.send(caller("mallory"), ApiKey.PRODUCE, 9, produce_body("orders"))
    assert partition_errors(denied) == {"orders": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    allowed = await gateway.send(BROKER, ApiKey.PRODUCE, 9, produce_body("orders"))
    assert partition_errors(allowed) == {"orders": ErrorCode.NONE}
