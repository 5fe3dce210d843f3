"""Partition directories: identity (`partition.metadata`), strict create and
open, unknown directories set aside, never deleted with records in them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from weir.log.config import LogConfig
from weir.log.errors import LogDamaged
from weir.log.flusher import GroupFlusher
from weir.log.manager import STRAY_DIRECTORY_NAME, LogManager
from weir.log.partition import PartitionLog
from weir.log.partition_metadata import (
    PartitionIdentity,
    PartitionMetadataError,
    decode_topic_id,
    encode_topic_id,
    read_partition_metadata,
)

MakeBatch = Callable[..., bytes]


def identity(name: str = "orders") -> PartitionIdentity:
    return PartitionIdentity(uuid.uuid4(), name)


def test_partition_metadata_round_trips_and_uses_kafkas_topic_id_form(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, GroupFlusher())
    orders = identity()
    manager.create("orders", 0, LogConfig(), orders)
    text = (tmp_path / "orders-0" / "partition.metadata").read_text()
    assert text.splitlines()[:2] == ["version: 0", f"topic_id: {encode_topic_id(orders.topic_id)}"]
    assert len(encode_topic_id(orders.topic_id)) == 22  # base64 without padding, as Kafka
    assert decode_topic_id(encode_topic_id(orders.topic_id)) == orders.topic_id
    assert read_partition_metadata(tmp_path / "orders-0") == orders


def test_malformed_partition_metadata_is_reported(tmp_path: Path) -> None:
    (tmp_path / "partition.metadata").write_text("version: 7\ntopic_id: x\n")
    with pytest.raises(PartitionMetadataError):
        read_partition_metadata(tmp_path)


def test_create_refuses_an_existing_directory(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, GroupFlusher())
    (tmp_path / "orders-0").mkdir()
    with pytest.raises(FileExistsError):
        manager.create("orders", 0, LogConfig(), identity())


def test_open_existing_never_replaces_a_missing_directory(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, GroupFlusher())
    with pytest.raises(LogDamaged, match="directory .* is missing"):
        manager.open_existing("orders", 0, LogConfig(), identity())
    assert not (tmp_path / "orders-0").exists()


def test_open_existing_refuses_a_directory_of_another_topic_id(tmp_path: Path) -> None:
    LogManager(tmp_path, GroupFlusher()).create("orders", 0, LogConfig(), identity())
    with pytest.raises(LogDamaged, match="names topic 'orders' with id"):
        LogManager(tmp_path, GroupFlusher()).open_existing("orders", 0, LogConfig(), identity())


def test_open_existing_adopts_a_directory_written_before_partition_metadata(
    tmp_path: Path,
) -> None:
    PartitionLog.open(tmp_path / "orders-0", LogConfig(), GroupFlusher()).close()
    orders = identity()
    LogManager(tmp_path, GroupFlusher()).open_existing("orders", 0, LogConfig(), orders)
    assert read_partition_metadata(tmp_path / "orders-0") == orders


def test_sweep_sets_aside_unknown_data_and_removes_only_what_is_safe(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    manager = LogManager(tmp_path, GroupFlusher())
    known, deleted, stranger, empty = (
        identity("known"),
        identity("gone"),
        identity("x"),
        identity("e"),
    )
    for name, ident in (("known", known), ("gone", deleted), ("x", stranger), ("e", empty)):
        log = manager.create(name, 0, LogConfig(), ident)
        if name != "e":
            log.append(batch(3), leader_epoch=0, now_ms=now_ms)
        log.close()
    fresh = LogManager(tmp_path, GroupFlusher())
    set_aside = fresh.sweep_unknown({("known", 0): known.topic_id}, [deleted.topic_id])
    assert set_aside == ["x-0"]
    assert (tmp_path / "known-0").is_dir()
    assert not (tmp_path / "gone-0").exists() and not (tmp_path / "e-0").exists()
    kept = tmp_path / STRAY_DIRECTORY_NAME / "x-0.0"
    assert read_partition_metadata(kept) == stranger
    assert sum(p.stat().st_size for p in kept.glob("*.log")) > 0


def test_sweep_sets_aside_a_directory_of_an_older_topic_with_the_same_name(
    tmp_path: Path, batch: MakeBatch, now_ms: int
) -> None:
    old = LogManager(tmp_path, GroupFlusher()).create("orders", 0, LogConfig(), identity())
    old.append(batch(1), leader_epoch=0, now_ms=now_ms)
    old.close()
    current = identity()
    manager = LogManager(tmp_path, GroupFlusher())
    assert manager.sweep_unknown({("orders", 0): current.topic_id}, []) == ["orders-0"]
    with pytest.raises(LogDamaged, match="is missing"):
        manager.open_existing("orders", 0, LogConfig(), current)


def test_deleting_a_249_character_topic_renames_within_the_name_limit(tmp_path: Path) -> None:
    name = "t" * 249
    manager = LogManager(tmp_path, GroupFlusher())
    manager.create(name, 999, LogConfig(), identity(name))
    manager.delete(name, 999)
    assert list(tmp_path.iterdir()) == []
