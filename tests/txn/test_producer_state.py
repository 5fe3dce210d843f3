"""The idempotent-producer rules of weir.txn.producer_state, without a log."""

from __future__ import annotations

import crc32c
import pytest

from weir.format.errors import ErrorCode
from weir.txn.producer_state import (
    SEQUENCE_MAX,
    SNAPSHOT_MAGIC,
    PendingBatch,
    ProducerBatch,
    ProducerStateError,
    ProducerStateTable,
    SnapshotCorrupt,
    last_sequence_of,
)

NOW_MS = 1_700_000_000_000
PID = 4000


def append(
    table: ProducerStateTable,
    first_offset: int,
    base_sequence: int,
    records: int = 1,
    *,
    producer_id: int = PID,
    epoch: int = 0,
) -> ProducerBatch | PendingBatch:
    """Check a batch and, unless it is a duplicate, commit it at `first_offset`."""
    checked = table.check(producer_id, epoch, base_sequence, records - 1)
    if isinstance(checked, PendingBatch):
        table.commit(checked, first_offset, first_offset + records - 1, NOW_MS)
    return checked


def test_unknown_producer_may_start_at_any_sequence() -> None:
    table = ProducerStateTable()
    assert isinstance(append(table, 0, 17, 3), PendingBatch)
    entry = table.entry(PID)
    assert entry is not None and entry.last_sequence == 19


def test_next_batch_must_follow_the_last_sequence() -> None:
    table = ProducerStateTable()
    append(table, 0, 0, 3)
    append(table, 3, 3, 2)
    with pytest.raises(ProducerStateError) as raised:
        table.check(PID, 0, 7, 0)
    assert raised.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_retry_of_a_retained_batch_is_a_duplicate_with_its_first_offsets() -> None:
    table = ProducerStateTable()
    append(table, 100, 0, 3)
    append(table, 103, 3, 3)
    duplicate = table.check(PID, 0, 0, 2)
    assert duplicate == ProducerBatch(0, 2, 100, 102)


def test_only_the_last_five_batches_are_recognised_as_duplicates() -> None:
    table = ProducerStateTable()
    for i in range(6):
        append(table, i, i)
    with pytest.raises(ProducerStateError) as raised:
        table.check(PID, 0, 0, 0)
    assert raised.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert table.check(PID, 0, 1, 0) == ProducerBatch(1, 1, 1, 1)


def test_older_epoch_is_fenced() -> None:
    table = ProducerStateTable()
    append(table, 0, 0, epoch=3)
    with pytest.raises(ProducerStateError) as raised:
        table.check(PID, 2, 1, 0)
    assert raised.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_new_epoch_must_restart_at_sequence_zero() -> None:
    table = ProducerStateTable()
    append(table, 0, 0, 5)
    with pytest.raises(ProducerStateError) as raised:
        table.check(PID, 1, 5, 0)
    assert raised.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert isinstance(append(table, 5, 0, 1, epoch=1), PendingBatch)
    entry = table.entry(PID)
    assert entry is not None and entry.epoch == 1 and len(entry.batches) == 1


def test_sequence_wraps_from_max_to_zero() -> None:
    table = ProducerStateTable()
    append(table, 0, SEQUENCE_MAX - 1, 2)
    assert last_sequence_of(SEQUENCE_MAX - 1, 3) == 1
    assert isinstance(append(table, 2, 0, 1), PendingBatch)


def test_negative_sequence_with_a_producer_id_is_invalid() -> None:
    with pytest.raises(ProducerStateError) as raised:
        ProducerStateTable().check(PID, 0, -1, 0)
    assert raised.value.error_code == ErrorCode.INVALID_RECORD


def test_batches_of_one_append_are_checked_in_order() -> None:
    table = ProducerStateTable()
    first = table.check(PID, 0, 0, 1)
    assert isinstance(first, PendingBatch)
    assert isinstance(table.check(PID, 0, 2, 0, [first]), PendingBatch)
    with pytest.raises(ProducerStateError):
        table.check(PID, 0, 5, 0, [first])


def test_least_recently_used_producer_is_forgotten_past_the_bound() -> None:
    table = ProducerStateTable(producers_max=2)
    append(table, 0, 0, producer_id=1)
    append(table, 1, 0, producer_id=2)
    append(table, 2, 1, producer_id=1)
    append(table, 3, 0, producer_id=3)
    assert len(table) == 2
    assert table.entry(2) is None and table.entry(1) is not None


def test_idle_producers_expire() -> None:
    table = ProducerStateTable()
    append(table, 0, 0)
    assert table.expire(NOW_MS + 1000, expiration_ms=1000) == 0
    assert table.expire(NOW_MS + 1001, expiration_ms=1000) == 1
    assert table.entry(PID) is None


def test_snapshot_round_trips_every_entry() -> None:
    table = ProducerStateTable()
    for i in range(7):
        append(table, 10 + i, i, producer_id=1)
    append(table, 20, 0, 4, producer_id=2, epoch=9)
    offset, loaded = ProducerStateTable.decode_snapshot(table.encode_snapshot(24))
    assert offset == 24
    for producer_id in (1, 2):
        original, restored = table.entry(producer_id), loaded.entry(producer_id)
        assert original is not None and restored is not None
        assert (restored.epoch, list(restored.batches), restored.last_append_ms) == (
            original.epoch, list(original.batches), original.last_append_ms,
        )  # fmt: skip


@pytest.mark.parametrize("damage", ["flip", "truncate", "extend", "empty"])
def test_damaged_snapshot_is_rejected(damage: str) -> None:
    table = ProducerStateTable()
    append(table, 0, 0, 3)
    data = bytearray(table.encode_snapshot(3))
    if damage == "flip":
        data[-1] ^= 0xFF
    elif damage == "truncate":
        del data[-5:]
    elif damage == "extend":
        data += b"\x00"
    else:
        data = bytearray()
    with pytest.raises(SnapshotCorrupt):
        ProducerStateTable.decode_snapshot(bytes(data))


@pytest.mark.parametrize("body_bytes_cut", [5, 32 + 5], ids=["in-a-batch", "in-an-entry-head"])
def test_snapshot_cut_short_under_a_valid_checksum_is_rejected_as_corrupt(
    body_bytes_cut: int,
) -> None:
    """The CRC cannot catch a snapshot written short by a bug: the bounds checks
    must, with SnapshotCorrupt rather than a struct error."""
    table = ProducerStateTable()
    append(table, 0, 0, 3)
    prefix_bytes = len(SNAPSHOT_MAGIC) + 4
    body = table.encode_snapshot(3)[prefix_bytes:-body_bytes_cut]
    data = SNAPSHOT_MAGIC + crc32c.crc32c(body).to_bytes(4, "big") + body
    with pytest.raises(SnapshotCorrupt, match="truncated"):
        ProducerStateTable.decode_snapshot(data)


def test_batch_sharing_only_its_first_sequence_with_a_retained_one_is_not_a_duplicate() -> None:
    table = ProducerStateTable()
    append(table, 100, 0, 3)
    append(table, 103, 3, 3)
    with pytest.raises(ProducerStateError) as raised:
        table.check(PID, 0, 0, 0)  # sequence 0 alone: not the retained batch 0..2
    assert raised.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_retry_of_a_retained_batch_after_new_ones_in_the_same_append_is_rejected() -> None:
    table = ProducerStateTable()
    append(table, 100, 0, 3)
    newer = table.check(PID, 0, 3, 0)
    assert isinstance(newer, PendingBatch)
    with pytest.raises(ProducerStateError) as raised:
        table.check(PID, 0, 0, 2, earlier=[newer])
    assert raised.value.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER


def test_after_sequence_zero_only_sequence_one_follows() -> None:
    table = ProducerStateTable()
    append(table, 0, 0, 1)
    with pytest.raises(ProducerStateError) as raised:
        table.check(PID, 0, 5, 0)
    assert raised.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_replay_rebuilds_only_idempotent_batches_producer_id_zero_included() -> None:
    table = ProducerStateTable()
    table.replay(-1, 0, 0, 0, 0, NOW_MS)  # no producer id: not idempotent
    table.replay(7, 0, -1, 1, 1, NOW_MS)  # no sequence: not idempotent
    table.replay(0, 0, 0, 2, 4, NOW_MS)
    assert len(table) == 1 and table.entry(-1) is None and table.entry(7) is None
    entry = table.entry(0)
    assert entry is not None and list(entry.batches) == [ProducerBatch(0, 2, 2, 4)]


def test_an_empty_table_snapshot_round_trips() -> None:
    offset, loaded = ProducerStateTable.decode_snapshot(ProducerStateTable().encode_snapshot(9))
    assert (offset, len(loaded)) == (9, 0)
