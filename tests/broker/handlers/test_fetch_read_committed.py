"""Fetch and ListOffsets under isolation_level read_committed, against a real
Broker with a real partition log holding transactions: data only below the
last stable offset, the aborted transactions of the returned range listed, and
LATEST answered with the LSO; read_uncommitted is unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.handlers.fetch import handle_fetch
from weir.broker.handlers.list_offsets import handle_list_offsets
from weir.broker.partition_replica import PartitionReplica
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch, iter_batch_headers
from weir.wire.protocol import ApiKey

from ..handler_calls import call

NOW_MS = 1_700_000_000_000
PID, OTHER_PID = 5, 6
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    yield broker
    broker.close()


@pytest.fixture
def replica(broker: Broker) -> PartitionReplica:
    """Offsets: 0-1 plain, 2-3 PID's aborted txn, 4-5 OTHER_PID's open txn,
    6 PID's ABORT marker, 7 plain."""
    broker.create_topic(broker.controller.plan_topic("t", 1, 1))
    found = broker.partition("t", 0)
    assert found is not None
    log = found.log

    def append(pid: int = -1, transactional: bool = False) -> None:
        records = [(b"k", b"v", [])] * 2
        batch = build_batch(
            records, timestamp_ms=NOW_MS, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
            base_sequence=0 if pid >= 0 else -1, is_transactional=transactional,
        )  # fmt: skip
        log.append(batch, leader_epoch=0, now_ms=NOW_MS)

    append()
    append(PID, transactional=True)
    append(OTHER_PID, transactional=True)
    log.append_txn_marker(
        producer_id=PID, producer_epoch=0, coordinator_epoch=0, commit=False, leader_epoch=0,
        now_ms=NOW_MS,
    )  # fmt: skip
    log.append(build_batch([(b"k", b"v", [])], timestamp_ms=NOW_MS), leader_epoch=0, now_ms=NOW_MS)
    log.flush()
    return found


async def fetch(broker: Broker, offset: int, isolation_level: int) -> Any:
    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "t", "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20,
        }]}],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip
    response = await call(broker, handle_fetch, ApiKey.FETCH, 12, body)
    return response.responses[0].partitions[0]


def offsets_of(records: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batch_headers(records)]


async def test_read_committed_fetch_stops_at_the_lso_and_lists_aborted_transactions(
    broker: Broker, replica: PartitionReplica
) -> None:
    partition = await fetch(broker, 0, READ_COMMITTED)
    assert partition.error_code == ErrorCode.NONE
    assert (partition.high_watermark, partition.last_stable_offset) == (8, 4)
    assert offsets_of(bytes(partition.records)) == [0, 2]  # not the open transaction's
    assert [(a.producer_id, a.first_offset) for a in partition.aborted_transactions] == [(PID, 2)]
    replica.log.append_txn_marker(
        producer_id=OTHER_PID, producer_epoch=0, coordinator_epoch=0, commit=True,
        leader_epoch=0, now_ms=NOW_MS,
    )  # fmt: skip
    replica.log.flush()
    later = await fetch(broker, 4, READ_COMMITTED)
    assert later.last_stable_offset == later.high_watermark == 9
    assert offsets_of(bytes(later.records)) == [4, 6, 7, 8]
    assert [(a.producer_id, a.first_offset) for a in later.aborted_transactions] == [(PID, 2)]


async def test_read_uncommitted_fetch_reads_to_the_high_watermark(
    broker: Broker, replica: PartitionReplica
) -> None:
    partition = await fetch(broker, 0, READ_UNCOMMITTED)
    assert offsets_of(bytes(partition.records)) == [0, 2, 4, 6, 7]
    assert partition.last_stable_offset == 4
    assert partition.aborted_transactions == []


async def list_latest(broker: Broker, isolation_level: int, timestamp: int) -> Any:
    body = {
        "replica_id": -1, "isolation_level": isolation_level,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
    }  # fmt: skip
    response = await call(broker, handle_list_offsets, ApiKey.LIST_OFFSETS, 7, body)
    return response.topics[0].partitions[0]


async def test_list_offsets_latest_is_the_lso_under_read_committed(
    broker: Broker, replica: PartitionReplica
) -> None:
    assert (await list_latest(broker, READ_COMMITTED, -1)).offset == 4
    assert (await list_latest(broker, READ_UNCOMMITTED, -1)).offset == 8
    assert (await list_latest(broker, READ_COMMITTED, -2)).offset == 0
    # A timestamp lookup finds nothing at or past the last fetchable offset (Kafka's rule).
    assert (await list_latest(broker, READ_COMMITTED, NOW_MS + 1)).offset == -1
    assert (await list_latest(broker, READ_UNCOMMITTED, NOW_MS + 1)).offset == -1
