"""Index files are checked when loaded (`OffsetIndex.load`, `TimeIndex.load`): each
kind of damage, and each bound exactly, is told apart here at the index itself.
(Segment recovery checks entries against the log again, which hid these cases from
every other test: mutation testing found them.)"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from weir.log.descriptors import DescriptorCache
from weir.log.index import OffsetIndex, TimeIndex

BASE_OFFSET = 100
LOG_SIZE_BYTES = 1000
NEXT_OFFSET = 150


@pytest.fixture
def cache() -> Iterator[DescriptorCache]:
    yield DescriptorCache(8)


def offset_index(
    tmp_path: Path, cache: DescriptorCache, entries: list[tuple[int, int]], *, extra: bytes = b""
) -> OffsetIndex:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(b"".join(struct.pack(">II", *entry) for entry in entries) + extra)
    return OffsetIndex(path, BASE_OFFSET, 3, cache)


def time_index(
    tmp_path: Path, cache: DescriptorCache, entries: list[tuple[int, int]], *, extra: bytes = b""
) -> TimeIndex:
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(b"".join(struct.pack(">qI", *entry) for entry in entries) + extra)
    return TimeIndex(path, BASE_OFFSET, 3, cache)


SANE_OFFSETS = [(0, 0), (10, 200), (20, 400)]  # (relative last offset, position)
SANE_TIMES = [(1000, 0), (2000, 10), (3000, 10)]  # (timestamp, relative offset)


def test_a_sane_offset_index_loads_and_maps_offsets_to_positions(
    tmp_path: Path, cache: DescriptorCache
) -> None:
    index = offset_index(tmp_path, cache, SANE_OFFSETS)
    assert index.load(LOG_SIZE_BYTES, NEXT_OFFSET)
    assert len(index) == 3
    assert index.last_entry() == (120, 400)
    assert (index.lookup(105), index.lookup(110), index.lookup(125)) == (0, 200, 400)
    index.close()


@pytest.mark.parametrize(
    ("entries", "extra", "log_size_bytes", "next_offset"),
    [
        (SANE_OFFSETS, b"\x00", LOG_SIZE_BYTES, NEXT_OFFSET),  # not whole entries
        ([*SANE_OFFSETS, (30, 600)], b"", LOG_SIZE_BYTES, NEXT_OFFSET),  # over entries_max
        ([(0, 0), (10, 200), (10, 400)], b"", LOG_SIZE_BYTES, NEXT_OFFSET),  # offsets repeat
        ([(0, 0), (10, 200), (20, 200)], b"", LOG_SIZE_BYTES, NEXT_OFFSET),  # positions repeat
        (SANE_OFFSETS, b"", 400, NEXT_OFFSET),  # last batch at the log's end
        (SANE_OFFSETS, b"", LOG_SIZE_BYTES, 120),  # last offset at the next offset
    ],
    ids=["partial", "too-many", "offsets", "positions", "past-log-end", "past-next-offset"],
)
def test_a_damaged_offset_index_is_rejected_and_emptied(
    tmp_path: Path,
    cache: DescriptorCache,
    entries: list[tuple[int, int]],
    extra: bytes,
    log_size_bytes: int,
    next_offset: int,
) -> None:
    index = offset_index(tmp_path, cache, entries, extra=extra)
    assert not index.load(log_size_bytes, next_offset)
    assert len(index) == 0 and index.last_entry() is None
    index.close()
    assert (tmp_path / "00000000000000000100.index").stat().st_size == 0


def test_an_offset_index_just_inside_its_bounds_loads(
    tmp_path: Path, cache: DescriptorCache
) -> None:
    index = offset_index(tmp_path, cache, SANE_OFFSETS)  # exactly entries_max entries
    assert index.load(401, 121)  # one byte and one offset inside
    index.close()


def test_a_sane_time_index_loads_and_maps_timestamps_to_offsets(
    tmp_path: Path, cache: DescriptorCache
) -> None:
    index = time_index(tmp_path, cache, SANE_TIMES)  # the last offset may repeat
    assert index.load(NEXT_OFFSET)
    assert index.last_entry() == (3000, 110)
    assert (index.lookup(500), index.lookup(1000), index.lookup(2500)) == (100, 100, 110)
    index.close()


@pytest.mark.parametrize(
    ("entries", "extra", "next_offset"),
    [
        (SANE_TIMES, b"\x00", NEXT_OFFSET),
        ([*SANE_TIMES, (4000, 20)], b"", NEXT_OFFSET),
        ([(1000, 0), (1000, 10)], b"", NEXT_OFFSET),  # timestamps repeat
        ([(1000, 10), (2000, 5)], b"", NEXT_OFFSET),  # offsets go back
        (SANE_TIMES, b"", 110),  # last offset at the next offset
    ],
    ids=["partial", "too-many", "timestamps", "offsets", "past-next-offset"],
)
def test_a_damaged_time_index_is_rejected_and_emptied(
    tmp_path: Path,
    cache: DescriptorCache,
    entries: list[tuple[int, int]],
    extra: bytes,
    next_offset: int,
) -> None:
    index = time_index(tmp_path, cache, entries, extra=extra)
    assert not index.load(next_offset)
    assert len(index) == 0 and index.last_entry() is None
    index.close()


def test_a_time_index_just_inside_its_bounds_loads(tmp_path: Path, cache: DescriptorCache) -> None:
    index = time_index(tmp_path, cache, SANE_TIMES)
    assert index.load(111)
    index.close()
