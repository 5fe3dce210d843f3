"""Compaction of transactional data (Kafka's cleaner rules, KIP-98 and KIP-534):
aborted records go and never shadow committed ones, markers stay while their
transaction has a batch in the log, then leave after their delete horizon, and
nothing at or above the last stable offset is cleaned."""

from __future__ import annotations

from collections.abc import Callable

from weir.format.record_batch import build_batch
from weir.log.compaction import LogCleaner
from weir.log.partition import PartitionLog
from weir.log.transaction_index import AbortedTxn

from .conftest import NOW_MS
from .test_compaction import COMPACTED, DAY_MS, latest_by_key, put, read_all, seal

OpenLog = Callable[..., PartitionLog]
PID = 31


def txn_put(log: PartitionLog, key: bytes, value: bytes, sequence: int) -> int:
    batch = build_batch(
        [(key, value, [])], timestamp_ms=NOW_MS, producer_id=PID, producer_epoch=0,
        base_sequence=sequence, is_transactional=True,
    )  # fmt: skip
    return log.append(batch, leader_epoch=3, now_ms=NOW_MS).base_offset


def end_txn(log: PartitionLog, *, commit: bool) -> int:
    return log.append_txn_marker(
        producer_id=PID, producer_epoch=0, coordinator_epoch=0, commit=commit,
        leader_epoch=3, now_ms=NOW_MS,
    ).base_offset  # fmt: skip


def markers(log: PartitionLog) -> list[int]:
    return [header.base_offset for header, _ in read_all(log) if header.is_control]


def aborted_entries(log: PartitionLog) -> list[AbortedTxn]:
    return [entry for segment in log.segments for entry in segment.txn_index.entries()]


def another_pass(log: PartitionLog, now_ms: int = NOW_MS) -> None:
    """New dirty data, so a pass is due."""
    put(log, [(b"other", b"x")])
    seal(log)
    LogCleaner().clean(log, now_ms)


def test_aborted_records_are_removed_and_never_shadow_the_committed_value(
    open_log: OpenLog,
) -> None:
    log = open_log(**COMPACTED)
    committed = put(log, [(b"k", b"committed")])
    txn_put(log, b"k", b"aborted", 0)
    abort = end_txn(log, commit=False)
    seal(log)
    LogCleaner().clean(log, NOW_MS)
    assert latest_by_key(log)[b"k"] == [(committed, b"committed")]
    # The pass read the aborted batch: its marker and index entry stay for now.
    assert markers(log) == [abort]
    assert aborted_entries(log) == [AbortedTxn(PID, 1, abort, abort + 1)]
    assert log.aborted_transactions(0, log.log_end_offset) == [(PID, 1)]


def test_a_marker_leaves_after_its_transaction_and_its_delete_horizon(
    open_log: OpenLog,
) -> None:
    log = open_log(**COMPACTED)
    txn_put(log, b"k", b"aborted", 0)
    abort = end_txn(log, commit=False)
    seal(log)
    LogCleaner().clean(log, NOW_MS)  # removes the data, keeps the marker
    assert markers(log) == [abort]
    another_pass(log)  # no batch of the transaction left: the marker gets a horizon
    [stamped] = [header for header, _ in read_all(log) if header.is_control]
    assert stamped.delete_horizon_ms == NOW_MS + DAY_MS
    assert markers(log) == [abort]
    another_pass(log, NOW_MS + DAY_MS)  # the horizon passed
    assert markers(log) == []
    assert aborted_entries(log) == []


def test_committed_transactional_records_are_compacted_like_any(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    txn_put(log, b"k", b"in-txn", 0)
    commit = end_txn(log, commit=True)
    latest = put(log, [(b"k", b"later")])
    seal(log)
    LogCleaner().clean(log, NOW_MS)
    assert latest_by_key(log)[b"k"] == [(latest, b"later")]
    assert markers(log) == [commit]  # its batch was read in this pass
    another_pass(log)
    another_pass(log, NOW_MS + DAY_MS)
    assert markers(log) == []


def test_nothing_at_or_above_the_last_stable_offset_is_cleaned(open_log: OpenLog) -> None:
    log = open_log(**COMPACTED)
    put(log, [(b"k", b"1")])
    seal(log)
    first_open = txn_put(log, b"k", b"open", 0)
    put(log, [(b"k", b"2")])
    seal(log)
    assert log.last_stable_offset == first_open
    assert [segment.base_offset for segment, _ in log.compaction_inputs()] == [0]
    LogCleaner().clean(log, NOW_MS)
    assert [offset for offset, _ in latest_by_key(log)[b"k"]] == [0, 1, 2]
    end_txn(log, commit=True)
    seal(log)
    LogCleaner().clean(log, NOW_MS)
    assert [value for _, value in latest_by_key(log)[b"k"]] == [b"2"]
