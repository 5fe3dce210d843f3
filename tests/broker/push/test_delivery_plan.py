from __future__ import annotations

from weir.broker.push.delivery_plan import Held, next_batch, next_due_ms
from weir.broker.push.payload import PushRecord


def held(offset: int, key: bytes | None, not_before_ms: int = 0) -> Held:
    return Held(PushRecord(offset, 0, key, b"v", (), 1), not_before_ms=not_before_ms)


def offsets(batch: list[Held]) -> list[int]:
    return [h.record.offset for h in batch]


def test_unordered_batches_take_due_records_in_offset_order() -> None:
    records = [held(0, b"a"), held(1, b"a", not_before_ms=50), held(2, b"a"), held(3, b"b")]
    batch = next_batch(records, {b"a"}, batch_size=2, ordered=False, now_ms=10)
    assert offsets(batch) == [0, 2]


def test_ordered_a_key_in_flight_holds_its_later_records() -> None:
    records = [held(5, b"a"), held(6, b"b"), held(7, b"a")]
    batch = next_batch(records, {b"a"}, batch_size=10, ordered=True, now_ms=0)
    assert offsets(batch) == [6]


def test_ordered_a_record_waiting_out_its_backoff_holds_the_later_records_of_its_key() -> None:
    records = [held(1, b"a", not_before_ms=100), held(2, b"a"), held(3, b"b"), held(4, None)]
    batch = next_batch(records, set(), batch_size=10, ordered=True, now_ms=0)
    assert offsets(batch) == [3, 4]
    assert next_due_ms(records, 0) == 100
    assert offsets(next_batch(records, set(), batch_size=10, ordered=True, now_ms=100)) == [
        1,
        2,
        3,
        4,
    ]


def test_ordered_one_batch_may_carry_a_keys_records_in_order() -> None:
    records = [held(1, b"a"), held(2, b"a"), held(3, b"b")]
    assert offsets(next_batch(records, set(), batch_size=2, ordered=True, now_ms=0)) == [1, 2]


def test_records_without_a_key_are_not_ordered() -> None:
    records = [held(1, None), held(2, None)]
    assert offsets(next_batch(records, {None}, batch_size=5, ordered=True, now_ms=0)) == [1, 2]


def test_local_failures_count_as_deliveries() -> None:
    item = held(1, b"a")
    item.local_failures = 2
    assert item.delivery_count == 3
