"""The share-group offsets APIs under ACLs, through the dispatcher, as Kafka 4.4's
KafkaApis checks them (read from its bytecode: handleDescribeShareGroupOffsetsRequest,
handleAlterShareGroupOffsetsRequest, handleDeleteShareGroupOffsetsRequest):
DESCRIBE group + DESCRIBE topics, READ group + READ topics, DELETE group + READ topics."""

from __future__ import annotations

import uuid
from typing import Any

from weir.broker.broker import Broker
from weir.format.errors import ErrorCode
from weir.security.acl import AclOperation as Op
from weir.security.acl import ResourceType
from weir.sharecoord.share_state import ShareState
from weir.wire.protocol import ApiKey

from ..authorization.authorized_calls import allow, secure, send
from .test_share_admin import broker, empty_share_group, heartbeat, store_state, topic_id

__all__ = ["broker"]  # the fixture, shared with test_share_admin

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
TAF, GAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED
ZERO_UUID = uuid.UUID(int=0)


def add_secret_topic(broker: Broker) -> None:
    broker.create_topic(broker.controller.plan_topic("secret", 1, 1))


async def test_describe_offsets_needs_describe_on_the_group_and_each_topic(
    broker: Broker,
) -> None:
    add_secret_topic(broker)
    await empty_share_group(broker, "sg")
    await store_state(broker, "sg", 0, ShareState(4, 0, 0))
    await store_state(broker, "sg", 0, ShareState(1, 0, 0), topic="secret")
    secure(
        broker,
        [allow("bob", Op.DESCRIBE, GROUP, "sg"), allow("bob", Op.DESCRIBE, TOPIC, "t")],
    )
    named = [
        {"topic_name": "secret", "partitions": [0]},
        {"topic_name": "t", "partitions": [0]},
    ]
    body = {
        "groups": [
            {"group_id": "sg", "topics": named},
            {"group_id": "hidden", "topics": None},
            {"group_id": "sg", "topics": None},
        ]
    }
    response = await send(broker, "bob", ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, body)
    hidden, explicit, everything = response.groups
    assert (hidden.group_id, hidden.error_code, hidden.error_message, hidden.topics) == (
        "hidden",
        GAF,
        None,
        [],
    )
    # A refused topic comes after the others, start offset and lag -1.
    assert [
        (t.topic_name, p.start_offset, p.lag, p.error_code, p.error_message)
        for t in explicit.topics
        for p in t.partitions
    ] == [("t", 4, 6, 0, None), ("secret", -1, -1, TAF, "Topic authorization failed.")]
    # Every topic (null): the refused one is left out, silently.
    assert [t.topic_name for t in everything.topics] == ["t"]


def alter_body(group_id: str) -> Any:
    return {
        "group_id": group_id,
        "topics": [
            {"topic_name": "secret", "partitions": [{"partition_index": 0, "start_offset": 0}]},
            {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 2}]},
        ],
    }


async def test_alter_offsets_needs_read_on_the_group_and_each_topic(broker: Broker) -> None:
    add_secret_topic(broker)
    await empty_share_group(broker, "sg")
    secure(
        broker,
        [
            allow("bob", Op.READ, GROUP, "sg"),
            allow("bob", Op.READ, TOPIC, "t"),
            allow("carol", Op.DESCRIBE, GROUP, "sg"),
            allow("carol", Op.READ, TOPIC, "*"),
        ],
    )
    carol = await send(broker, "carol", ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_body("sg"))
    assert (carol.error_code, carol.error_message, carol.responses) == (
        GAF,
        "Group authorization failed.",
        [],
    )
    bob = await send(broker, "bob", ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_body("sg"))
    assert bob.error_code == ErrorCode.NONE
    assert [
        (r.topic_name, r.topic_id, p.error_code, p.error_message)
        for r in bob.responses
        for p in r.partitions
    ] == [
        ("secret", topic_id(broker, "secret"), TAF, "Topic authorization failed."),
        ("t", topic_id(broker), ErrorCode.NONE, None),
    ]


async def test_a_group_level_error_answers_no_refused_topics(broker: Broker) -> None:
    add_secret_topic(broker)
    await heartbeat(broker, "sg", 0)
    secure(broker, [allow("bob", Op.ALL, GROUP, "sg"), allow("bob", Op.READ, TOPIC, "t")])
    altered = await send(broker, "bob", ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter_body("sg"))
    body = {"group_id": "sg", "topics": [{"topic_name": "secret"}, {"topic_name": "t"}]}
    deleted = await send(broker, "bob", ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, body)
    for response in (altered, deleted):
        assert (response.error_code, response.responses) == (ErrorCode.NON_EMPTY_GROUP, [])


async def test_delete_offsets_needs_delete_on_the_group_and_read_on_each_topic(
    broker: Broker,
) -> None:
    add_secret_topic(broker)
    await empty_share_group(broker, "sg")
    await store_state(broker, "sg", 0, ShareState(4, 0, 0))
    secure(
        broker,
        [
            allow("bob", Op.DELETE, GROUP, "sg"),
            allow("bob", Op.READ, TOPIC, "t"),
            allow("carol", Op.READ, GROUP, "sg"),
            allow("carol", Op.READ, TOPIC, "*"),
        ],
    )
    body = {"group_id": "sg", "topics": [{"topic_name": "t"}, {"topic_name": "secret"}]}
    carol = await send(broker, "carol", ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, body)
    assert (carol.error_code, carol.error_message) == (GAF, "Group authorization failed.")
    bob = await send(broker, "bob", ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, body)
    assert bob.error_code == ErrorCode.NONE
    assert [(r.topic_name, r.topic_id, r.error_code) for r in bob.responses] == [
        ("secret", ZERO_UUID, TAF),
        ("t", topic_id(broker), ErrorCode.NONE),
    ]


def share_fetch_body(group_id: str, topics: list[uuid.UUID]) -> Any:
    return {
        "group_id": group_id,
        "member_id": str(uuid.uuid4()),
        "share_session_epoch": 0,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 10,
        "batch_size": 10,
        "topics": [{"topic_id": t, "partitions": [{"partition_index": 0}]} for t in topics],
        "forgotten_topics_data": [],
    }


async def test_share_fetch_needs_read_on_the_group_then_on_each_topic(broker: Broker) -> None:
    """Kafka's handleShareFetchRequest: no READ on the group refuses the whole request;
    a topic without READ is answered TOPIC_AUTHORIZATION_FAILED and never fetched."""
    add_secret_topic(broker)
    readable, secret = topic_id(broker, "t"), topic_id(broker, "secret")
    secure(broker, [allow("bob", Op.READ, GROUP, "sg"), allow("bob", Op.READ, TOPIC, "t")])
    refused = await send(
        broker, "bob", ApiKey.SHARE_FETCH, 2, share_fetch_body("other", [readable])
    )
    assert (refused.error_code, refused.responses) == (GAF, [])
    answer = await send(
        broker, "bob", ApiKey.SHARE_FETCH, 2, share_fetch_body("sg", [secret, readable])
    )
    assert answer.error_code == ErrorCode.NONE
    by_topic = {t.topic_id: t.partitions for t in answer.responses}
    (denied,) = by_topic[secret]
    assert denied.error_code == TAF and denied.acquired_records == []


async def test_share_acknowledge_needs_read_on_the_group_then_on_each_topic(
    broker: Broker,
) -> None:
    add_secret_topic(broker)
    secret = topic_id(broker, "secret")
    secure(broker, [allow("bob", Op.READ, GROUP, "sg")])
    body = {
        "group_id": "sg",
        "member_id": str(uuid.uuid4()),
        "share_session_epoch": 1,
        "topics": [{"topic_id": secret, "partitions": [{"partition_index": 0,
            "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]},
            ]}]}],
    }  # fmt: skip
    answer = await send(broker, "bob", ApiKey.SHARE_ACKNOWLEDGE, 2, body)
    (topic,) = [t for t in answer.responses if t.topic_id == secret]
    (partition,) = topic.partitions
    assert partition.error_code == TAF
    body["group_id"] = "elsewhere"
    refused = await send(broker, "bob", ApiKey.SHARE_ACKNOWLEDGE, 2, body)
    assert refused.error_code == GAF
