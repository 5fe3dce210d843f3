"""A Fetch response's records as the records API reads them
(weir.broker.http.rest_records_fetched): from the wanted offset, without control
batches, a truncated last batch left for the next fetch, and under read_committed
without the records of aborted transactions."""

from __future__ import annotations

from weir.broker.http.rest_records_fetched import fetched_records
from weir.format.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_txn_marker_batch,
)
from weir.format.record_batch import build_batch

TIME_MS = 1_700_000_000_000


def batch(base_offset: int, values: list[bytes], producer_id: int = -1) -> bytes:
    return build_batch(
        [(None, v, ()) for v in values],
        base_offset=base_offset,
        timestamp_ms=TIME_MS,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=producer_id >= 0,
    )


def marker(offset: int, producer_id: int, kind: ControlRecordType) -> bytes:
    return build_end_txn_marker_batch(
        EndTransactionMarker(kind, 0),
        producer_id=producer_id,
        producer_epoch=0,
        timestamp_ms=TIME_MS,
        base_offset=offset,
    )


def values(record_set: bytes, start: int, **kwargs: object) -> list[bytes | None]:
    return [r.value for r in fetched_records(record_set, start, **kwargs).records]  # type: ignore[arg-type]


def test_records_before_the_wanted_offset_are_left_out_even_inside_a_batch() -> None:
    record_set = batch(0, [b"a", b"b", b"c"]) + batch(3, [b"d"])
    assert values(record_set, 1) == [b"b", b"c", b"d"]
    assert fetched_records(record_set, 1).next_offset == 4


def test_a_truncated_last_batch_is_left_for_the_next_fetch() -> None:
    whole = batch(0, [b"a"])
    record_set = whole + batch(1, [b"b", b"c"])[:-5]
    fetched = fetched_records(record_set, 0)
    assert [r.value for r in fetched.records] == [b"a"]
    assert fetched.next_offset == 1
    assert fetched_records(b"", 7).next_offset == 7


def test_read_committed_leaves_out_aborted_transactions_and_markers() -> None:
    committed, aborted = 10, 11
    record_set = (
        batch(0, [b"c1"], committed)
        + batch(1, [b"a1"], aborted)
        + batch(2, [b"plain"])
        + marker(3, aborted, ControlRecordType.ABORT)
        + marker(4, committed, ControlRecordType.COMMIT)
        + batch(5, [b"a-later"], aborted)  # a new transaction of the same producer
    )
    assert values(record_set, 0, aborted=[(aborted, 1)], read_committed=True) == [
        b"c1", b"plain", b"a-later",
    ]  # fmt: skip
    assert values(record_set, 0) == [b"c1", b"a1", b"plain", b"a-later"]
    assert fetched_records(record_set, 0).next_offset == 6
