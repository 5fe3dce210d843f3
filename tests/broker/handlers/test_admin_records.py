"""DeleteRecords against a real Broker with real partition logs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.offsets_topic import OFFSETS_TOPIC_NAME, ensure_offsets_topic
from weir.broker.handlers.admin_records import handle_delete_records
from weir.broker.partition_replica import PartitionReplica
from weir.controller.controller import TRANSACTION_STATE_TOPIC_NAME
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.wire.protocol import (
    ApiKey,
)

from ..handler_calls import call

NOW_MS = 1_700_000_000_000


def make_broker(data_dir: Path) -> Broker:
    broker = Broker(BrokerConfig(data_dir=data_dir))
    broker.open_logs()
    return broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = make_broker(tmp_path)
    yield broker
    broker.close()


def add_topic(broker: Broker, name: str, partitions: int = 1, **configs: str) -> None:
    overrides = {k.replace("_", "."): v for k, v in configs.items()}
    broker.create_topic(broker.controller.plan_topic(name, partitions, 1, configs=overrides))


def replica_of(broker: Broker, topic: str, index: int = 0) -> PartitionReplica:
    replica = broker.partition(topic, index)
    assert replica is not None
    return replica


def append(
    replica: PartitionReplica, batches: int, records: int = 5, *, durable: bool = True
) -> None:
    for _ in range(batches):
        batch = build_batch([(b"k", b"v" * 100, []) for _ in range(records)], timestamp_ms=NOW_MS)
        replica.log.append(batch, leader_epoch=replica.leader_epoch, now_ms=NOW_MS)
    if durable:
        replica.log.flush()


async def delete_records(
    broker: Broker, topic: str, *offsets: tuple[int, int], version: int = 2
) -> list[Any]:
    body = {
        "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "offset": o} for p, o in offsets]}
        ],
        "timeout_ms": 1000,
    }
    response = await call(broker, handle_delete_records, ApiKey.DELETE_RECORDS, version, body)
    assert [t.name for t in response.topics] == [topic]
    return list(response.topics[0].partitions)


@pytest.mark.parametrize("version", range(0, 3))
async def test_delete_records_moves_the_log_start_offset(broker: Broker, version: int) -> None:
    add_topic(broker, "t")
    replica = replica_of(broker, "t")
    append(replica, 4)  # offsets 0..19
    [result] = await delete_records(broker, "t", (0, 7), version=version)
    assert (result.partition_index, result.error_code, result.low_watermark) == (
        0,
        ErrorCode.NONE,
        7,
    )
    assert replica.log.log_start_offset == 7


async def test_minus_one_deletes_up_to_the_high_watermark(broker: Broker) -> None:
    add_topic(broker, "t")
    replica = replica_of(broker, "t")
    append(replica, 2)
    append(replica, 1, durable=False)  # past the high watermark: kept
    assert replica.high_watermark == 10 and replica.log.log_end_offset == 15
    [result] = await delete_records(broker, "t", (0, -1))
    assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 10)
    assert replica.log.log_start_offset == 10


@pytest.mark.parametrize("offset", [11, 15, 16, -2])
async def test_offsets_beyond_the_high_watermark_are_out_of_range(
    broker: Broker, offset: int
) -> None:
    add_topic(broker, "t")
    replica = replica_of(broker, "t")
    append(replica, 2)
    append(replica, 1, durable=False)
    [result] = await delete_records(broker, "t", (0, offset))
    assert (result.error_code, result.low_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert replica.log.log_start_offset == 0


async def test_offsets_below_the_log_start_change_nothing(broker: Broker) -> None:
    add_topic(broker, "t")
    replica = replica_of(broker, "t")
    append(replica, 2)
    await delete_records(broker, "t", (0, 6))
    [result] = await delete_records(broker, "t", (0, 3))
    assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 6)
    assert replica.log.log_start_offset == 6


async def test_delete_records_on_an_empty_log(broker: Broker) -> None:
    add_topic(broker, "t")
    [result] = await delete_records(broker, "t", (0, -1))
    assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 0)


async def test_unknown_partitions(broker: Broker) -> None:
    add_topic(broker, "t", partitions=2)
    append(replica_of(broker, "t", 1), 1)
    results = await delete_records(broker, "t", (0, 0), (1, 2), (5, 0))
    assert [(r.partition_index, r.error_code, r.low_watermark) for r in results] == [
        (0, ErrorCode.NONE, 0),
        (1, ErrorCode.NONE, 2),
        (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    ]
    [missing] = await delete_records(broker, "nope", (0, 0))
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_compact_only_topics_refuse(broker: Broker) -> None:
    add_topic(broker, "t", cleanup_policy="compact")
    replica = replica_of(broker, "t")
    append(replica, 1)
    [result] = await delete_records(broker, "t", (0, 3))
    assert result.error_code == ErrorCode.POLICY_VIOLATION
    assert replica.log.log_start_offset == 0


async def test_a_client_made_topic_of_an_internal_name_refuses_delete_records(
    broker: Broker,
) -> None:
    # As an older Weir let a client create it: not internal, deletes by retention.
    client_made = TopicRecord(
        name=OFFSETS_TOPIC_NAME, topic_id=uuid.uuid4(), partition_count=1,
        configs={"cleanup.policy": "delete"},
    )  # fmt: skip
    broker.create_topic(client_made)
    replica = replica_of(broker, OFFSETS_TOPIC_NAME)
    append(replica, 2)
    [result] = await delete_records(broker, OFFSETS_TOPIC_NAME, (0, -1))
    assert (result.error_code, result.low_watermark) == (ErrorCode.INVALID_TOPIC_EXCEPTION, -1)
    assert replica.log.log_start_offset == 0


async def test_the_brokers_internal_topics_refuse_delete_records(broker: Broker) -> None:
    ensure_offsets_topic(broker, partition_count=1)
    [offsets] = await delete_records(broker, OFFSETS_TOPIC_NAME, (0, 0))
    [transactions] = await delete_records(broker, TRANSACTION_STATE_TOPIC_NAME, (0, 0))
    assert offsets.error_code == transactions.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_whole_segments_below_the_new_start_are_deleted(broker: Broker) -> None:
    add_topic(broker, "t", segment_bytes="1024")
    replica = replica_of(broker, "t")
    append(replica, 10, records=2)  # ~270-byte batches: several segments
    segments_before = len(replica.log.segments)
    assert segments_before > 2
    [result] = await delete_records(broker, "t", (0, 18))
    assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 18)
    assert len(replica.log.segments) < segments_before
    assert replica.log.segments[0].base_offset <= 18
    read = replica.log.read(18, bytes_max=1 << 20, end_offset=replica.high_watermark)
    assert read is not None


async def test_the_new_log_start_survives_restart(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    add_topic(broker, "t")
    append(replica_of(broker, "t"), 3)
    await delete_records(broker, "t", (0, 12))
    broker.close()
    again = make_broker(tmp_path)
    try:
        assert replica_of(again, "t").log.log_start_offset == 12
    finally:
        again.close()
