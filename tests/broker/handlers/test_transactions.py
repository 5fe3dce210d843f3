"""The transaction APIs through the handlers, on a real Broker with its transaction
service running (the coordinator's records in `__transaction_state`, its markers
written in the background)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import attach_group_service
from weir.broker.coordinators.transaction_service import (
    TransactionService,
    attach_transaction_service,
    transaction_partition,
)
from weir.broker.handlers.api_versions import handle_api_versions
from weir.broker.handlers.find_coordinator import handle_find_coordinator
from weir.broker.handlers.produce import handle_produce
from weir.broker.handlers.producer_ids import handle_init_producer_id
from weir.broker.handlers.transactions import (
    handle_add_partitions_to_txn,
    handle_describe_producers,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
    handle_write_txn_markers,
)
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.txn.transaction_records import TxnState
from weir.wire.protocol import ApiKey

from ..handler_calls import call

TXN_ID = "tx-1"


def open_broker(data_dir: Path, **settings: Any) -> Broker:
    config = BrokerConfig(
        data_dir=data_dir,
        offsets_topic_partition_count=2,
        transaction_state_partition_count=3,
        **settings,
    )
    broker = Broker(config)
    broker.open_logs()
    attach_group_service(broker)
    attach_transaction_service(broker)
    return broker


@pytest.fixture
async def broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    broker = open_broker(tmp_path)
    await nursery.start(broker.flusher.run)
    await nursery.start(service_of(broker).run, wall_clock_ms)
    await service_of(broker).prepare()
    broker.create_topic(broker.controller.plan_topic("t", 2, 1))
    yield broker
    broker.close()


def service_of(broker: Broker) -> TransactionService:
    assert isinstance(broker.transactions, TransactionService)
    return broker.transactions


async def init(broker: Broker, timeout_ms: int = 60_000, version: int = 4) -> tuple[int, int]:
    body = {"transactional_id": TXN_ID, "transaction_timeout_ms": timeout_ms}
    response = await call(broker, handle_init_producer_id, ApiKey.INIT_PRODUCER_ID, version, body)
    assert response.error_code == ErrorCode.NONE
    return response.producer_id, response.producer_epoch


async def add_partitions(
    broker: Broker, producer: tuple[int, int], *indexes: int, version: int = 3
) -> list[int]:
    body = {
        "v3_and_below_transactional_id": TXN_ID,
        "v3_and_below_producer_id": producer[0],
        "v3_and_below_producer_epoch": producer[1],
        "v3_and_below_topics": [{"name": "t", "partitions": list(indexes)}],
    }
    response = await call(
        broker, handle_add_partitions_to_txn, ApiKey.ADD_PARTITIONS_TO_TXN, version, body
    )
    return [
        p.partition_error_code
        for topic in response.results_by_topic_v3_and_below
        for p in topic.results_by_partition
    ]


async def produce(
    broker: Broker, producer: tuple[int, int], sequence: int, index: int = 0, version: int = 11
) -> Any:
    records = build_batch(
        [(b"k", f"v{sequence}".encode(), [])],
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=sequence,
        is_transactional=True,
    )
    body = {
        "transactional_id": TXN_ID,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": "t", "partition_data": [{"index": index, "records": records}]}],
    }
    response = await call(broker, handle_produce, ApiKey.PRODUCE, version, body)
    return response.responses[0].partition_responses[0]


async def end(broker: Broker, producer: tuple[int, int], commit: bool, version: int = 4) -> Any:
    body = {
        "transactional_id": TXN_ID,
        "producer_id": producer[0],
        "producer_epoch": producer[1],
        "committed": commit,
    }
    return await call(broker, handle_end_txn, ApiKey.END_TXN, version, body)


async def completed(broker: Broker) -> TxnState:
    """The transaction's state once its markers are written (bounded wait)."""
    coordinator = service_of(broker).coordinator
    with trio.fail_after(5):
        while True:
            txn = coordinator.metadata(TXN_ID)
            assert txn is not None
            if txn.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
                return txn.state
            await trio.sleep(0.01)


def partition_log(broker: Broker, index: int = 0) -> Any:
    replica = broker.partition("t", index)
    assert replica is not None
    return replica.log


async def test_find_coordinator_names_this_broker_for_a_transactional_id(broker: Broker) -> None:
    body = {"key_type": 1, "coordinator_keys": [TXN_ID, ""]}
    response = await call(broker, handle_find_coordinator, ApiKey.FIND_COORDINATOR, 4, body)
    found, empty = response.coordinators
    assert (found.error_code, found.node_id) == (ErrorCode.NONE, broker.config.node_id)
    assert empty.error_code == ErrorCode.INVALID_REQUEST


def test_transactional_ids_are_placed_as_kafka_places_them() -> None:
    # Utils.abs(hashCode) % 50; "a".hashCode() is 97; a negative hash takes its abs.
    assert transaction_partition("a", 50) == 97 % 50
    negative = "polygenelubricants"  # its Java hashCode is Integer.MIN_VALUE
    assert transaction_partition(negative, 50) == 0


async def test_init_producer_id_bumps_the_epoch_and_fences_the_older_producer(
    broker: Broker,
) -> None:
    first = await init(broker)
    second = await init(broker)
    assert second == (first[0], first[1] + 1)
    assert await add_partitions(broker, first, 0, version=1) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert await add_partitions(broker, first, 0, version=3) == [ErrorCode.PRODUCER_FENCED]
    assert await add_partitions(broker, second, 0) == [ErrorCode.NONE]


async def test_an_open_transaction_holds_the_last_stable_offset_until_its_commit_marker(
    broker: Broker,
) -> None:
    producer = await init(broker)
    assert await add_partitions(broker, producer, 0, 1) == [ErrorCode.NONE, ErrorCode.NONE]
    assert (await produce(broker, producer, 0, index=0)).error_code == ErrorCode.NONE
    assert (await produce(broker, producer, 0, index=1)).error_code == ErrorCode.NONE
    assert partition_log(broker, 0).last_stable_offset == 0
    response = await end(broker, producer, commit=True)
    assert response.error_code == ErrorCode.NONE
    assert await completed(broker) == TxnState.COMPLETE_COMMIT
    for index in (0, 1):
        log = partition_log(broker, index)
        assert log.log_end_offset == 2  # the record and its marker
        assert log.last_stable_offset == 2
        assert log.aborted_transactions(0, 2) == []


async def test_an_aborted_transaction_is_listed_for_read_committed_fetches(
    broker: Broker,
) -> None:
    producer = await init(broker)
    await add_partitions(broker, producer, 0)
    await produce(broker, producer, 0)
    assert (await end(broker, producer, commit=False)).error_code == ErrorCode.NONE
    assert await completed(broker) == TxnState.COMPLETE_ABORT
    log = partition_log(broker)
    assert log.aborted_transactions(0, log.log_end_offset) == [(producer[0], 0)]


async def test_produce_v12_adds_the_partition_to_the_transaction_implicitly(
    broker: Broker,
) -> None:
    producer = await init(broker)
    assert (await produce(broker, producer, 0, version=12)).error_code == ErrorCode.NONE
    body = {"transactional_ids": [TXN_ID]}
    described = await call(
        broker, handle_describe_transactions, ApiKey.DESCRIBE_TRANSACTIONS, 0, body
    )
    state = described.transaction_states[0]
    assert (state.error_code, state.transaction_state) == (ErrorCode.NONE, "Ongoing")
    assert [(t.topic, t.partitions) for t in state.topics] == [("t", [0])]


@pytest.mark.parametrize(
    ("version", "error"),
    [(9, ErrorCode.INVALID_TXN_STATE), (11, ErrorCode.TRANSACTION_ABORTABLE)],
)
async def test_a_transactional_batch_for_a_partition_outside_the_transaction_is_refused(
    broker: Broker, version: int, error: ErrorCode
) -> None:
    producer = await init(broker)
    await add_partitions(broker, producer, 1)
    response = await produce(broker, producer, 0, index=0, version=version)
    assert response.error_code == error
    assert partition_log(broker, 0).log_end_offset == 0


async def test_end_txn_v5_bumps_the_epoch_so_a_late_end_of_that_transaction_changes_nothing(
    broker: Broker,
) -> None:
    producer = await init(broker)
    await produce(broker, producer, 0, version=12)
    ended = await end(broker, producer, commit=True, version=5)
    assert (ended.error_code, ended.producer_epoch) == (ErrorCode.NONE, producer[1] + 1)
    assert await completed(broker) == TxnState.COMPLETE_COMMIT
    retry = await end(broker, producer, commit=True, version=5)
    assert retry.error_code == ErrorCode.NONE  # a retry of the completed end
    late_abort = await end(broker, producer, commit=False, version=5)
    assert late_abort.error_code == ErrorCode.INVALID_TXN_STATE  # as Kafka answers it
    # the next transaction, at the new epoch, is untouched by a stale marker
    bumped = (producer[0], ended.producer_epoch)
    assert (await produce(broker, bumped, 0, version=12)).error_code == ErrorCode.NONE
    stale = {
        "markers": [
            {
                "producer_id": producer[0],
                "producer_epoch": ended.producer_epoch,
                "transaction_result": False,
                "topics": [{"name": "t", "partition_indexes": [0]}],
                "coordinator_epoch": 0,
                "transaction_version": 2,
            }
        ]
    }
    response = await call(broker, handle_write_txn_markers, ApiKey.WRITE_TXN_MARKERS, 2, stale)
    error = response.markers[0].topics[0].partitions[0].error_code
    assert error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert partition_log(broker).ongoing_transaction_first_offset(producer[0]) == 2


async def test_write_txn_markers_of_an_older_producer_epoch_are_refused(broker: Broker) -> None:
    producer = await init(broker)
    await init(broker)
    newer = (producer[0], producer[1] + 1)
    await add_partitions(broker, newer, 0)
    await produce(broker, newer, 0)
    forged = {
        "markers": [
            {
                "producer_id": producer[0],
                "producer_epoch": producer[1],
                "transaction_result": True,
                "topics": [{"name": "t", "partition_indexes": [0]}, {"name": "nope",
                           "partition_indexes": [0]}],
                "coordinator_epoch": 0,
            }
        ]
    }  # fmt: skip
    response = await call(broker, handle_write_txn_markers, ApiKey.WRITE_TXN_MARKERS, 1, forged)
    errors = {t.name: t.partitions[0].error_code for t in response.markers[0].topics}
    assert errors == {
        "t": ErrorCode.INVALID_PRODUCER_EPOCH,
        "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert partition_log(broker).last_stable_offset == 0  # still open


async def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    broker: Broker,
) -> None:
    producer = await init(broker, timeout_ms=200)
    await add_partitions(broker, producer, 0)
    await produce(broker, producer, 0)
    service_of(broker).poke()
    assert await completed(broker) == TxnState.COMPLETE_ABORT
    assert partition_log(broker).aborted_transactions(0, 2) == [(producer[0], 0)]
    late_commit = await end(broker, producer, commit=True)
    assert late_commit.error_code == ErrorCode.PRODUCER_FENCED


async def test_list_and_describe_producers_show_the_open_transaction(broker: Broker) -> None:
    producer = await init(broker)
    await add_partitions(broker, producer, 0)
    await produce(broker, producer, 0)
    body = {
        "state_filters": ["Ongoing"],
        "producer_id_filters": [],
        "transactional_id_pattern": "tx-.*",
    }
    listed = await call(broker, handle_list_transactions, ApiKey.LIST_TRANSACTIONS, 2, body)
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        (TXN_ID, "Ongoing")
    ]
    wanted = {"topics": [{"name": "t", "partition_indexes": [0]}]}
    producers = await call(broker, handle_describe_producers, ApiKey.DESCRIBE_PRODUCERS, 0, wanted)
    active = producers.topics[0].partitions[0].active_producers
    assert [(p.producer_id, p.current_txn_start_offset) for p in active] == [(producer[0], 0)]


@pytest.mark.parametrize("level", [1, 2])
async def test_api_versions_advertises_the_finalized_transaction_version(
    tmp_path: Path, level: int
) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path, transaction_version=level))
    response = await call(broker, handle_api_versions, ApiKey.API_VERSIONS, 3, {})
    assert [(f.name, f.max_version_level) for f in response.finalized_features] == [
        ("transaction.version", level)
    ]
    assert response.finalized_features_epoch >= 0
    broker.close()


async def test_an_open_transaction_is_reloaded_after_a_restart_and_times_out(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker = open_broker(tmp_path)
    await nursery.start(broker.flusher.run)
    await service_of(broker).prepare()
    broker.create_topic(broker.controller.plan_topic("t", 1, 1))
    async with trio.open_nursery() as inner:
        await inner.start(service_of(broker).run, wall_clock_ms)
        producer = await init(broker, timeout_ms=300)
        await add_partitions(broker, producer, 0)
        await produce(broker, producer, 0)
        inner.cancel_scope.cancel()
    broker.close()
    restarted = open_broker(tmp_path)
    await nursery.start(restarted.flusher.run)
    txn = service_of(restarted).coordinator.metadata(TXN_ID)
    assert txn is not None and txn.state == TxnState.ONGOING
    assert partition_log(restarted).last_stable_offset == 0
    await nursery.start(service_of(restarted).run, wall_clock_ms)
    assert await completed(restarted) == TxnState.COMPLETE_ABORT
    assert partition_log(restarted).last_stable_offset == 2
    restarted.close()


async def test_a_batch_of_the_next_epoch_is_checked_while_the_last_marker_is_on_its_way(
    broker: Broker,
) -> None:
    """Transaction version 2: the producer's next transaction (epoch + 1) may reach a
    partition before the last transaction's marker. Such a batch must not join the
    open transaction of the older epoch unchecked (its marker, of epoch + 1, would
    then be refused as not newer and the partition's LSO stuck): it is checked by
    the coordinator, which answers CONCURRENT_TRANSACTIONS until the end completed."""
    producer = await init(broker)
    await add_partitions(broker, producer, 0)
    await produce(broker, producer, 0)
    log = partition_log(broker)
    assert log.ongoing_transaction_first_offset(producer[0], producer[1]) == 0
    assert log.ongoing_transaction_first_offset(producer[0], producer[1] + 1) is None


async def test_the_next_transactions_first_batch_waits_for_the_last_markers(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 2 starts the next transaction as soon as EndTxn answers; a batch that
    arrives while the last transaction's markers are being written is held by its
    leader (Kafka's add.partitions.to.txn.retry) instead of being sent back."""
    service = service_of(broker)
    release = trio.Event()
    write = service.markers.write

    async def held(request: Any, partitions: Any) -> Any:
        await release.wait()
        return await write(request, partitions)

    monkeypatch.setattr(service.markers, "write", held)
    producer = await init(broker)
    await produce(broker, producer, 0, version=12)
    ended = await end(broker, producer, commit=True, version=5)
    next_epoch = (producer[0], ended.producer_epoch)

    async def release_soon() -> None:
        await trio.sleep(0.1)
        release.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(release_soon)
        response = await produce(broker, next_epoch, 0, version=12)
    assert response.error_code == ErrorCode.NONE
    assert partition_log(broker).ongoing_transaction_first_offset(*next_epoch) == 2


async def test_an_idle_transactional_id_expires_and_is_forgotten(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker = open_broker(tmp_path, transactional_id_expiration_ms=300)
    await nursery.start(broker.flusher.run)
    await nursery.start(service_of(broker).run, wall_clock_ms)
    await service_of(broker).prepare()
    await init(broker)
    body = {"transactional_ids": [TXN_ID]}
    with trio.fail_after(5):
        while True:
            described = await call(
                broker, handle_describe_transactions, ApiKey.DESCRIBE_TRANSACTIONS, 0, body
            )
            if described.transaction_states[0].error_code != ErrorCode.NONE:
                break
            await trio.sleep(0.05)
    assert described.transaction_states[0].error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    broker.close()
    restarted = open_broker(tmp_path)  # the tombstone is stored: still forgotten
    assert service_of(restarted).coordinator.metadata(TXN_ID) is None
    restarted.close()
