"""ListOffsets v1-v11 against a real Broker with real partition logs: the special
timestamps of the tiered-storage versions (v8 EARLIEST_LOCAL, v9 LATEST_TIERED,
v11 EARLIEST_PENDING_UPLOAD) answered as Kafka answers them for a topic without
remote storage, v10's timeout_ms, and each special timestamp refused below the
version that introduced it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.handlers.list_offsets import handle_list_offsets
from weir.broker.partition_replica import PartitionReplica
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.wire.protocol import ApiKey

from ..handler_calls import call

BASE_MS = 1_700_000_000_000
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
NEWEST_VERSION = 11


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    yield broker
    broker.close()


@pytest.fixture
def replica(broker: Broker) -> PartitionReplica:
    """Topic "t": offsets 0..3, one record per batch, timestamps BASE_MS + 0..3 s."""
    broker.create_topic(broker.controller.plan_topic("t", 1, 1))
    found = broker.partition("t", 0)
    assert found is not None
    for i in range(4):
        batch = build_batch([(b"k", b"v", [])], timestamp_ms=BASE_MS + i * 1000)
        found.log.append(batch, leader_epoch=found.leader_epoch, now_ms=BASE_MS)
    found.log.flush()
    return found


async def list_offset(broker: Broker, version: int, timestamp: int, **extra: Any) -> Any:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
        **extra,
    }
    response = await call(broker, handle_list_offsets, ApiKey.LIST_OFFSETS, version, body)
    [topic] = response.topics
    [partition] = topic.partitions
    return partition


def answer(partition: Any) -> tuple[int, int, int, int]:
    return (partition.error_code, partition.offset, partition.timestamp, partition.leader_epoch)


@pytest.mark.parametrize("version", range(8, NEWEST_VERSION + 1))
async def test_earliest_local_is_the_log_start_like_earliest(
    broker: Broker, replica: PartitionReplica, version: int
) -> None:
    earliest = answer(await list_offset(broker, version, EARLIEST))
    assert answer(await list_offset(broker, version, EARLIEST_LOCAL)) == earliest
    assert earliest == (ErrorCode.NONE, 0, -1, replica.leader_epoch)


async def test_earliest_local_follows_deleted_records(
    broker: Broker, replica: PartitionReplica
) -> None:
    replica.log.delete_records_before(3)
    assert answer(await list_offset(broker, 8, EARLIEST_LOCAL)) == (
        ErrorCode.NONE,
        3,
        -1,
        replica.leader_epoch,
    )


@pytest.mark.parametrize("version", range(9, NEWEST_VERSION + 1))
async def test_latest_tiered_finds_nothing_without_remote_storage(
    broker: Broker, replica: PartitionReplica, version: int
) -> None:
    assert answer(await list_offset(broker, version, LATEST_TIERED)) == (ErrorCode.NONE, -1, -1, -1)


async def test_earliest_pending_upload_finds_nothing_without_remote_storage(
    broker: Broker, replica: PartitionReplica
) -> None:
    assert answer(await list_offset(broker, 11, EARLIEST_PENDING_UPLOAD)) == (
        ErrorCode.NONE,
        -1,
        -1,
        -1,
    )


@pytest.mark.parametrize(
    ("timestamp", "first_version"),
    [(MAX_TIMESTAMP, 7), (EARLIEST_LOCAL, 8), (LATEST_TIERED, 9), (EARLIEST_PENDING_UPLOAD, 11)],
)
async def test_a_special_timestamp_below_its_version_is_unsupported(
    broker: Broker, replica: PartitionReplica, timestamp: int, first_version: int
) -> None:
    refused = await list_offset(broker, first_version - 1, timestamp)
    assert answer(refused) == (ErrorCode.UNSUPPORTED_VERSION, -1, -1, -1)
    served = await list_offset(broker, first_version, timestamp)
    assert served.error_code == ErrorCode.NONE


@pytest.mark.parametrize("version", [10, 11])
async def test_v10_and_later_carry_timeout_ms_and_answer_every_lookup(
    broker: Broker, replica: PartitionReplica, version: int
) -> None:
    timeout = {"timeout_ms": 1}
    assert answer(await list_offset(broker, version, LATEST, **timeout))[:2] == (ErrorCode.NONE, 4)
    assert answer(await list_offset(broker, version, EARLIEST, **timeout))[:2] == (
        ErrorCode.NONE,
        0,
    )
    assert answer(await list_offset(broker, version, MAX_TIMESTAMP, **timeout))[:3] == (
        ErrorCode.NONE,
        3,
        BASE_MS + 3000,
    )
    assert answer(await list_offset(broker, version, BASE_MS + 1500, **timeout))[:3] == (
        ErrorCode.NONE,
        2,
        BASE_MS + 2000,
    )
