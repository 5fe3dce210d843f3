"""The partition log applies the idempotent-producer rules and rebuilds them on open."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from weir.format.errors import ErrorCode
from weir.format.record_batch import iter_batch_headers
from weir.log.errors import LogError
from weir.log.partition import PartitionLog
from weir.log.producer_snapshots import snapshot_offsets

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]
PID = 77


def produce(
    log: PartitionLog, batch: MakeBatch, now_ms: int, sequence: int, count: int = 2, epoch: int = 0
) -> tuple[int, int, bool]:
    built = batch(count, producer_id=PID, producer_epoch=epoch, base_sequence=sequence)
    result = log.append(built, leader_epoch=0, now_ms=now_ms)
    return result.base_offset, result.last_offset, result.duplicate


def stored_sequences(log: PartitionLog) -> list[int]:
    data = log.read(log.log_start_offset, bytes_max=1 << 24, end_offset=log.log_end_offset)
    return [header.base_sequence for _, header in iter_batch_headers(data.records)]


def crash(log: PartitionLog) -> None:
    log.flush()
    for segment in log.segments:
        segment.close()


def test_retried_batch_is_answered_with_its_offsets_and_not_stored_twice(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    assert produce(log, batch, now_ms, 0) == (0, 1, False)
    assert produce(log, batch, now_ms, 2) == (2, 3, False)
    assert produce(log, batch, now_ms, 0) == (0, 1, True)
    assert log.log_end_offset == 4
    assert stored_sequences(log) == [0, 2]


def test_sequence_gap_is_refused_with_out_of_order(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    produce(log, batch, now_ms, 0)
    with pytest.raises(LogError) as raised:
        produce(log, batch, now_ms, 5)
    assert raised.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 2


def test_fenced_epoch_is_refused(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log()
    produce(log, batch, now_ms, 0, epoch=2)
    with pytest.raises(LogError) as raised:
        produce(log, batch, now_ms, 2, epoch=1)
    assert raised.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_batches_without_producer_id_are_never_deduplicated(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    same = batch(2)
    log.append(same, leader_epoch=0, now_ms=now_ms)
    log.append(same, leader_epoch=0, now_ms=now_ms)
    assert log.log_end_offset == 4


def test_state_survives_clean_close_through_the_snapshot(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    produce(log, batch, now_ms, 0)
    produce(log, batch, now_ms, 2)
    log.close()
    assert snapshot_offsets(log.directory) == [4]
    reopened = open_log()
    assert produce(reopened, batch, now_ms, 2) == (2, 3, True)
    assert produce(reopened, batch, now_ms, 4) == (4, 5, False)


def test_state_is_rebuilt_from_batches_after_a_crash(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024)
    for sequence in range(0, 60, 2):
        produce(log, batch, now_ms, sequence)
    assert len(log.segments) > 2
    crash(log)
    reopened = open_log(segment_bytes=1024)
    assert produce(reopened, batch, now_ms, 58) == (58, 59, True)
    with pytest.raises(LogError):
        produce(reopened, batch, now_ms, 80)
    assert produce(reopened, batch, now_ms, 60)[2] is False


def test_snapshot_above_the_recovered_end_is_discarded(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    """A roll snapshot can describe batches a crash took away: it must not be used."""
    log = open_log(segment_bytes=1024)
    for sequence in range(0, 40, 2):
        produce(log, batch, now_ms, sequence)
    crash(log)
    active = log.segments[-1]
    assert snapshot_offsets(log.directory)[-1] == active.base_offset
    os.truncate(active.log_path, 0)  # the unsynced tail is gone...
    os.truncate(log.segments[-2].log_path, 200)  # ...and part of the segment before
    directory = log.directory
    reopened = open_log(segment_bytes=1024)
    assert all(offset <= reopened.log_end_offset for offset in snapshot_offsets(directory))
    lost = reopened.log_end_offset
    assert lost < active.base_offset
    # The producer's last surviving batch is a duplicate; the lost ones are not.
    assert produce(reopened, batch, now_ms, lost - 2)[2] is True
    assert produce(reopened, batch, now_ms, lost) == (lost, lost + 1, False)


def test_corrupt_snapshot_falls_back_to_scanning_the_log(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    produce(log, batch, now_ms, 0)
    log.close()
    (offset,) = snapshot_offsets(log.directory)
    path = log.directory / f"{offset:020d}.snapshot"
    path.write_bytes(b"WPS1" + b"\xff" * 40)
    reopened = open_log()
    assert produce(reopened, batch, now_ms, 0) == (0, 1, True)


def test_truncation_forgets_the_truncated_batches(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    for sequence in range(0, 8, 2):
        produce(log, batch, now_ms, sequence)
    log.truncate_to(4)
    assert produce(log, batch, now_ms, 2) == (2, 3, True)
    assert produce(log, batch, now_ms, 4) == (4, 5, False)


def test_producers_idle_past_expiration_become_unknown(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    produce(log, batch, now_ms, 0)
    assert log.expire_producers(now_ms + 10, expiration_ms=5) == 1
    assert produce(log, batch, now_ms, 9)[2] is False  # any sequence is accepted again
