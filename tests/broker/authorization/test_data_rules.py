"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, Metadata and DeleteRecords
under ACLs: Kafka's errors in Kafka's places, and nothing done for the refused."""

from __future__ import annotations

from typing import Any

from weir.broker.broker import Broker
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.security.acl import AclOperation as Op
from weir.security.acl import ResourceType
from weir.wire.protocol import ApiKey

from .authorized_calls import ADMIN, allow, secure, send

TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def produce_body(*topics: str, transactional_id: str | None = None, **batch: Any) -> Any:
    records = build_batch([(b"k", b"v", [])], **batch)
    return {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [
            {"name": t, "partition_data": [{"index": 0, "records": records}]} for t in topics
        ],
    }


def errors_by_topic(
    topics: Any, partitions: str, error: str = "error_code"
) -> dict[str, list[int]]:
    return {t.name: [getattr(p, error) for p in getattr(t, partitions)] for t in topics}


def log_end(broker: Broker, topic: str) -> int:
    replica = broker.lookup(topic, 0)
    assert not isinstance(replica, ErrorCode)
    return replica.log.log_end_offset


async def test_produce_writes_allowed_topics_and_refuses_the_others_per_partition(
    broker: Broker,
) -> None:
    secure(broker, [allow("alice", Op.WRITE, TOPIC, "orders")])
    response = await send(broker, "alice", ApiKey.PRODUCE, 9, produce_body("orders", "secret"))
    assert errors_by_topic(response.responses, "partition_responses") == {
        "orders": [ErrorCode.NONE],
        "secret": [TAF],
    }
    assert (log_end(broker, "orders"), log_end(broker, "secret")) == (1, 0)


async def test_produce_of_transactional_records_needs_write_on_the_transactional_id(
    broker: Broker,
) -> None:
    secure(broker, [allow("alice", Op.WRITE, TOPIC, "orders")])
    body = produce_body(
        "orders", transactional_id="tx", producer_id=1, producer_epoch=0, base_sequence=0,
        is_transactional=True,
    )  # fmt: skip
    response = await send(broker, "alice", ApiKey.PRODUCE, 9, body)
    assert errors_by_topic(response.responses, "partition_responses") == {
        "orders": [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
    }
    assert log_end(broker, "orders") == 0


async def test_a_super_user_produces_anywhere(broker: Broker) -> None:
    secure(broker)
    response = await send(broker, ADMIN, ApiKey.PRODUCE, 9, produce_body("orders", "secret"))
    assert errors_by_topic(response.responses, "partition_responses") == {
        "orders": [ErrorCode.NONE],
        "secret": [ErrorCode.NONE],
    }


def fetch_body(*topics: str, replica_id: int = -1) -> Any:
    return {
        "replica_id": replica_id,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {"topic": t, "partitions": [{"partition": 0, "fetch_offset": 0,
                                         "partition_max_bytes": 1 << 20}]}
            for t in topics
        ],
    }  # fmt: skip


async def test_fetch_needs_read_on_each_topic(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.READ, TOPIC, "orders")])
    response = await send(broker, "alice", ApiKey.FETCH, 12, fetch_body("orders", "secret"))
    errors = {t.topic: [p.error_code for p in t.partitions] for t in response.responses}
    assert errors == {"orders": [ErrorCode.NONE], "secret": [TAF]}


async def test_a_follower_fetch_without_cluster_action_is_refused_for_every_partition(
    broker: Broker,
) -> None:
    secure(broker, [allow("alice", Op.READ, TOPIC, "orders")])
    response = await send(broker, "alice", ApiKey.FETCH, 12, fetch_body("orders", replica_id=1))
    assert response.error_code == ErrorCode.NONE
    assert [p.error_code for t in response.responses for p in t.partitions] == [TAF]


def list_offsets_body(*topics: str) -> Any:
    return {
        "replica_id": -1,
        "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]} for t in topics
        ],
    }


async def test_list_offsets_needs_describe_on_each_topic(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.DESCRIBE, TOPIC, "orders")])
    response = await send(
        broker, "alice", ApiKey.LIST_OFFSETS, 7, list_offsets_body("orders", "secret")
    )
    assert errors_by_topic(response.topics, "partitions") == {
        "orders": [ErrorCode.NONE],
        "secret": [TAF],
    }


def leader_epoch_body(*topics: str) -> Any:
    return {
        "replica_id": -1,
        "topics": [
            {"topic": t, "partitions": [{"partition": 0, "leader_epoch": 0}]} for t in topics
        ],
    }


async def test_offset_for_leader_epoch_needs_describe_or_cluster_action(broker: Broker) -> None:
    secure(
        broker,
        [
            allow("alice", Op.DESCRIBE, TOPIC, "orders"),
            allow("bob", Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster"),
        ],
    )
    body = leader_epoch_body("orders", "secret")
    alice = await send(broker, "alice", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body)
    assert {t.topic: [p.error_code for p in t.partitions] for t in alice.topics} == {
        "orders": [ErrorCode.NONE],
        "secret": [TAF],
    }
    bob = await send(broker, "bob", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body)
    assert {t.topic: [p.error_code for p in t.partitions] for t in bob.topics} == {
        "orders": [ErrorCode.NONE],
        "secret": [ErrorCode.NONE],
    }


def metadata_body(topics: list[str] | None, auto_create: bool = False, ops: bool = False) -> Any:
    return {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": auto_create,
        "include_topic_authorized_operations": ops,
    }


async def test_metadata_for_all_topics_leaves_out_the_undescribable(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.READ, TOPIC, "orders")])
    response = await send(broker, "alice", ApiKey.METADATA, 12, metadata_body(None))
    assert [t.name for t in response.topics] == ["orders"]


async def test_metadata_answers_a_named_undescribable_topic_authorization_failed(
    broker: Broker,
) -> None:
    secure(broker, [allow("alice", Op.DESCRIBE, TOPIC, "orders")])
    response = await send(
        broker, "alice", ApiKey.METADATA, 12, metadata_body(["orders", "secret", "missing"])
    )
    answered = {t.name: (t.error_code, len(t.partitions)) for t in response.topics}
    # A topic it may not describe is refused whether or not it exists.
    assert answered == {
        "orders": (ErrorCode.NONE, 2),
        "secret": (TAF, 0),
        "missing": (TAF, 0),
    }


async def test_metadata_auto_creates_only_with_create_on_the_topic_or_cluster(
    broker: Broker,
) -> None:
    secure(
        broker,
        [
            allow("alice", Op.DESCRIBE, TOPIC, "*"),
            allow("bob", Op.DESCRIBE, TOPIC, "*"),
            allow("bob", Op.CREATE, TOPIC, "new-"),
        ],
    )
    body = metadata_body(["new-a"], auto_create=True)
    alice = await send(broker, "alice", ApiKey.METADATA, 12, body)
    assert [(t.name, t.error_code) for t in alice.topics] == [("new-a", TAF)]
    assert broker.controller.topic("new-a") is None
    bob = await send(broker, "bob", ApiKey.METADATA, 12, metadata_body(["new-"], auto_create=True))
    assert [(t.name, t.error_code) for t in bob.topics] == [("new-", ErrorCode.NONE)]
    assert broker.controller.topic("new-") is not None


async def test_metadata_reports_topic_operations_from_the_acls(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.READ, TOPIC, "orders")])
    response = await send(broker, "alice", ApiKey.METADATA, 12, metadata_body(["orders"], ops=True))
    [topic] = response.topics
    # READ, and the DESCRIBE it implies.
    assert topic.topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)


async def test_delete_records_needs_delete_on_each_topic(broker: Broker) -> None:
    secure(
        broker, [allow("alice", Op.WRITE, TOPIC, "*"), allow("alice", Op.DELETE, TOPIC, "orders")]
    )
    await send(broker, "alice", ApiKey.PRODUCE, 9, produce_body("orders", "secret"))
    body = {
        "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "offset": 1}]}
            for t in ("orders", "secret")
        ],
        "timeout_ms": 5000,
    }
    response = await send(broker, "alice", ApiKey.DELETE_RECORDS, 2, body)
    assert errors_by_topic(response.topics, "partitions") == {
        "orders": [ErrorCode.NONE],
        "secret": [TAF],
    }
    secret = broker.lookup("secret", 0)
    assert not isinstance(secret, ErrorCode) and secret.log.log_start_offset == 0
