"""Turning a Fetch answer's record bytes into the records to print."""

from __future__ import annotations

import pytest

from weir.cli.consume_command import end_of_whole_batches, fetched_records
from weir.format.record_batch import InvalidBatch, build_batch


def batch(base_offset: int, *values: bytes, control: bool = False, compression: int = 0) -> bytes:
    return build_batch(
        [(None, v, []) for v in values],
        base_offset=base_offset,
        is_control=control,
        compression=compression,
    )


def test_records_before_the_position_are_skipped_even_inside_a_batch() -> None:
    records = batch(0, b"a", b"b", b"c") + batch(3, b"d", b"e", compression=4)
    assert [r.value for r in fetched_records(records, 1)] == [b"b", b"c", b"d", b"e"]
    assert [r.offset for r in fetched_records(records, 4)] == [4]
    assert end_of_whole_batches(records) == 5


def test_truncated_last_batch_is_left_for_the_next_fetch() -> None:
    records = batch(0, b"a") + batch(1, b"b", b"c")
    cut = records[:-5]
    assert [r.value for r in fetched_records(cut, 0)] == [b"a"]
    assert end_of_whole_batches(cut) == 1
    assert list(fetched_records(records[:30], 0)) == []
    assert end_of_whole_batches(b"") == 0


def test_control_batches_are_not_printed_but_are_passed() -> None:
    records = batch(0, b"a") + batch(1, b"\x00\x00\x00\x00", control=True)
    assert [r.value for r in fetched_records(records, 0)] == [b"a"]
    assert end_of_whole_batches(records) == 2


def test_corrupt_batch_is_refused() -> None:
    damaged = bytearray(batch(0, b"hello"))
    damaged[-1] ^= 0xFF
    with pytest.raises(InvalidBatch):
        list(fetched_records(bytes(damaged), 0))
