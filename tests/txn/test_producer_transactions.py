"""Transactions in a partition's producer state (weir.txn.producer_state rules
6-9): open transactions, markers, the last stable offset, snapshots and replay."""

from __future__ import annotations

import struct

import crc32c
import pytest

from weir.format.control_records import ControlRecordType, EndTransactionMarker
from weir.format.errors import ErrorCode
from weir.txn.producer_state import (
    SNAPSHOT_MAGIC,
    SNAPSHOT_MAGIC_V1,
    CompletedTxn,
    PendingBatch,
    ProducerBatch,
    ProducerStateError,
    ProducerStateTable,
    SnapshotCorrupt,
)

NOW_MS = 1_700_000_000_000
COMMIT = EndTransactionMarker(ControlRecordType.COMMIT, 0)
ABORT = EndTransactionMarker(ControlRecordType.ABORT, 0)


class Log:
    """A partition's log end and producer table, driven as the append path will."""

    def __init__(self) -> None:
        self.table = ProducerStateTable()
        self.end = 0
        self.sequences: dict[int, int] = {}

    def data(
        self, pid: int, records: int = 1, *, epoch: int = 0, transactional: bool = True
    ) -> int:
        """Check and commit a batch of `records`; returns its first offset."""
        sequence = self.sequences.get(pid, 0)
        checked = self.table.check(pid, epoch, sequence, records - 1, transactional=transactional)
        assert isinstance(checked, PendingBatch)
        first = self.end
        self.table.commit(checked, first, first + records - 1, NOW_MS)
        self.end += records
        self.sequences[pid] = sequence + records
        return first

    def marker(
        self, pid: int, marker: EndTransactionMarker, *, epoch: int = 0
    ) -> CompletedTxn | None:
        self.table.check_marker(pid, epoch, marker)
        offset = self.end
        self.end += 1
        return self.table.apply_marker(pid, epoch, marker, offset, NOW_MS)


def test_a_transactional_batch_opens_the_transaction_at_its_first_offset() -> None:
    log = Log()
    log.data(1, 3, transactional=False)  # offsets 0-2, idempotent
    first = log.data(2, 2)  # offsets 3-4
    log.data(2, 5)  # the same transaction goes on
    entry = log.table.entry(2)
    assert entry is not None and entry.txn_first_offset == first == 3
    assert log.table.first_undecided_offset() == 3
    assert log.table.open_transactions() == [(2, 3)]
    assert log.table.last_stable_offset(high_watermark=log.end) == 3
    assert log.table.last_stable_offset(high_watermark=2) == 2  # LSO <= HW


def test_the_first_unstable_offset_is_the_oldest_open_transaction() -> None:
    log = Log()
    log.data(1)  # 0
    log.data(2)  # 1
    log.data(3)  # 2
    log.marker(1, COMMIT)  # 3
    assert log.table.first_unstable_offset(high_watermark=log.end) == 1
    log.marker(3, ABORT)
    assert log.table.first_unstable_offset(high_watermark=log.end) == 1
    log.marker(2, COMMIT)
    assert log.table.first_unstable_offset(high_watermark=log.end) is None
    assert log.table.last_stable_offset(high_watermark=log.end) == log.end


def test_a_commit_marker_completes_the_transaction() -> None:
    log = Log()
    first = log.data(5, 4)
    completed = log.marker(5, COMMIT)
    assert completed == CompletedTxn(5, first, 4, aborted=False, last_stable_offset=5)
    entry = log.table.entry(5)
    assert entry is not None and not entry.in_transaction
    assert log.table.open_transactions() == []


def test_a_transaction_stays_unstable_until_its_marker_is_below_the_high_watermark() -> None:
    """Kafka's unreplicated transactions: decided, but the marker may not be on
    the other replicas, so read_committed must not yet pass its first offset."""
    log = Log()
    log.data(1, 3)  # 0-2
    log.marker(1, COMMIT)  # 3
    assert log.table.last_stable_offset(high_watermark=3) == 0
    assert log.table.last_stable_offset(high_watermark=4) == 4
    log.table.on_high_watermark(3)
    assert log.table.last_stable_offset(high_watermark=3) == 0
    log.table.on_high_watermark(4)
    assert log.table.first_unstable_offset(high_watermark=0) is None


def test_an_abort_records_the_lso_at_completion_past_its_marker_when_alone() -> None:
    log = Log()
    log.data(1, 2)  # 0-1
    assert log.marker(1, ABORT) == CompletedTxn(1, 0, 2, aborted=True, last_stable_offset=3)


def test_an_abort_records_the_oldest_other_open_transaction_as_its_lso() -> None:
    log = Log()
    log.data(1)  # 0: producer 1 opens
    log.data(2)  # 1: producer 2 opens
    log.data(3)  # 2: producer 3 opens
    log.data(1)  # 3
    completed = log.marker(1, ABORT)  # 4
    assert completed == CompletedTxn(1, 0, 4, aborted=True, last_stable_offset=1)
    completed = log.marker(3, ABORT)  # 5: producer 2's is still the oldest open
    assert completed is not None and completed.last_stable_offset == 1


def test_a_non_transactional_batch_inside_a_transaction_is_refused() -> None:
    log = Log()
    log.data(1)
    with pytest.raises(ProducerStateError) as raised:
        log.table.check(1, 0, 1, 0)
    assert raised.value.error_code == ErrorCode.INVALID_TXN_STATE
    log.marker(1, COMMIT)
    assert isinstance(log.table.check(1, 0, 1, 0), PendingBatch)  # after the commit: fine


def test_a_non_transactional_batch_after_a_transactional_one_of_the_same_append_is_refused() -> (
    None
):
    table = ProducerStateTable()
    first = table.check(1, 0, 0, 0, [], transactional=True)
    assert isinstance(first, PendingBatch) and first.transactional
    with pytest.raises(ProducerStateError) as raised:
        table.check(1, 0, 1, 0, [first])
    assert raised.value.error_code == ErrorCode.INVALID_TXN_STATE
    other = table.check(2, 0, 0, 0, [first])  # another producer is unaffected
    assert isinstance(other, PendingBatch) and not other.transactional


def test_sequence_errors_come_before_the_transaction_state() -> None:
    log = Log()
    log.data(1)
    with pytest.raises(ProducerStateError) as raised:
        log.table.check(1, 0, 5, 0)
    assert raised.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_transactional_batch_from_an_older_epoch_is_fenced() -> None:
    log = Log()
    log.data(1, epoch=3)
    with pytest.raises(ProducerStateError) as raised:
        log.table.check(1, 2, 1, 0, transactional=True)
    assert raised.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_transactional_batch_with_a_newer_epoch_continues_the_open_transaction() -> None:
    """Kafka's rule: the epoch moves, the transaction's first offset does not."""
    log = Log()
    first = log.data(1, epoch=0)
    log.sequences[1] = 0
    log.data(1, epoch=1)
    entry = log.table.entry(1)
    assert entry is not None and entry.epoch == 1 and entry.txn_first_offset == first


def test_a_marker_from_an_older_producer_epoch_is_refused() -> None:
    log = Log()
    log.data(1, epoch=4)
    with pytest.raises(ProducerStateError) as raised:
        log.table.check_marker(1, 3, COMMIT)
    assert raised.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_marker_from_an_older_coordinator_epoch_is_refused() -> None:
    log = Log()
    log.data(1)
    log.marker(1, EndTransactionMarker(ControlRecordType.COMMIT, 7))
    log.data(1)
    with pytest.raises(ProducerStateError) as raised:
        log.table.check_marker(1, 0, EndTransactionMarker(ControlRecordType.ABORT, 6))
    assert raised.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    log.table.check_marker(1, 0, EndTransactionMarker(ControlRecordType.ABORT, 7))


def test_a_marker_with_a_bumped_epoch_restarts_the_producers_sequences() -> None:
    """KIP-890's EndTxn bumps the epoch and the marker carries it: the retained
    batches go, and the producer's next batch must start at sequence 0."""
    log = Log()
    log.data(1, 3)
    log.marker(1, COMMIT, epoch=1)
    entry = log.table.entry(1)
    assert entry is not None and entry.epoch == 1 and not entry.batches
    with pytest.raises(ProducerStateError) as raised:
        log.table.check(1, 1, 3, 0, transactional=True)
    assert raised.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert isinstance(log.table.check(1, 1, 0, 0, transactional=True), PendingBatch)
    with pytest.raises(ProducerStateError):
        log.table.check_marker(1, 0, COMMIT)  # the old epoch's delayed marker


def test_a_marker_with_the_same_epoch_keeps_the_retained_batches() -> None:
    log = Log()
    log.data(1, 2)  # sequences 0-1
    log.marker(1, COMMIT)
    assert log.table.check(1, 0, 0, 1) == ProducerBatch(0, 1, 0, 1)  # still a duplicate
    assert isinstance(log.table.check(1, 0, 2, 0, transactional=True), PendingBatch)


def test_a_marker_of_an_empty_transaction_completes_nothing_but_records_the_epochs() -> None:
    log = Log()
    marker = EndTransactionMarker(ControlRecordType.ABORT, 3)
    assert log.marker(9, marker, epoch=2) is None
    entry = log.table.entry(9)
    assert entry is not None
    assert (entry.epoch, entry.coordinator_epoch, len(entry.batches)) == (2, 3, 0)
    assert log.table.last_stable_offset(high_watermark=log.end) == log.end


def test_producers_with_an_open_transaction_never_expire() -> None:
    log = Log()
    log.data(1)
    log.data(2, transactional=False)
    assert log.table.expire(NOW_MS + 10_000, expiration_ms=1000) == 1
    assert log.table.entry(1) is not None and log.table.entry(2) is None


def test_the_table_bound_never_forgets_a_producer_with_an_open_transaction() -> None:
    table = ProducerStateTable(producers_max=2)
    for pid, transactional in [(1, True), (2, False), (3, False), (4, False)]:
        checked = table.check(pid, 0, 0, 0, transactional=transactional)
        assert isinstance(checked, PendingBatch)
        table.commit(checked, pid, pid, NOW_MS)
    assert len(table) == 2
    assert table.entry(1) is not None and table.entry(4) is not None
    assert table.open_transactions() == [(1, 1)]


def test_clear_forgets_transactions() -> None:
    log = Log()
    log.data(1)
    log.data(2)
    log.marker(2, ABORT)
    log.table.clear()
    assert log.table.open_transactions() == []
    assert log.table.last_stable_offset(high_watermark=0) == 0


def test_a_snapshot_carries_open_transactions_and_coordinator_epochs() -> None:
    log = Log()
    log.data(1)  # 0: producer 1 opens
    log.data(2)  # 1: producer 2 opens
    log.data(3, transactional=False)  # 2
    log.marker(9, EndTransactionMarker(ControlRecordType.COMMIT, 4), epoch=5)  # no batches
    log.data(1)  # 4: producer 1 is now the most recently used
    data = log.table.encode_snapshot(log.end)
    assert data[:4] == SNAPSHOT_MAGIC == b"WPS2"
    offset, loaded = ProducerStateTable.decode_snapshot(data)
    assert offset == log.end
    assert loaded.open_transactions() == [(1, 0), (2, 1)]
    assert loaded.last_stable_offset(high_watermark=log.end) == 0
    for pid in (1, 2, 3, 9):
        assert loaded.entry(pid) == log.table.entry(pid)
    marker_only = loaded.entry(9)
    assert marker_only is not None and marker_only.coordinator_epoch == 4
    completed = loaded.apply_marker(1, 0, ABORT, log.end, NOW_MS)
    assert completed == CompletedTxn(1, 0, log.end, aborted=True, last_stable_offset=1)


def _wps1_snapshot(
    offset: int, entries: list[tuple[int, int, int, list[tuple[int, ...]]]]
) -> bytes:
    """A snapshot in the WPS1 layout of earlier Weir releases, built by hand."""
    body = struct.pack(">qI", offset, len(entries))
    for pid, epoch, last_ms, batches in entries:
        body += struct.pack(">qhqB", pid, epoch, last_ms, len(batches))
        for batch in batches:
            body += struct.pack(">iiqq", *batch)
    return struct.pack(">4sI", SNAPSHOT_MAGIC_V1, crc32c.crc32c(body)) + body


def test_a_wps1_snapshot_of_an_older_weir_still_loads() -> None:
    data = _wps1_snapshot(
        120,
        [
            (7, 2, NOW_MS, [(0, 4, 100, 104), (5, 9, 105, 109)]),
            (8, 0, NOW_MS - 5, [(3, 3, 110, 110)]),
        ],
    )
    offset, table = ProducerStateTable.decode_snapshot(data)
    assert offset == 120 and len(table) == 2
    entry = table.entry(7)
    assert entry is not None and entry.epoch == 2 and entry.last_sequence == 9
    assert not entry.in_transaction and entry.coordinator_epoch == -1
    assert table.check(7, 2, 5, 4) == ProducerBatch(5, 9, 105, 109)
    assert table.open_transactions() == []
    assert table.encode_snapshot(120)[:4] == b"WPS2"  # written back in the new layout


def test_a_snapshot_with_an_invalid_transaction_offset_is_corrupt() -> None:
    log = Log()
    log.data(1)
    data = bytearray(log.table.encode_snapshot(log.end))
    # entry head after prefix (8) and body head (12): pid 8, epoch 2, ms 8, coord 4, txn 8
    struct.pack_into(">q", data, 8 + 12 + 8 + 2 + 8 + 4, -5)
    struct.pack_into(">I", data, 4, crc32c.crc32c(bytes(data[8:])))
    with pytest.raises(SnapshotCorrupt):
        ProducerStateTable.decode_snapshot(bytes(data))


def test_replay_rebuilds_open_transactions_and_reports_the_aborts() -> None:
    """Recovery replays data batches and markers from the log: the table and the
    completed transactions equal those of the live appends."""
    live = Log()
    events: list[tuple[str, int, int, int, bool | EndTransactionMarker]] = []
    completed_live = []
    for pid, what in [(1, "txn"), (2, "txn"), (3, "idem"), (1, "txn"), (2, ABORT), (1, COMMIT),
                      (4, "txn"), (4, ABORT), (5, "txn")]:  # fmt: skip
        if isinstance(what, EndTransactionMarker):
            offset = live.end
            completed_live.append(live.marker(pid, what))
            events.append(("marker", pid, offset, offset, what))
        else:
            records = 2
            sequence = live.sequences.get(pid, 0)
            first = live.data(pid, records, transactional=what == "txn")
            events.append(("data", pid, sequence, first, what == "txn"))

    replayed = ProducerStateTable()
    completed_replayed = []
    for kind, pid, sequence_or_offset, first, extra in events:
        if kind == "marker":
            assert isinstance(extra, EndTransactionMarker)
            completed_replayed.append(replayed.apply_marker(pid, 0, extra, first, NOW_MS))
        else:
            replayed.replay(pid, 0, sequence_or_offset, first, first + 1, NOW_MS,
                            is_transactional=bool(extra))  # fmt: skip
    assert completed_replayed == completed_live
    assert [c.aborted for c in completed_live if c] == [True, False, True]
    assert replayed.open_transactions() == live.table.open_transactions() == [(5, 13)]
    for pid in range(1, 6):
        assert replayed.entry(pid) == live.table.entry(pid)


def test_idempotent_producers_leave_the_lso_at_the_high_watermark() -> None:
    log = Log()
    for pid in range(5):
        log.data(pid, 3, transactional=False)
    assert log.table.open_transactions() == []
    assert log.table.last_stable_offset(high_watermark=log.end) == log.end
