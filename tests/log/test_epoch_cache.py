"""The leader epoch cache on its own (weir/log/epoch_cache.py): what a checkpoint
loads as, how a stale entry is dropped, and how moving the log start clamps it."""

from __future__ import annotations

from pathlib import Path

from weir.log.checkpoint import write_checkpoint
from weir.log.epoch_cache import EPOCH_CHECKPOINT_FILE_NAME, LeaderEpochCache


def cache_with(tmp_path: Path, entries: list[tuple[int, int]]) -> LeaderEpochCache:
    write_checkpoint(tmp_path / EPOCH_CHECKPOINT_FILE_NAME, entries, sync=False)
    return LeaderEpochCache(tmp_path)


def test_loading_skips_each_entry_that_breaks_the_order_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    stored = [(0, 0), (-1, 3), (2, -1), (1, 5), (1, 6), (3, 4), (3, 5), (4, 5), (6, 9)]
    cache = cache_with(tmp_path, stored)
    assert cache.entries == [(0, 0), (1, 5), (3, 5), (4, 5), (6, 9)]


def test_assign_takes_only_newer_epochs_and_drops_entries_a_new_one_starts_before(
    tmp_path: Path,
) -> None:
    cache = cache_with(tmp_path, [(0, 0), (2, 10), (3, 20)])
    assert not cache.assign(-1, 30)
    assert not cache.assign(3, 30)
    assert cache.assign(4, 10)  # (2, 10) and (3, 20) started at or after it: stale
    assert cache.entries == [(0, 0), (4, 10)]
    assert cache.assign(5, 10)  # the same start as the latest: both stay
    assert LeaderEpochCache(tmp_path).entries == [(0, 0), (4, 10), (5, 10)]


def test_moving_the_log_start_clamps_the_entry_it_falls_in(tmp_path: Path) -> None:
    stored = [(0, 0), (2, 10), (5, 20)]
    for start_offset, expected in [
        (0, stored),
        (5, [(0, 5), (2, 10), (5, 20)]),
        (10, [(2, 10), (5, 20)]),
        (15, [(2, 15), (5, 20)]),
    ]:
        cache = cache_with(tmp_path, stored)
        cache.truncate_from_start(start_offset)
        assert cache.entries == expected, start_offset
        assert LeaderEpochCache(tmp_path).entries == expected, start_offset
