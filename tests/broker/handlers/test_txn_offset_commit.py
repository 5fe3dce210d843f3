"""TxnOffsetCommit through its handler on a real Broker, and OffsetFetch's
require_stable answer while a transaction holds a partition's offset. The
transaction coordinator's part (the marker, then `complete_transaction`) is done
by hand here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import GroupService, attach_group_service
from weir.broker.coordinators.group_transactions import TxnOffsetsCheck
from weir.broker.coordinators.offsets_topic import offsets_replica
from weir.broker.handlers.group_offsets import handle_offset_fetch, handle_txn_offset_commit
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

from ..handler_calls import call

GROUP = "eos"
PRODUCER_ID = 9000


@pytest.fixture
async def broker(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path, offsets_topic_partition_count=4))
    broker.open_logs()
    service = attach_group_service(broker)
    await nursery.start(broker.flusher.run)
    broker.create_topic(broker.controller.plan_topic("t", 2, 1))
    await service.prepare()
    yield broker
    broker.close()


def service_of(broker: Broker) -> GroupService:
    assert isinstance(broker.groups, GroupService)
    return broker.groups


def txn_body(*offsets: tuple[int, int], group_id: str = GROUP, **fields: Any) -> dict[str, Any]:
    return {
        "transactional_id": "tx-1",
        "group_id": group_id,
        "producer_id": PRODUCER_ID,
        "producer_epoch": 0,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_metadata": ""}
                    for p, o in offsets
                ],
            }
        ],
        **fields,
    }


async def txn_commit(broker: Broker, body: dict[str, Any], version: int = 3) -> list[int]:
    response = await call(broker, handle_txn_offset_commit, ApiKey.TXN_OFFSET_COMMIT, version, body)
    return [p.error_code for topic in response.topics for p in topic.partitions]


async def fetch(broker: Broker, *, require_stable: bool) -> list[tuple[int, int, int]]:
    body = {
        "group_id": GROUP,
        "topics": [{"name": "t", "partition_indexes": [0, 1]}],
        "require_stable": require_stable,
    }
    response = await call(broker, handle_offset_fetch, ApiKey.OFFSET_FETCH, 7, body)
    return [
        (p.partition_index, p.committed_offset, p.error_code) for p in response.topics[0].partitions
    ]


async def write_marker(broker: Broker, commit: bool) -> None:
    service = service_of(broker)
    partition = service.partition_for(GROUP)
    replica = offsets_replica(broker, partition)
    result = replica.log.append_txn_marker(
        producer_id=PRODUCER_ID,
        producer_epoch=0,
        coordinator_epoch=0,
        commit=commit,
        leader_epoch=replica.leader_epoch,
        now_ms=0,
    )
    service.complete_transaction(partition, PRODUCER_ID, commit, result.base_offset)
    await replica.log.wait_durable(result.last_offset + 1)


async def test_offsets_of_an_open_transaction_are_unstable_then_fetched_once_committed(
    broker: Broker,
) -> None:
    assert await txn_commit(broker, txn_body((0, 15))) == [ErrorCode.NONE]
    assert await fetch(broker, require_stable=False) == [(0, -1, 0), (1, -1, 0)]
    assert await fetch(broker, require_stable=True) == [
        (0, -1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        (1, -1, ErrorCode.NONE),
    ]
    await write_marker(broker, commit=True)
    assert await fetch(broker, require_stable=True) == [(0, 15, 0), (1, -1, 0)]


async def test_an_aborted_transactions_offsets_are_never_fetched(broker: Broker) -> None:
    await txn_commit(broker, txn_body((0, 15), (1, 16)), version=0)
    await write_marker(broker, commit=False)
    assert await fetch(broker, require_stable=True) == [(0, -1, 0), (1, -1, 0)]


async def test_txn_offset_commit_refusals(broker: Broker) -> None:
    assert await txn_commit(broker, txn_body((0, 1), group_id="")) == [ErrorCode.INVALID_GROUP_ID]
    assert await txn_commit(broker, txn_body((7, 1))) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert await txn_commit(broker, txn_body((0, 1), producer_id=-1)) == [
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    ]
    assert await txn_commit(broker, txn_body((0, 1), generation_id_or_member_epoch=4)) == [
        ErrorCode.ILLEGAL_GENERATION
    ]
    assert not service_of(broker).offsets.has_open_transactions(GROUP)


@pytest.mark.parametrize(("version", "adds"), [(4, False), (5, True)])
async def test_the_transaction_coordinators_check_runs_before_anything_is_written(
    broker: Broker, version: int, adds: bool
) -> None:
    """v5 (transaction version 2) asks the coordinator to add the offsets partition."""
    service = service_of(broker)
    checks: list[TxnOffsetsCheck] = []

    async def refuse(check: TxnOffsetsCheck) -> ErrorCode:
        checks.append(check)
        return ErrorCode.CONCURRENT_TRANSACTIONS

    service.txn_offsets_verifier = refuse
    log_end = offsets_replica(broker, service.partition_for(GROUP)).log.log_end_offset
    assert await txn_commit(broker, txn_body((0, 1)), version) == [
        ErrorCode.CONCURRENT_TRANSACTIONS
    ]
    assert checks == [
        TxnOffsetsCheck("tx-1", PRODUCER_ID, 0, GROUP, service.partition_for(GROUP), adds)
    ]
    assert offsets_replica(broker, service.partition_for(GROUP)).log.log_end_offset == log_end
    assert not service.offsets.has_open_transactions(GROUP)
