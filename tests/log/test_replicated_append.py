"""A follower's log: the leader's batches stored as they are (append_replicated),
and where it cuts itself after a leader change (KIP-279's truncation point)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from weir.format.errors import ErrorCode
from weir.log.config import LogConfig
from weir.log.errors import LogError
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]
PID = 41


def open_at(path: Path, flusher: GroupFlusher) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(), flusher)


def everything(log: PartitionLog) -> bytes:
    data = log.read(log.log_start_offset, bytes_max=1 << 24, end_offset=log.log_end_offset)
    return bytes(data.records)


def leader_with(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> PartitionLog:
    leader = open_at(tmp_path / "leader" / "t-0", flusher)
    leader.append(batch(3), leader_epoch=0, now_ms=now_ms)
    leader.append(batch(2, producer_id=PID, producer_epoch=0, base_sequence=0),
                  leader_epoch=1, now_ms=now_ms)  # fmt: skip
    leader.append(batch(1), leader_epoch=2, now_ms=now_ms)
    return leader


def test_follower_stores_the_leaders_bytes_offsets_and_epochs(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, flusher, batch, now_ms)
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    result = follower.append_replicated(everything(leader), now_ms=now_ms)
    assert result is not None and (result.base_offset, result.last_offset) == (0, 5)
    assert follower.log_end_offset == leader.log_end_offset == 6
    assert everything(follower) == everything(leader)
    assert follower.epoch_cache.entries == leader.epoch_cache.entries == [(0, 0), (1, 3), (2, 5)]
    # Again from the start: everything is below the log end, nothing is written.
    assert follower.append_replicated(everything(leader), now_ms=now_ms) is None


def test_follower_survives_an_unclean_restart(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, flusher, batch, now_ms)
    path = tmp_path / "follower" / "t-0"
    follower = open_at(path, flusher)
    follower.append_replicated(everything(leader), now_ms=now_ms)
    follower.flush()
    for segment in follower.segments:
        segment.close()
    reopened = open_at(path, flusher)
    assert everything(reopened) == everything(leader)
    assert reopened.epoch_cache.entries == [(0, 0), (1, 3), (2, 5)]


def test_partial_trailing_batch_is_left_for_the_next_fetch(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, flusher, batch, now_ms)
    data = everything(leader)
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    follower.append_replicated(data[:-5], now_ms=now_ms)
    assert follower.log_end_offset == 5
    follower.append_replicated(data, now_ms=now_ms)
    assert everything(follower) == data


def test_a_gap_is_refused_and_nothing_is_written(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, flusher, batch, now_ms)
    first = leader.read(0, bytes_max=1, end_offset=3).records
    later = leader.read(5, bytes_max=1 << 20, end_offset=6).records
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    with pytest.raises(LogError) as refused:
        follower.append_replicated(bytes(first) + bytes(later), now_ms=now_ms)
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert follower.log_end_offset == 0


def test_a_corrupt_batch_is_refused(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, flusher, batch, now_ms)
    data = bytearray(everything(leader))
    data[-1] ^= 0xFF
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    with pytest.raises(LogError) as refused:
        follower.append_replicated(data, now_ms=now_ms)
    assert refused.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert follower.log_end_offset == 0


def test_promoted_follower_recognises_a_producers_retry(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, flusher, batch, now_ms)
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    follower.append_replicated(everything(leader), now_ms=now_ms)
    retry = batch(2, producer_id=PID, producer_epoch=0, base_sequence=0)
    result = follower.append(retry, leader_epoch=3, now_ms=now_ms)
    assert result.duplicate and (result.base_offset, result.last_offset) == (3, 4)
    following = batch(1, producer_id=PID, producer_epoch=0, base_sequence=2)
    accepted = follower.append(following, leader_epoch=3, now_ms=now_ms)
    assert not accepted.duplicate and accepted.base_offset == 6


def test_diverged_follower_truncates_to_where_the_logs_agree(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    # The old leader wrote offsets 3..4 in epoch 1 that the new leader never got;
    # the new leader (epoch 2) wrote its own offsets 3.. instead.
    old = open_at(tmp_path / "old" / "t-0", flusher)
    old.append(batch(3), leader_epoch=0, now_ms=now_ms)
    old.append(batch(2), leader_epoch=1, now_ms=now_ms)
    new = open_at(tmp_path / "new" / "t-0", flusher)
    new.append_replicated(old.read(0, bytes_max=1, end_offset=3).records, now_ms=now_ms)
    new.epoch_cache.assign(2, 3)
    new.append(batch(4, value_bytes=20), leader_epoch=2, now_ms=now_ms)
    # The old leader asks for its latest epoch (1): the new leader knows epoch 0
    # at most below it, which ends at 3.
    epoch, end = new.end_offset_for_epoch(1)
    assert (epoch, end) == (0, 3)
    cut = old.truncation_offset(epoch, end)
    assert cut == 3
    old.truncate_to(cut)
    old.append_replicated(everything(new), now_ms=now_ms)
    assert everything(old) == everything(new)
    assert old.epoch_cache.entries == new.epoch_cache.entries


def test_truncation_point_keeps_a_shared_epoch_up_to_the_leaders_end(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    follower = open_at(tmp_path / "f" / "t-0", flusher)
    follower.append(batch(3), leader_epoch=0, now_ms=now_ms)
    follower.append(batch(3), leader_epoch=1, now_ms=now_ms)
    assert follower.truncation_offset(1, 10) == 6  # never past its own end
    assert follower.truncation_offset(1, 4) == 4
    assert follower.truncation_offset(0, 2) == 2
    assert follower.truncation_offset(-1, -1) == 0  # the leader knows none of its epochs


async def test_replicated_records_become_durable(
    tmp_path: Path, running_flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, running_flusher, batch, now_ms)
    follower = open_at(tmp_path / "follower" / "t-0", running_flusher)
    follower.append_replicated(everything(leader), now_ms=now_ms)
    await follower.wait_durable(6)
    assert follower.durable_end_offset == 6
