"""Kafka's checkpoint text files, replaced atomically and fsynced.

Format (as Kafka writes `leader-epoch-checkpoint`): a version line, a count
line, then one line per entry of space-separated integers. A missing or
unreadable file reads as None; callers fall back to a safe default.

Checkpoints change rarely (a new leader epoch, a truncation, DeleteRecords,
a segment roll), so they are written synchronously on the caller's thread.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

CHECKPOINT_VERSION = 0
CHECKPOINT_BYTES_MAX = 1 << 20
TEMP_SUFFIX = ".tmp"


def read_checkpoint(path: Path, *, width: int) -> list[tuple[int, ...]] | None:
    """Entries of `width` integers each, or None when missing or malformed."""
    try:
        with open(path, "rb") as f:
            text = f.read(CHECKPOINT_BYTES_MAX + 1)
    except FileNotFoundError:
        return None
    if len(text) > CHECKPOINT_BYTES_MAX:
        return None
    try:
        return _parse(text.decode("ascii"), width)
    except (UnicodeDecodeError, ValueError):
        return None


def _parse(text: str, width: int) -> list[tuple[int, ...]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
        raise ValueError("bad checkpoint header")
    count = int(lines[1])
    if count != len(lines) - 2:
        raise ValueError("checkpoint count does not match its entries")
    entries = []
    for line in lines[2:]:
        fields = tuple(int(field) for field in line.split(" "))
        if len(fields) != width:
            raise ValueError("checkpoint entry has the wrong width")
        entries.append(fields)
    return entries


def write_checkpoint(path: Path, entries: Sequence[Sequence[int]], *, sync: bool = True) -> None:
    """Write to a temporary file, fsync it, rename over `path`, fsync the directory.
    `sync=False` skips both fsyncs: only for a value that is safe to lose or to
    find older after a power loss (a later fsync round makes it durable)."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines.extend(" ".join(str(field) for field in entry) for entry in entries)
    write_file_atomically(path, ("\n".join(lines) + "\n").encode("ascii"), sync=sync)


def write_file_atomically(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace `path` by `data` as one step: write a temporary file, fsync it,
    rename it over `path`, fsync the directory (both fsyncs skipped without `sync`)."""
    temp_path = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(temp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp_path, path)
    if sync:
        fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
