"""The search for the next intact batch after damage (`find_intact_batch`, used by
recovery and `weir repair`): candidates come from a pattern search over chunks, and
a bounded number of them is checked. Chunk size and bound are shrunk here so that
files of a few KiB cross them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from weir.log import segment
from weir.log.errors import LogCorrupt
from weir.log.segment import find_intact_batch

from .conftest import make_batch

# A search that stops advancing over the chunks must fail, not hang the suite.
pytestmark = pytest.mark.timeout(10)

CHUNK_BYTES = 4096
FILLER = b"\xff"  # never starts a candidate: a candidate begins with three zero bytes


def false_candidate() -> bytes:
    """Bytes the pattern search takes for a batch start, which are no batch."""
    return b"\x00\x00\x00" + b"\x01" * 13 + b"\x02" + FILLER * 63


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segment, "RECOVERY_CHUNK_BYTES", CHUNK_BYTES)


@pytest.fixture
def open_fds() -> Iterator[list[int]]:
    """Descriptors the test opened, closed at teardown."""
    fds: list[int] = []
    yield fds
    for fd in fds:
        os.close(fd)


def open_with(tmp_path: Path, data: bytes, fds: list[int]) -> int:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    fds.append(fd)
    return fd


def search(fd: int, tmp_path: Path, start: int = 0) -> tuple[int, int] | None:
    return find_intact_batch(fd, start, 0, 0, tmp_path / "00000000000000000000.log")


@pytest.mark.parametrize("position", [CHUNK_BYTES * 3 - 10, CHUNK_BYTES * 2])
def test_finds_a_batch_chunks_away_straddling_or_starting_at_a_chunk_boundary(
    tmp_path: Path, open_fds: list[int], position: int
) -> None:
    fd = open_with(tmp_path, FILLER * position + make_batch(3), open_fds)
    assert search(fd, tmp_path) == (position, 0)
    assert search(fd, tmp_path, start=5) == (position, 0)


def test_finds_nothing_in_damage_alone(tmp_path: Path, open_fds: list[int]) -> None:
    fd = open_with(tmp_path, FILLER * CHUNK_BYTES * 2 + false_candidate(), open_fds)
    assert search(fd, tmp_path) is None


def test_checks_exactly_the_candidate_limit_then_gives_up(
    tmp_path: Path, open_fds: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment, "RESYNC_CANDIDATES_MAX", 3)
    within = false_candidate() * 2 + make_batch(1)  # the batch is the 3rd candidate
    fd = open_with(tmp_path, within, open_fds)
    assert search(fd, tmp_path) == (2 * len(false_candidate()), 0)
    beyond = false_candidate() * 3 + make_batch(1)  # the 4th
    fd = open_with(tmp_path, beyond, open_fds)
    with pytest.raises(LogCorrupt, match="too many damaged bytes"):
        search(fd, tmp_path)
