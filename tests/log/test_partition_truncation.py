"""Truncation (partition_truncation.py): where a follower cuts itself after a
leader change (KIP-279's truncation point), and the cut itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.log.test_partition_append_replicated import (
    everything,
    leader_with,
    open_at,
    replicate,
)
from weir.format.record_batch import iter_batch_headers
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog
from weir.log.partition_truncation import TruncationPoint

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]


def converge(follower: PartitionLog, leader: PartitionLog) -> list[TruncationPoint]:
    """A fetcher's truncation: ask the leader for the follower's latest epoch and
    truncate, again while the answer is not complete (KIP-279)."""
    points = []
    for _ in range(100):
        latest = follower.latest_epoch
        epoch, end = leader.end_offset_for_epoch(-1 if latest is None else latest)
        point = follower.truncation_point(epoch, end)
        points.append(point)
        follower.truncate_to(point.offset)
        if point.complete:
            return points
    raise AssertionError("truncation did not converge")


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


def test_a_follower_without_the_leaders_epoch_truncates_in_rounds(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    """KIP-279's case: the follower wrote epoch 2 as leader after offset 10; the
    new leader had been leader in epoch 1 from offset 5 (which the follower never
    saw) and leads now in epoch 3. The first answer names epoch 1, unknown to the
    follower: it cuts at the end of its epoch 0 and asks again."""
    leader = open_at(tmp_path / "leader" / "t-0", flusher)
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    for log in (leader, follower):
        log.append(batch(5), leader_epoch=0, now_ms=now_ms)
    follower.append(batch(5), leader_epoch=0, now_ms=now_ms)
    follower.append(batch(5), leader_epoch=2, now_ms=now_ms)
    leader.append(batch(7, value_bytes=11), leader_epoch=1, now_ms=now_ms)
    leader.epoch_cache.assign(3, leader.log_end_offset)
    leader.append(batch(2, value_bytes=12), leader_epoch=3, now_ms=now_ms)
    assert converge(follower, leader) == [
        TruncationPoint(10, complete=False),
        TruncationPoint(5, complete=True),
    ]
    replicate(follower, leader, now_ms)
    assert everything(follower) == everything(leader)
    assert follower.epoch_cache.entries == leader.epoch_cache.entries == [(0, 0), (1, 5), (3, 12)]


def test_a_follower_already_matching_the_leader_keeps_its_log(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, flusher, batch, now_ms)
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    follower.append_replicated(everything(leader), now_ms=now_ms)
    leader.epoch_cache.assign(4, leader.log_end_offset)
    leader.append(batch(1), leader_epoch=4, now_ms=now_ms)
    assert converge(follower, leader) == [TruncationPoint(6, complete=True)]
    assert follower.log_end_offset == 6


def test_truncation_point_without_a_common_epoch(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    follower = open_at(tmp_path / "f" / "t-0", flusher)
    follower.append(batch(3), leader_epoch=-1, now_ms=now_ms)  # no epoch cache entry
    assert follower.epoch_cache.entries == []
    # The leader has epochs but the follower none: Kafka keeps up to the leader's end.
    assert follower.truncation_point(2, 1) == TruncationPoint(1, complete=True)
    assert follower.truncation_point(2, 10) == TruncationPoint(3, complete=True)
    # The leader gave no epoch but an offset (OffsetForLeaderEpoch v0 answers).
    assert follower.truncation_point(-1, 2) == TruncationPoint(2, complete=True)
    # UNDEFINED: nothing is known to match, never the high watermark.
    assert follower.truncation_point(-1, -1) == TruncationPoint(0, complete=True)
    assert follower.truncation_point(5, -1) == TruncationPoint(0, complete=True)


def test_truncation_point_below_the_log_start_restarts_the_log_there(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    follower = open_at(tmp_path / "f" / "t-0", flusher)
    follower.append(batch(3), leader_epoch=0, now_ms=now_ms)
    follower.append(batch(3), leader_epoch=2, now_ms=now_ms)
    follower.flush()
    follower.delete_records_before(4)
    assert follower.epoch_cache.entries == [(2, 4)]
    # The leader's epoch 1 ended at 3 (its epoch 3 began there): below this log's
    # start, so nothing here is kept and the log restarts at 3.
    assert follower.truncation_point(1, 3) == TruncationPoint(3, complete=True)
    follower.truncate_to(3)
    assert (follower.log_start_offset, follower.log_end_offset) == (3, 3)


async def test_a_follower_behind_the_leaders_start_restarts_there(
    tmp_path: Path, running_flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    """The leader answered OFFSET_OUT_OF_RANGE with a log start past this log's end."""
    leader = open_at(tmp_path / "leader" / "t-0", running_flusher)
    for _ in range(4):
        leader.append(batch(2), leader_epoch=1, now_ms=now_ms)
    await leader.wait_durable(leader.log_end_offset)
    leader.roll()
    leader.append(batch(1), leader_epoch=2, now_ms=now_ms)
    await leader.wait_durable(leader.log_end_offset)
    leader.delete_records_before(8)
    follower = open_at(tmp_path / "follower" / "t-0", running_flusher)
    follower.append(batch(1), leader_epoch=0, now_ms=now_ms)
    follower.truncate_to(leader.log_start_offset)  # never moves the end up
    assert follower.log_end_offset == 1
    follower.truncate_fully_and_start_at(leader.log_start_offset)
    assert (follower.log_start_offset, follower.log_end_offset) == (8, 8)
    assert follower.epoch_cache.entries == []
    replicate(follower, leader, now_ms)
    await follower.wait_durable(9)
    assert everything(follower) == everything(leader)
    follower.close()
    reopened = open_at(tmp_path / "follower" / "t-0", running_flusher)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (8, 9)
    assert reopened.epoch_cache.entries == [(2, 8)]


def test_truncate_to_removes_batches_at_and_after_offset(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024, index_interval_bytes=0)
    for epoch in range(1, 11):
        log.append(batch(2, value_bytes=200), leader_epoch=epoch, now_ms=now_ms)
    log.flush()
    assert len(log.segments) > 2
    log.truncate_to(7)  # inside batch 6..7: that batch goes too
    assert log.log_end_offset == 6
    assert log.durable_end_offset == 6
    assert log.segments[-1].next_offset == 6
    assert log.epoch_cache.entries == [(e, 2 * (e - 1)) for e in range(1, 4)]
    result = log.read(4, bytes_max=1 << 20, end_offset=10)
    assert [h.base_offset for _, h in iter_batch_headers(result.records)] == [4]
    assert result.next_offset == 6
    assert log.append(batch(1), leader_epoch=11, now_ms=now_ms).base_offset == 6
    log.close()
    log = open_log(segment_bytes=1024, index_interval_bytes=0)
    assert log.log_end_offset == 7


def test_truncate_below_log_start_restarts_the_log(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    for _ in range(5):
        log.append(batch(2), leader_epoch=1, now_ms=now_ms)
    log.flush()
    log.delete_records_before(6)
    log.truncate_to(4)
    assert log.log_start_offset == log.log_end_offset == 4
    assert log.append(batch(1), leader_epoch=2, now_ms=now_ms).base_offset == 4
