"""The partition log's transactions: transactional batches, markers, the
aborted-transaction index and the last stable offset (KIP-98)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from weir.format.control_records import ControlRecordType, read_end_txn_marker
from weir.format.errors import ErrorCode
from weir.format.record_batch import iter_batch_headers
from weir.log.errors import LogError
from weir.log.partition import PartitionLog
from weir.log.transaction_index import AbortedTxn

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]
PID = 41
OTHER_PID = 42


def txn_data(
    log: PartitionLog,
    batch: MakeBatch,
    now_ms: int,
    sequence: int,
    *,
    pid: int = PID,
    epoch: int = 0,
    count: int = 2,
) -> tuple[int, int]:
    built = batch(
        count, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
        is_transactional=True,
    )  # fmt: skip
    result = log.append(built, leader_epoch=0, now_ms=now_ms)
    return result.base_offset, result.last_offset


def marker(
    log: PartitionLog,
    now_ms: int,
    *,
    commit: bool,
    pid: int = PID,
    epoch: int = 0,
    coordinator_epoch: int = 0,
    transaction_version: int = 1,
) -> int:
    result = log.append_txn_marker(
        producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
        commit=commit, leader_epoch=0, now_ms=now_ms, transaction_version=transaction_version,
    )  # fmt: skip
    assert result.base_offset == result.last_offset
    return result.base_offset


def aborted_entries(log: PartitionLog) -> list[AbortedTxn]:
    return [entry for segment in log.segments for entry in segment.txn_index.entries()]


def test_a_transactional_batch_opens_a_transaction_at_its_first_offset(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(3), leader_epoch=0, now_ms=now_ms)
    assert txn_data(log, batch, now_ms, 0) == (3, 4)
    txn_data(log, batch, now_ms, 2)
    assert log.ongoing_transaction_first_offset(PID) == 3
    assert log.ongoing_transaction_first_offset(OTHER_PID) is None
    log.flush()
    assert log.last_stable_offset == 3
    assert log.durable_end_offset == 7


def test_transactional_batches_follow_the_sequence_and_epoch_rules(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0, epoch=1)
    with pytest.raises(LogError) as gap:
        txn_data(log, batch, now_ms, 5, epoch=1)
    assert gap.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(LogError) as fenced:
        txn_data(log, batch, now_ms, 2, epoch=0)
    assert fenced.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    # A newer epoch fences the older one; it must start its sequences at 0.
    with pytest.raises(LogError) as restart:
        txn_data(log, batch, now_ms, 2, epoch=2)
    assert restart.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    txn_data(log, batch, now_ms, 0, epoch=2)
    with pytest.raises(LogError) as old:
        txn_data(log, batch, now_ms, 2, epoch=1)
    assert old.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_non_transactional_batch_inside_a_transaction_is_refused(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0)
    with pytest.raises(LogError) as raised:
        log.append(
            batch(1, producer_id=PID, producer_epoch=0, base_sequence=2),
            leader_epoch=0, now_ms=now_ms,
        )  # fmt: skip
    assert raised.value.error_code == ErrorCode.INVALID_TXN_STATE


def test_a_client_cannot_forge_a_marker(open_log: OpenLog, batch: MakeBatch, now_ms: int) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0)
    forged = batch(
        1, producer_id=PID, producer_epoch=0, base_sequence=-1, is_transactional=True,
        is_control=True,
    )  # fmt: skip
    with pytest.raises(LogError) as raised:
        log.append(forged, leader_epoch=0, now_ms=now_ms)
    assert raised.value.error_code == ErrorCode.INVALID_RECORD
    assert log.ongoing_transaction_first_offset(PID) == 0


def test_a_coordinator_batch_without_sequence_opens_a_transaction(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    offsets = batch(1, producer_id=PID, producer_epoch=3, base_sequence=-1, is_transactional=True)
    with pytest.raises(LogError) as client:
        log.append(offsets, leader_epoch=0, now_ms=now_ms)
    assert client.value.error_code == ErrorCode.INVALID_RECORD
    log.append(offsets, leader_epoch=0, now_ms=now_ms, origin_coordinator=True)
    log.append(offsets, leader_epoch=0, now_ms=now_ms, origin_coordinator=True)
    assert log.ongoing_transaction_first_offset(PID) == 0
    old = batch(1, producer_id=PID, producer_epoch=2, base_sequence=-1, is_transactional=True)
    with pytest.raises(LogError) as fenced:
        log.append(old, leader_epoch=0, now_ms=now_ms, origin_coordinator=True)
    assert fenced.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert marker(log, now_ms, commit=True, epoch=3) == 2
    assert log.ongoing_transaction_first_offset(PID) is None


def test_a_commit_marker_is_a_control_batch_that_ends_the_transaction(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0)
    offset = marker(log, now_ms, commit=True, coordinator_epoch=4)
    assert offset == 2
    assert log.ongoing_transaction_first_offset(PID) is None
    log.flush()
    assert log.last_stable_offset == log.high_watermark == 3
    stored = log.read(2, bytes_max=1 << 20, end_offset=3).records
    [(_, header)] = list(iter_batch_headers(stored))
    assert header.is_control and header.is_transactional and header.producer_id == PID
    found = read_end_txn_marker(stored)
    assert found is not None
    assert (found.control_type, found.coordinator_epoch) == (ControlRecordType.COMMIT, 4)
    assert aborted_entries(log) == []


def test_an_abort_marker_is_indexed_with_the_lso_at_its_completion(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0)  # 0-1
    txn_data(log, batch, now_ms, 0, pid=OTHER_PID)  # 2-3
    assert marker(log, now_ms, commit=False) == 4
    assert aborted_entries(log) == [AbortedTxn(PID, 0, 4, 2)]
    assert marker(log, now_ms, commit=False, pid=OTHER_PID) == 5
    assert aborted_entries(log) == [AbortedTxn(PID, 0, 4, 2), AbortedTxn(OTHER_PID, 2, 5, 6)]
    log.flush()
    assert log.aborted_transactions(0, 6) == [(PID, 0), (OTHER_PID, 2)]
    assert log.aborted_transactions(3, 6) == [(PID, 0), (OTHER_PID, 2)]
    assert log.aborted_transactions(5, 6) == [(OTHER_PID, 2)]
    assert log.aborted_transactions(0, 2) == [(PID, 0)]


def test_a_marker_from_an_older_producer_epoch_is_refused(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0, epoch=5)
    with pytest.raises(LogError) as raised:
        marker(log, now_ms, commit=True, epoch=4)
    assert raised.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 2


def test_a_marker_from_an_older_coordinator_epoch_is_fenced(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0)
    marker(log, now_ms, commit=True, coordinator_epoch=7)
    txn_data(log, batch, now_ms, 2)
    with pytest.raises(LogError) as raised:
        marker(log, now_ms, commit=False, coordinator_epoch=6)
    assert raised.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert log.ongoing_transaction_first_offset(PID) == 3


def test_a_delayed_marker_of_transaction_version_2_cannot_end_the_next_transaction(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    """KIP-890: every EndTxn bumps the epoch, and the marker carries the bumped
    one; the next transaction's data uses it, so a marker with that same epoch
    arriving late belongs to the earlier transaction."""
    log = open_log()
    txn_data(log, batch, now_ms, 0, epoch=0)
    marker(log, now_ms, commit=True, epoch=1, transaction_version=2)
    txn_data(log, batch, now_ms, 0, epoch=1)
    with pytest.raises(LogError) as raised:
        marker(log, now_ms, commit=True, epoch=1, transaction_version=2)  # the delayed one
    assert raised.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.ongoing_transaction_first_offset(PID) == 3
    marker(log, now_ms, commit=False, epoch=2, transaction_version=2)
    assert log.ongoing_transaction_first_offset(PID) is None


def test_a_marker_without_an_open_transaction_is_written_and_ends_nothing(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    assert marker(log, now_ms, commit=False, pid=99, epoch=2) == 0
    assert log.log_end_offset == 1
    assert aborted_entries(log) == []
    log.flush()
    assert log.last_stable_offset == 1


def crash(log: PartitionLog) -> None:
    """The process dies: what was written stays (the page cache), no clean close."""
    log.flush()
    for segment in log.segments:
        segment.close()


def test_an_open_transaction_keeps_the_lso_after_a_crash_until_its_marker(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log(segment_bytes=1024)
    log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    txn_data(log, batch, now_ms, 0)  # 2-3
    for sequence in range(0, 40, 2):  # other producers' data past several rolls
        log.append(
            batch(2, producer_id=7, producer_epoch=0, base_sequence=sequence),
            leader_epoch=0, now_ms=now_ms,
        )  # fmt: skip
    assert len(log.segments) > 2
    crash(log)
    reopened = open_log(segment_bytes=1024)
    assert reopened.ongoing_transaction_first_offset(PID) == 2
    assert reopened.last_stable_offset == 2
    marker(reopened, now_ms, commit=True)
    reopened.flush()
    assert reopened.last_stable_offset == reopened.log_end_offset


def test_the_aborted_index_and_open_transactions_survive_a_clean_close(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0)  # 0-1
    txn_data(log, batch, now_ms, 0, pid=OTHER_PID)  # 2-3
    marker(log, now_ms, commit=False)  # 4
    log.close()
    reopened = open_log()
    assert aborted_entries(reopened) == [AbortedTxn(PID, 0, 4, 2)]
    assert reopened.ongoing_transaction_first_offset(OTHER_PID) == 2
    assert reopened.last_stable_offset == 2


def test_a_lost_aborted_index_is_rebuilt_after_a_crash(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0)
    marker(log, now_ms, commit=False)  # 2
    txn_data(log, batch, now_ms, 0, pid=OTHER_PID, count=3)  # 3-5
    marker(log, now_ms, commit=False, pid=OTHER_PID)  # 6
    log.roll()  # a producer snapshot at 7: the replay from it alone misses both aborts
    log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    crash(log)  # before a recovery point covered the sealed segment
    index_path = log.segments[0].txn_index.path
    index_path.unlink()  # never synced: lost with the machine
    reopened = open_log()
    assert aborted_entries(reopened) == [AbortedTxn(PID, 0, 2, 3), AbortedTxn(OTHER_PID, 3, 6, 7)]
    assert index_path.exists()


def test_a_damaged_aborted_index_of_a_sealed_segment_is_rebuilt(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0)
    marker(log, now_ms, commit=False)  # 2
    log.roll()
    log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    log.close()
    sealed = log.segments[0].txn_index.path
    sealed.write_bytes(b"\x00\x07" + b"\xff" * 32)  # an unknown version
    reopened = open_log()
    assert aborted_entries(reopened) == [AbortedTxn(PID, 0, 2, 3)]
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == [(PID, 0)]


def test_truncating_away_an_abort_marker_reopens_its_transaction(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0)  # 0-1
    assert marker(log, now_ms, commit=False) == 2
    log.flush()
    assert log.last_stable_offset == 3
    log.truncate_to(2)
    assert aborted_entries(log) == []
    assert log.ongoing_transaction_first_offset(PID) == 0
    assert log.last_stable_offset == 0
    assert marker(log, now_ms, commit=True) == 2
    log.flush()
    assert log.last_stable_offset == 3


def test_the_lso_waits_for_the_marker_to_pass_a_replicated_high_watermark(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.update_high_watermark(0)
    txn_data(log, batch, now_ms, 0)  # 0-1
    marker(log, now_ms, commit=True)  # 2
    log.flush()
    log.update_high_watermark(2)  # the data replicated, the marker not yet
    assert log.last_stable_offset == 0
    log.update_high_watermark(3)
    assert log.last_stable_offset == 3
    assert log.last_stable_offset <= log.high_watermark


def test_a_follower_learns_transactions_and_aborts_from_replicated_batches(
    open_log: OpenLog, tmp_path: object, batch: MakeBatch, now_ms: int
) -> None:
    leader = open_log()
    txn_data(leader, batch, now_ms, 0)  # 0-1
    txn_data(leader, batch, now_ms, 0, pid=OTHER_PID)  # 2-3
    marker(leader, now_ms, commit=False)  # 4
    leader.flush()
    stored = leader.read(0, bytes_max=1 << 20, end_offset=leader.log_end_offset).records
    leader.close()
    import shutil

    shutil.rmtree(leader.directory)
    follower = open_log()
    follower.append_replicated(stored, now_ms=now_ms)
    assert bytes(follower.read(0, bytes_max=1 << 20, end_offset=5).records) == bytes(stored)
    assert aborted_entries(follower) == [AbortedTxn(PID, 0, 4, 2)]
    assert follower.ongoing_transaction_first_offset(OTHER_PID) == 2
    assert follower.ongoing_transaction_first_offset(PID) is None


def test_deleted_segments_take_their_aborted_index_with_them(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    txn_data(log, batch, now_ms, 0)
    marker(log, now_ms, commit=False)  # 2
    log.roll()
    log.append(batch(2), leader_epoch=0, now_ms=now_ms)
    log.flush()
    index_path = log.segments[0].txn_index.path
    assert index_path.exists()
    log.delete_records_before(3)
    assert not index_path.exists()
    assert log.aborted_transactions(3, log.log_end_offset) == []


def test_deleting_records_into_an_open_transaction_keeps_the_lso_at_the_log_start(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    """Kafka's rule: the first unstable offset is never below the log start, so
    read_committed consumers are not sent below it (DeleteRecords is bounded by the
    high watermark, not the LSO)."""
    log = open_log()
    txn_data(log, batch, now_ms, 0, count=4)  # 0-3, open
    log.append(batch(2), leader_epoch=0, now_ms=now_ms)  # 4-5
    log.flush()
    assert log.last_stable_offset == 0
    log.delete_records_before(2)
    assert log.log_start_offset == 2
    assert log.last_stable_offset == 2
    assert log.last_stable_offset_at(log.high_watermark) == 2
    marker(log, now_ms, commit=False)
    log.flush()
    assert log.last_stable_offset == log.log_end_offset
