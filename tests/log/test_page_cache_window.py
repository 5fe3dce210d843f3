"""Synced log bytes older than the page cache window are evicted after a round;
the newest window stays cached, and reads are unaffected."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from weir.broker.broker import build_flusher
from weir.broker.config import BrokerConfig, ConfigError, load_config
from weir.format.record_batch import iter_batch_headers
from weir.log.config import LogConfig
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog
from weir.log.partition_durability import PAGE_CACHE_EVICT_BYTES_MIN

MakeBatch = Callable[..., bytes]
WINDOW_BYTES = 256 * 1024


def open_partition(tmp_path: Path, flusher: GroupFlusher, **configs: str) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", LogConfig.from_overrides(configs), flusher)


async def append_durably(log: PartitionLog, batch: MakeBatch, now_ms: int, count: int) -> None:
    for _ in range(count):
        result = log.append(batch(4, value_bytes=2000), leader_epoch=0, now_ms=now_ms)
        with trio.fail_after(10):
            await log.wait_durable(result.last_offset + 1)


async def test_bytes_behind_the_window_are_evicted_in_steps(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    flusher = GroupFlusher(page_cache_window_bytes=WINDOW_BYTES)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher)
    await append_durably(log, batch, now_ms, 20)  # about 160 KiB: inside the window
    assert flusher.page_cache_dropped_bytes == 0
    await append_durably(log, batch, now_ms, 200)  # about 1.6 MiB
    active = log.segments[-1]
    assert flusher.page_cache_dropped_bytes == active.page_cache_evicted_below
    assert active.page_cache_evicted_below >= PAGE_CACHE_EVICT_BYTES_MIN
    assert active.page_cache_evicted_below <= active.size_bytes - WINDOW_BYTES


async def test_sealed_segments_are_evicted_whole_once_behind_the_window(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    flusher = GroupFlusher(page_cache_window_bytes=WINDOW_BYTES)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher, **{"segment.bytes": str(128 * 1024)})
    await append_durably(log, batch, now_ms, 120)  # about 1 MiB over 8 segments
    *sealed, active = log.segments
    assert len(sealed) > 4
    kept_bytes = active.size_bytes
    for segment in reversed(sealed):
        if kept_bytes >= WINDOW_BYTES:  # wholly behind the window
            assert segment.page_cache_evicted_below == segment.size_bytes
        kept_bytes += segment.size_bytes
    assert flusher.page_cache_dropped_bytes > 0


async def test_evicted_records_read_back_unchanged(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    flusher = GroupFlusher(page_cache_window_bytes=0)
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher, **{"segment.bytes": str(256 * 1024)})
    await append_durably(log, batch, now_ms, 150)
    sealed_bytes = sum(segment.size_bytes for segment in log.segments[:-1])
    assert sealed_bytes > 0
    assert flusher.page_cache_dropped_bytes >= sealed_bytes
    offsets = []
    offset = 0
    while offset < log.log_end_offset:
        result = log.read(offset, bytes_max=1 << 20, end_offset=log.log_end_offset)
        offsets += [h.base_offset for _, h in iter_batch_headers(result.records)]
        offset = result.next_offset
    assert offsets == list(range(0, 600, 4))


async def test_no_window_evicts_nothing(
    tmp_path: Path, nursery: trio.Nursery, batch: MakeBatch, now_ms: int
) -> None:
    flusher = GroupFlusher()
    await nursery.start(flusher.run)
    log = open_partition(tmp_path, flusher)
    await append_durably(log, batch, now_ms, 200)
    assert flusher.page_cache_dropped_bytes == 0
    assert log.segments[-1].page_cache_evicted_below == 0


def test_broker_window_defaults_to_16_mib_and_minus_one_keeps_everything(tmp_path: Path) -> None:
    flusher = build_flusher(BrokerConfig(data_dir=tmp_path))
    assert flusher.page_cache_window_bytes == 16 * 1024 * 1024
    flusher.close()
    flusher = build_flusher(BrokerConfig(data_dir=tmp_path, page_cache_window_bytes=-1))
    assert flusher.page_cache_window_bytes is None
    flusher.close()


@pytest.mark.parametrize("value", ["-2", '"big"'])
def test_a_bad_window_is_a_config_error(tmp_path: Path, value: str) -> None:
    path = tmp_path / "weir.toml"
    path.write_text(f"page_cache_window_bytes = {value}\n")
    with pytest.raises(ConfigError, match="page_cache_window_bytes"):
        load_config(["--config", str(path)], {})
