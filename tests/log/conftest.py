"""Fixtures for partition log tests: real files in tmp_path, a real flusher."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from weir.format.record_batch import build_batch
from weir.log.config import LogConfig
from weir.log.flusher import GroupFlusher
from weir.log.manager import LogManager
from weir.log.partition import PartitionLog
from weir.log.partition_metadata import PartitionIdentity

NOW_MS = 1_700_000_000_000
MakeBatch = Callable[..., bytes]


def make_batch(
    count: int = 1, *, value_bytes: int = 10, timestamp_ms: int = NOW_MS, **kw: object
) -> bytes:
    """A valid RecordBatch v2 with `count` records of `value_bytes` each."""
    records = [(f"k{i}".encode(), bytes([i % 256]) * value_bytes, []) for i in range(count)]
    return build_batch(records, timestamp_ms=timestamp_ms, **kw)  # type: ignore[arg-type]


@pytest.fixture
def batch() -> MakeBatch:
    """batch(count=1, value_bytes=10, timestamp_ms=NOW_MS, **build_batch options)."""
    return make_batch


@pytest.fixture
def now_ms() -> int:
    return NOW_MS


@pytest.fixture
def flusher() -> GroupFlusher:
    return GroupFlusher()


@pytest.fixture
async def running_flusher(nursery: trio.Nursery, flusher: GroupFlusher) -> GroupFlusher:
    await nursery.start(flusher.run)
    return flusher


OpenLog = Callable[..., PartitionLog]


def new_partition(
    manager: LogManager, topic: str, index: int, config: LogConfig | None = None
) -> PartitionLog:
    """A new partition of a new topic `topic`, as the broker creates one."""
    identity = PartitionIdentity(uuid.uuid5(uuid.NAMESPACE_URL, topic), topic)
    return manager.create(topic, index, config or LogConfig(), identity)


@pytest.fixture
def open_log(tmp_path: Path, flusher: GroupFlusher) -> OpenLog:
    """open_log(**overrides) opens tmp_path/t-0 with those Kafka topic configs."""

    def opener(config: LogConfig | None = None, **overrides: object) -> PartitionLog:
        if config is None:
            named = {name.replace("_", "."): str(value) for name, value in overrides.items()}
            config = LogConfig.from_overrides(named)
        return PartitionLog.open(tmp_path / "t-0", config, flusher)

    return opener
