"""InitProducerId and the transaction APIs under ACLs."""

from __future__ import annotations

from typing import Any

from weir.broker.broker import Broker
from weir.broker.coordinators.transaction_service import TransactionService
from weir.format.errors import ErrorCode
from weir.security.acl import AclOperation as Op
from weir.security.acl import PatternType, ResourceType
from weir.wire.protocol import ApiKey

from .authorized_calls import ADMIN, allow, secure, send

TOPIC, GROUP, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
CLUSTER = ResourceType.CLUSTER
TAF, GAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED
TXN_AF = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
CLUSTER_AF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def init_body(transactional_id: str | None) -> Any:
    return {
        "transactional_id": transactional_id,
        "transaction_timeout_ms": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }


def coordinator(broker: Broker) -> Any:
    assert isinstance(broker.transactions, TransactionService)
    return broker.transactions.coordinator


async def test_init_producer_id_with_a_transactional_id_needs_write_on_it(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.WRITE, TXN, "tx")])
    bob = await send(broker, "bob", ApiKey.INIT_PRODUCER_ID, 4, init_body("tx"))
    assert (bob.error_code, bob.producer_id) == (TXN_AF, -1)
    assert coordinator(broker).describe("tx").error != ErrorCode.NONE
    alice = await send(broker, "alice", ApiKey.INIT_PRODUCER_ID, 4, init_body("tx"))
    assert alice.error_code == ErrorCode.NONE and alice.producer_id >= 0


async def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(
    broker: Broker,
) -> None:
    secure(
        broker,
        [
            allow("alice", Op.WRITE, TOPIC, "ord", PatternType.PREFIXED),
            allow("carol", Op.IDEMPOTENT_WRITE, CLUSTER, "kafka-cluster"),
        ],
    )
    bob = await send(broker, "bob", ApiKey.INIT_PRODUCER_ID, 4, init_body(None))
    alice = await send(broker, "alice", ApiKey.INIT_PRODUCER_ID, 4, init_body(None))
    carol = await send(broker, "carol", ApiKey.INIT_PRODUCER_ID, 4, init_body(None))
    assert (bob.error_code, alice.error_code, carol.error_code) == (
        CLUSTER_AF,
        ErrorCode.NONE,
        ErrorCode.NONE,
    )


async def open_transaction(broker: Broker) -> tuple[int, int]:
    init = await send(broker, ADMIN, ApiKey.INIT_PRODUCER_ID, 4, init_body("tx"))
    return init.producer_id, init.producer_epoch


def add_partitions_body(producer: tuple[int, int], *topics: str) -> Any:
    return {
        "v3_and_below_transactional_id": "tx",
        "v3_and_below_producer_id": producer[0],
        "v3_and_below_producer_epoch": producer[1],
        "v3_and_below_topics": [{"name": t, "partitions": [0]} for t in topics],
    }


async def test_add_partitions_to_txn_refuses_the_whole_transaction_for_one_refused_topic(
    broker: Broker,
) -> None:
    secure(broker, [allow("alice", Op.WRITE, TXN, "tx"), allow("alice", Op.WRITE, TOPIC, "orders")])
    producer = await open_transaction(broker)
    body = add_partitions_body(producer, "orders", "secret", "missing")
    bob = await send(broker, "bob", ApiKey.ADD_PARTITIONS_TO_TXN, 3, body)
    assert {
        t.name: t.results_by_partition[0].partition_error_code
        for t in bob.results_by_topic_v3_and_below
    } == {
        "orders": TXN_AF,
        "secret": TXN_AF,
        "missing": TXN_AF,
    }
    alice = await send(broker, "alice", ApiKey.ADD_PARTITIONS_TO_TXN, 3, body)
    assert {
        t.name: t.results_by_partition[0].partition_error_code
        for t in alice.results_by_topic_v3_and_below
    } == {"orders": ErrorCode.OPERATION_NOT_ATTEMPTED, "secret": TAF, "missing": TAF}
    assert not coordinator(broker).describe("tx").partitions


async def test_add_partitions_to_txn_from_a_broker_needs_cluster_action(broker: Broker) -> None:
    secure(broker)
    body = {
        "transactions": [
            {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
             "verify_only": True, "topics": [{"name": "orders", "partitions": [0]}]}
        ]
    }  # fmt: skip
    response = await send(broker, "bob", ApiKey.ADD_PARTITIONS_TO_TXN, 4, body)
    assert response.error_code == CLUSTER_AF


async def test_add_offsets_to_txn_needs_write_on_the_id_then_read_on_the_group(
    broker: Broker,
) -> None:
    secure(broker, [allow("alice", Op.WRITE, TXN, "tx")])
    producer = await open_transaction(broker)
    body = {"transactional_id": "tx", "producer_id": producer[0], "producer_epoch": producer[1],
            "group_id": "g"}  # fmt: skip
    bob = await send(broker, "bob", ApiKey.ADD_OFFSETS_TO_TXN, 3, body)
    alice = await send(broker, "alice", ApiKey.ADD_OFFSETS_TO_TXN, 3, body)
    assert (bob.error_code, alice.error_code) == (TXN_AF, GAF)


async def test_end_txn_needs_write_on_the_transactional_id(broker: Broker) -> None:
    secure(broker)
    producer = await open_transaction(broker)
    body = {"transactional_id": "tx", "producer_id": producer[0], "producer_epoch": producer[1],
            "committed": True}  # fmt: skip
    response = await send(broker, "bob", ApiKey.END_TXN, 3, body)
    assert response.error_code == TXN_AF


async def test_write_txn_markers_needs_cluster_action(broker: Broker) -> None:
    secure(broker)
    body = {
        "markers": [
            {"producer_id": 1, "producer_epoch": 0, "transaction_result": True,
             "topics": [{"name": "orders", "partition_indexes": [0, 1]}], "coordinator_epoch": 0}
        ]
    }  # fmt: skip
    response = await send(broker, "bob", ApiKey.WRITE_TXN_MARKERS, 1, body)
    errors = [p.error_code for m in response.markers for t in m.topics for p in t.partitions]
    assert errors == [CLUSTER_AF, CLUSTER_AF]
    replica = broker.lookup("orders", 0)
    assert not isinstance(replica, ErrorCode) and replica.log.log_end_offset == 0


async def test_txn_offset_commit_checks_the_id_then_the_group_then_each_topic(
    broker: Broker,
) -> None:
    secure(
        broker,
        [
            allow("alice", Op.WRITE, TXN, "tx"),
            allow("carol", Op.WRITE, TXN, "tx"),
            allow("carol", Op.READ, GROUP, "g"),
        ],
    )
    producer = await open_transaction(broker)
    partitions = [{"partition_index": 0, "committed_offset": 3}]
    body = {
        "transactional_id": "tx", "group_id": "g", "producer_id": producer[0],
        "producer_epoch": producer[1], "topics": [{"name": "orders", "partitions": partitions}],
    }  # fmt: skip
    for who, error in (("bob", TXN_AF), ("alice", GAF), ("carol", TAF)):
        response = await send(broker, who, ApiKey.TXN_OFFSET_COMMIT, 3, body)
        assert [p.error_code for t in response.topics for p in t.partitions] == [error], who


async def test_describe_producers_needs_read_on_each_topic(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.READ, TOPIC, "orders")])
    body = {"topics": [{"name": t, "partition_indexes": [0]} for t in ("orders", "secret")]}
    response = await send(broker, "alice", ApiKey.DESCRIBE_PRODUCERS, 0, body)
    assert {t.name: [p.error_code for p in t.partitions] for t in response.topics} == {
        "orders": [ErrorCode.NONE],
        "secret": [TAF],
    }


async def test_describe_and_list_transactions_show_only_describable_ids(broker: Broker) -> None:
    secure(broker, [allow("alice", Op.DESCRIBE, TXN, "other")])
    await open_transaction(broker)
    described = await send(
        broker, "alice", ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx", "other"]}
    )
    assert [(s.transactional_id, s.error_code) for s in described.transaction_states][0] == (
        "tx",
        TXN_AF,
    )
    listed = await send(broker, "alice", ApiKey.LIST_TRANSACTIONS, 0, {})
    assert listed.transaction_states == []
    everything = await send(broker, ADMIN, ApiKey.LIST_TRANSACTIONS, 0, {})
    assert [s.transactional_id for s in everything.transaction_states] == ["tx"]
