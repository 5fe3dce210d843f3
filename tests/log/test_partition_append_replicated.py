"""A follower's append (partition_append.py, `append_replicated`): the leader's
batches stored as they are."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from weir.format.errors import ErrorCode
from weir.log.config import LogConfig
from weir.log.errors import LogError
from weir.log.flusher import GroupFlusher
from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]
PID = 41


def open_at(path: Path, flusher: GroupFlusher, config: LogConfig | None = None) -> PartitionLog:
    return PartitionLog.open(path, config or LogConfig(), flusher)


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


def replicate(follower: PartitionLog, leader: PartitionLog, now_ms: int) -> None:
    """Fetch one batch at a time (as a fetch with a small partition_max_bytes
    would) until the follower has everything the leader has."""
    for _ in range(1000):
        if follower.log_end_offset >= leader.log_end_offset:
            return
        fetched = leader.read(
            follower.log_end_offset, bytes_max=1, end_offset=leader.log_end_offset
        )
        follower.append_replicated(fetched.records, now_ms=now_ms)
    raise AssertionError("the follower did not catch up")


def segment_files(log: PartitionLog) -> dict[str, bytes]:
    return {
        path.name: path.read_bytes()
        for path in sorted(log.directory.iterdir())
        if path.suffix in (".log", ".index", ".timeindex")
    }


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


def test_a_gap_left_by_a_compacted_leader_is_kept(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    """Compaction removes whole batches: the leader serves offsets 0..2 then 5..5,
    and the follower stores them with the same gap (and survives a reopen)."""
    leader = leader_with(tmp_path, flusher, batch, now_ms)
    first = leader.read(0, bytes_max=1, end_offset=3).records
    later = leader.read(5, bytes_max=1 << 20, end_offset=6).records
    path = tmp_path / "follower" / "t-0"
    follower = open_at(path, flusher)
    follower.append_replicated(bytes(first) + bytes(later), now_ms=now_ms)
    assert follower.log_end_offset == 6
    assert everything(follower) == bytes(first) + bytes(later)
    follower.flush()
    for segment in follower.segments:
        segment.close()
    assert everything(open_at(path, flusher)) == bytes(first) + bytes(later)


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


async def test_replicated_records_become_durable(
    tmp_path: Path, running_flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, running_flusher, batch, now_ms)
    follower = open_at(tmp_path / "follower" / "t-0", running_flusher)
    follower.append_replicated(everything(leader), now_ms=now_ms)
    await follower.wait_durable(6)
    assert follower.durable_end_offset == 6


def test_follower_rolls_segments_like_the_leader_when_fetching_batch_by_batch(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    config = LogConfig.from_overrides({"segment.bytes": "1024", "index.interval.bytes": "300"})
    leader = open_at(tmp_path / "leader" / "t-0", flusher, config)
    for epoch in range(12):
        leader.append(batch(2, value_bytes=100), leader_epoch=epoch // 4, now_ms=now_ms)
    follower = open_at(tmp_path / "follower" / "t-0", flusher, config)
    replicate(follower, leader, now_ms)
    assert len(leader.segments) > 2
    leader.flush()
    follower.flush()
    assert segment_files(follower) == segment_files(leader)
    assert follower.epoch_cache.entries == leader.epoch_cache.entries == [(0, 0), (1, 8), (2, 16)]


def test_follower_reopens_cleanly_with_its_epochs_and_producers(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, flusher, batch, now_ms)
    path = tmp_path / "follower" / "t-0"
    follower = open_at(path, flusher)
    follower.append_replicated(everything(leader), now_ms=now_ms)
    follower.close()
    reopened = open_at(path, flusher)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (0, 6)
    assert everything(reopened) == everything(leader)
    assert reopened.epoch_cache.entries == [(0, 0), (1, 3), (2, 5)]
    retry = batch(2, producer_id=PID, producer_epoch=0, base_sequence=0)
    result = reopened.append(retry, leader_epoch=3, now_ms=now_ms)
    assert result.duplicate and (result.base_offset, result.last_offset) == (3, 4)


def test_an_overlap_is_refused_and_nothing_is_written(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    leader = leader_with(tmp_path, flusher, batch, now_ms)
    first = bytes(leader.read(0, bytes_max=1, end_offset=3).records)
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    with pytest.raises(LogError) as refused:
        follower.append_replicated(first + first, now_ms=now_ms)
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert follower.log_end_offset == 0 and everything(follower) == b""
    follower.append_replicated(first, now_ms=now_ms)
    # A batch straddling the log end (offsets 2..3 when the log ends at 3).
    straddling = batch(2, base_offset=2, partition_leader_epoch=0)
    with pytest.raises(LogError):
        follower.append_replicated(straddling, now_ms=now_ms)
    assert follower.log_end_offset == 3 and everything(follower) == first


def test_an_older_leader_epoch_is_refused(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    follower.append_replicated(batch(1, base_offset=0, partition_leader_epoch=2), now_ms=now_ms)
    older = batch(1, base_offset=1, partition_leader_epoch=1)
    with pytest.raises(LogError) as refused:
        follower.append_replicated(older, now_ms=now_ms)
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert follower.log_end_offset == 1 and follower.epoch_cache.entries == [(2, 0)]


def test_batches_without_an_epoch_are_stored_and_leave_the_cache_alone(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    records = (
        batch(1, base_offset=0, partition_leader_epoch=-1)
        + batch(1, base_offset=1, partition_leader_epoch=3)
        + batch(1, base_offset=2, partition_leader_epoch=-1)
    )
    result = follower.append_replicated(records, now_ms=now_ms)
    assert result is not None and result.last_offset == 2
    assert everything(follower) == records
    assert follower.epoch_cache.entries == [(3, 1)]


def test_what_the_leader_accepted_is_stored_without_the_topics_limits(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    """Old timestamps, a batch over max.message.bytes, a transaction marker."""
    config = LogConfig.from_overrides(
        {"max.message.bytes": "100", "message.timestamp.before.max.ms": "1000"}
    )
    follower = open_at(tmp_path / "follower" / "t-0", flusher, config)
    old = batch(1, base_offset=0, timestamp_ms=now_ms - 86_400_000, partition_leader_epoch=0)
    large = batch(1, base_offset=1, value_bytes=500, partition_leader_epoch=0)
    marker = batch(1, base_offset=2, is_control=True, is_transactional=True,
                   producer_id=PID, producer_epoch=0, partition_leader_epoch=0)  # fmt: skip
    follower.append_replicated(old + large + marker, now_ms=now_ms)
    assert follower.log_end_offset == 3
    assert everything(follower) == old + large + marker


def test_a_compacted_batch_with_fewer_records_than_offsets_is_stored(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    follower = open_at(tmp_path / "follower" / "t-0", flusher)
    whole = batch(3, base_offset=0, partition_leader_epoch=0)
    # Records 0 and 1 compacted away: the batch keeps last_offset_delta 2, one record.
    compacted = bytearray(whole)
    compacted[57:61] = (1).to_bytes(4, "big")  # records_count
    refused = bytearray(whole)
    refused[57:61] = (4).to_bytes(4, "big")  # more records than offsets: not a batch
    for data in (compacted, refused):  # the CRC is checked last: fix it
        data[17:21] = crc32c.crc32c(bytes(data[21:])).to_bytes(4, "big")
    with pytest.raises(LogError) as too_many:
        follower.append_replicated(refused, now_ms=now_ms)
    assert too_many.value.error_code == ErrorCode.INVALID_RECORD
    result = follower.append_replicated(compacted, now_ms=now_ms)
    assert result is not None and (result.base_offset, result.last_offset) == (0, 2)
