"""Kafka's checkpoint text files (weir/log/checkpoint.py): what reads back, and what
reads as None (missing or malformed) instead of raising."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.log.checkpoint import read_checkpoint, write_checkpoint


@pytest.mark.parametrize("entries", [[], [(5, 6)], [(0, 0), (3, 40), (7, 900)]])
def test_written_entries_read_back(tmp_path: Path, entries: list[tuple[int, int]]) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_checkpoint(path, entries, sync=False)
    assert read_checkpoint(path, width=2) == entries


def test_a_checkpoint_without_its_final_newline_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    path.write_text("0\n1\n5 6")
    assert read_checkpoint(path, width=2) == [(5, 6)]


@pytest.mark.parametrize(
    "text",
    ["", "0\n", "1\n0\n", "0\n2\n5 6\n", "0\n1\n5\n", "0\n1\n5 x\n", "0\n1\n5 6\n7 8\n"],
    ids=["empty", "no-count", "version", "short", "width", "not-a-number", "long"],
)
def test_a_malformed_checkpoint_reads_as_none(tmp_path: Path, text: str) -> None:
    path = tmp_path / "checkpoint"
    path.write_text(text)
    assert read_checkpoint(path, width=2) is None


def test_a_missing_checkpoint_reads_as_none(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "absent", width=2) is None
