"""The group APIs under ACLs: group READ / DESCRIBE / DELETE, then the topics'."""

from __future__ import annotations

from typing import Any

from weir.broker.broker import Broker
from weir.format.errors import ErrorCode
from weir.security.acl import AclOperation as Op
from weir.security.acl import ResourceType
from weir.wire.protocol import ApiKey

from .authorized_calls import allow, secure, send

TOPIC, GROUP, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
CLUSTER = ResourceType.CLUSTER
TAF, GAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED


def commit_body(group_id: str, *topics: str) -> Any:
    return {
        "group_id": group_id,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 5}]}
            for t in topics
        ],
    }


def fetch_offsets_body(group_id: str, topics: list[str] | None) -> Any:
    return {
        "groups": [
            {
                "group_id": group_id,
                "topics": None
                if topics is None
                else [{"name": t, "partition_indexes": [0]} for t in topics],
            }
        ]
    }


def committed(broker: Broker, group_id: str) -> dict[tuple[str, int], int]:
    assert broker.groups is not None
    stored = broker.groups.committed_offsets(group_id)  # type: ignore[attr-defined]
    return {key: offset.offset for key, offset in stored.items()}


async def test_offset_commit_needs_read_on_the_group_then_on_each_topic(broker: Broker) -> None:
    secure(
        broker,
        [
            allow("alice", Op.READ, GROUP, "g"),
            allow("alice", Op.READ, TOPIC, "orders"),
            allow("bob", Op.READ, TOPIC, "*"),
        ],
    )
    bob = await send(broker, "bob", ApiKey.OFFSET_COMMIT, 8, commit_body("g", "orders"))
    assert [p.error_code for t in bob.topics for p in t.partitions] == [GAF]
    assert committed(broker, "g") == {}
    alice = await send(
        broker, "alice", ApiKey.OFFSET_COMMIT, 8, commit_body("g", "orders", "secret")
    )
    assert {t.name: [p.error_code for p in t.partitions] for t in alice.topics} == {
        "orders": [ErrorCode.NONE],
        "secret": [TAF],
    }
    assert committed(broker, "g") == {("orders", 0): 5}


async def test_offset_fetch_needs_describe_on_the_group_and_hides_undescribable_topics(
    broker: Broker,
) -> None:
    secure(
        broker,
        [
            allow("admin-ish", Op.READ, GROUP, "g"),
            allow("admin-ish", Op.READ, TOPIC, "*"),
            allow("alice", Op.DESCRIBE, GROUP, "g"),
            allow("alice", Op.DESCRIBE, TOPIC, "orders"),
        ],
    )
    await send(broker, "admin-ish", ApiKey.OFFSET_COMMIT, 8, commit_body("g", "orders", "secret"))
    bob = await send(broker, "bob", ApiKey.OFFSET_FETCH, 8, fetch_offsets_body("g", None))
    assert [(g.group_id, g.error_code, g.topics) for g in bob.groups] == [("g", GAF, [])]
    every = await send(broker, "alice", ApiKey.OFFSET_FETCH, 8, fetch_offsets_body("g", None))
    assert [t.name for t in every.groups[0].topics] == ["orders"]
    named = await send(
        broker, "alice", ApiKey.OFFSET_FETCH, 8, fetch_offsets_body("g", ["orders", "secret"])
    )
    answered = {
        t.name: [(p.error_code, p.committed_offset) for p in t.partitions]
        for t in named.groups[0].topics
    }
    assert answered == {"orders": [(ErrorCode.NONE, 5)], "secret": [(TAF, -1)]}


async def test_offset_fetch_v7_refuses_the_group_at_the_top_level(broker: Broker) -> None:
    secure(broker)
    body = {"group_id": "g", "topics": [{"name": "orders", "partition_indexes": [0]}]}
    response = await send(broker, "bob", ApiKey.OFFSET_FETCH, 7, body)
    assert (response.error_code, response.topics) == (GAF, [])


async def test_find_coordinator_needs_describe_on_the_group_or_transactional_id(
    broker: Broker,
) -> None:
    secure(broker, [allow("alice", Op.DESCRIBE, GROUP, "g")])
    groups = await send(
        broker, "alice", ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g", "h"]}
    )
    assert {c.key: c.error_code for c in groups.coordinators} == {"g": ErrorCode.NONE, "h": GAF}
    txn = await send(broker, "alice", ApiKey.FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})
    assert (txn.error_code, txn.node_id) == (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)


async def test_join_group_needs_read_on_the_group(broker: Broker) -> None:
    secure(broker)
    body = {
        "group_id": "g",
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 10000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    response = await send(broker, "bob", ApiKey.JOIN_GROUP, 9, body)
    assert response.error_code == GAF
    assert broker.groups is not None
    assert not broker.groups.classic.has_group("g")  # type: ignore[attr-defined]


async def test_heartbeat_sync_and_leave_need_read_on_the_group(broker: Broker) -> None:
    secure(broker)
    member = {"group_id": "g", "generation_id": 1, "member_id": "m"}
    heartbeat = await send(broker, "bob", ApiKey.HEARTBEAT, 4, member)
    sync = await send(broker, "bob", ApiKey.SYNC_GROUP, 5, {**member, "assignments": []})
    leave = await send(
        broker, "bob", ApiKey.LEAVE_GROUP, 5, {"group_id": "g", "members": [{"member_id": "m"}]}
    )
    assert (heartbeat.error_code, sync.error_code, leave.error_code) == (GAF, GAF, GAF)


async def test_list_groups_shows_the_describable_groups_or_all_with_cluster_describe(
    broker: Broker,
) -> None:
    secure(
        broker,
        [
            allow("setup", Op.READ, GROUP, "*"),
            allow("setup", Op.READ, TOPIC, "*"),
            allow("alice", Op.DESCRIBE, GROUP, "g1"),
            allow("bob", Op.DESCRIBE, CLUSTER, "kafka-cluster"),
        ],
    )
    for group_id in ("g1", "g2"):
        await send(broker, "setup", ApiKey.OFFSET_COMMIT, 8, commit_body(group_id, "orders"))
    alice = await send(broker, "alice", ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    bob = await send(broker, "bob", ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    assert [g.group_id for g in alice.groups] == ["g1"]
    assert sorted(g.group_id for g in bob.groups) == ["g1", "g2"]


async def test_describe_groups_refuses_undescribable_groups_first_and_reports_operations(
    broker: Broker,
) -> None:
    secure(broker, [allow("alice", Op.READ, GROUP, "g1")])
    body = {"groups": ["g1", "g2"], "include_authorized_operations": True}
    response = await send(broker, "alice", ApiKey.DESCRIBE_GROUPS, 5, body)
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        ("g2", GAF),
        ("g1", ErrorCode.NONE),
    ]
    assert response.groups[1].authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)


async def test_delete_groups_needs_delete_on_each_group(broker: Broker) -> None:
    secure(
        broker,
        [
            allow("setup", Op.READ, GROUP, "*"),
            allow("setup", Op.READ, TOPIC, "*"),
            allow("alice", Op.DELETE, GROUP, "g1"),
        ],
    )
    for group_id in ("g1", "g2"):
        await send(broker, "setup", ApiKey.OFFSET_COMMIT, 8, commit_body(group_id, "orders"))
    response = await send(broker, "alice", ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g1", "g2"]})
    assert {r.group_id: r.error_code for r in response.results} == {
        "g1": ErrorCode.NONE,
        "g2": GAF,
    }
    assert committed(broker, "g2") == {("orders", 0): 5}


async def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic(
    broker: Broker,
) -> None:
    secure(
        broker,
        [
            allow("setup", Op.READ, GROUP, "*"),
            allow("setup", Op.READ, TOPIC, "*"),
            allow("alice", Op.DELETE, GROUP, "g"),
            allow("alice", Op.READ, TOPIC, "orders"),
        ],
    )
    await send(broker, "setup", ApiKey.OFFSET_COMMIT, 8, commit_body("g", "orders", "secret"))
    body = {
        "group_id": "g",
        "topics": [
            {"name": t, "partitions": [{"partition_index": 0}]} for t in ("orders", "secret")
        ],
    }
    bob = await send(broker, "bob", ApiKey.OFFSET_DELETE, 0, body)
    assert bob.error_code == GAF
    alice = await send(broker, "alice", ApiKey.OFFSET_DELETE, 0, body)
    assert {t.name: [p.error_code for p in t.partitions] for t in alice.topics} == {
        "orders": [ErrorCode.NONE],
        "secret": [TAF],
    }
    assert committed(broker, "g") == {("secret", 0): 5}


async def test_consumer_group_heartbeat_needs_read_on_the_group_and_describe_on_its_topics(
    broker: Broker,
) -> None:
    secure(
        broker,
        [allow("alice", Op.READ, GROUP, "g"), allow("alice", Op.DESCRIBE, TOPIC, "orders")],
    )
    body = {
        "group_id": "g",
        "member_id": "m-1",
        "member_epoch": 0,
        "rebalance_timeout_ms": 10000,
        "subscribed_topic_names": ["orders", "secret"],
        "topic_partitions": [],
    }
    bob = await send(broker, "bob", ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)
    assert bob.error_code == GAF
    refused = await send(broker, "alice", ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)
    assert refused.error_code == TAF
    assert broker.groups is not None
    assert not broker.groups.consumer_groups.has_group("g")  # type: ignore[attr-defined]
    served = await send(
        broker, "alice", ApiKey.CONSUMER_GROUP_HEARTBEAT, 0,
        {**body, "subscribed_topic_names": ["orders"]},
    )  # fmt: skip
    assert served.error_code == ErrorCode.NONE


async def test_consumer_group_describe_needs_describe_on_the_group(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.DESCRIBE, GROUP, "g1")])
    body = {"group_ids": ["g1", "g2"], "include_authorized_operations": False}
    response = await send(broker, "alice", ApiKey.CONSUMER_GROUP_DESCRIBE, 0, body)
    assert [(g.group_id, g.error_code) for g in response.groups][0] == ("g2", GAF)
