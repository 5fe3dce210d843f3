"""Appending stamps offsets and epochs into the caller's buffer when it is a
writable view (a request frame of its own), and into a copy otherwise."""

from __future__ import annotations

from collections.abc import Callable

from weir.format.record_batch import iter_batch_headers
from weir.log.partition import PartitionLog

MakeBatch = Callable[..., bytes]
OpenLog = Callable[..., PartitionLog]


def stored_headers(log: PartitionLog) -> list[tuple[int, int]]:
    result = log.read(0, bytes_max=1 << 20, end_offset=log.log_end_offset)
    return [
        (h.base_offset, h.partition_leader_epoch) for _, h in iter_batch_headers(result.records)
    ]


def test_a_writable_view_is_patched_in_place(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(3), leader_epoch=4, now_ms=now_ms)
    frame = bytearray(b"header" + batch(2) + batch(1))
    records = memoryview(frame)[6:]
    log.append(records, leader_epoch=5, now_ms=now_ms)
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in iter_batch_headers(records)] == [
        (3, 5),
        (5, 5),
    ]
    assert frame[:6] == b"header"
    assert stored_headers(log) == [(0, 4), (3, 5), (5, 5)]


def test_read_only_input_is_never_modified(
    open_log: OpenLog, batch: MakeBatch, now_ms: int
) -> None:
    log = open_log()
    log.append(batch(3), leader_epoch=4, now_ms=now_ms)
    original = batch(2)
    for records in (original, memoryview(original)):
        log.append(records, leader_epoch=6, now_ms=now_ms)
    assert original == batch(2)
    assert stored_headers(log) == [(0, 4), (3, 6), (5, 6)]
