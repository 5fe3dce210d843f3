"""Fetch v12+: a fetcher whose last fetched epoch diverged is told where to truncate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.handlers.fetch import handle_fetch
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.wire.protocol import (
    ApiKey,
)

from ..handler_calls import call

NOW_MS = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path))
    broker.open_logs()
    broker.create_topic(broker.controller.plan_topic("t", 1, 1))
    replica = broker.partition("t", 0)
    assert replica is not None
    records = [(b"k", b"v", [])] * 5
    for epoch in (0, 0, 2):  # offsets 0-9 in epoch 0, 10-14 in epoch 2
        replica.log.append(
            build_batch(records, timestamp_ms=NOW_MS), leader_epoch=epoch, now_ms=NOW_MS
        )
    replica.log.flush()
    yield broker
    broker.close()


async def fetch(broker: Broker, offset: int, last_fetched_epoch: int, version: int = 12) -> Any:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": last_fetched_epoch,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    response = await call(broker, handle_fetch, ApiKey.FETCH, version, body)
    return response.responses[0].partitions[0]


async def test_fetch_past_the_end_of_the_last_fetched_epoch_returns_diverging_epoch(
    broker: Broker,
) -> None:
    partition = await fetch(broker, offset=12, last_fetched_epoch=0)
    assert partition.error_code == ErrorCode.NONE
    assert (partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (0, 10)
    assert len(partition.records) == 0


async def test_epoch_unknown_to_the_leader_maps_to_the_largest_epoch_below_it(
    broker: Broker,
) -> None:
    partition = await fetch(broker, offset=10, last_fetched_epoch=1)
    assert (partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (0, 10)
    assert len(partition.records) == 0


async def test_consistent_last_fetched_epoch_gets_records(broker: Broker) -> None:
    partition = await fetch(broker, offset=10, last_fetched_epoch=0)
    assert partition.diverging_epoch.epoch == -1
    assert len(partition.records) > 0


async def test_without_last_fetched_epoch_there_is_no_divergence_check(broker: Broker) -> None:
    partition = await fetch(broker, offset=12, last_fetched_epoch=-1)
    assert partition.diverging_epoch.epoch == -1
    assert len(partition.records) > 0
