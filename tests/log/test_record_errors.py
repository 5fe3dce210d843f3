"""KIP-467: a batch refused for some of its records names them (their index in
the batch and why), as Kafka's LogValidator does."""

from __future__ import annotations

import crc32c
import pytest

from weir.format.compression import Codec
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.log.compaction import require_keys
from weir.log.errors import LogError, RecordErrors

from .conftest import NOW_MS, OpenLog


def test_keyless_records_of_a_compacted_topic_are_listed_by_index() -> None:
    batch = build_batch(
        [(b"a", b"1", []), (None, b"2", []), (b"c", b"3", []), (None, b"4", [])],
        compression=Codec.LZ4,
    )
    with pytest.raises(RecordErrors) as raised:
        require_keys(batch, "events-0")
    assert raised.value.error_code == ErrorCode.INVALID_RECORD
    why = "Compacted topic cannot accept message without key in topic partition events-0"
    assert raised.value.record_errors == [(1, why), (3, why)]
    assert str(raised.value).startswith(
        "One or more records have been rejected due to 2 record errors in total"
    )


def test_the_first_batch_with_keyless_records_is_the_one_reported() -> None:
    good = build_batch([(b"a", b"1", [])])
    bad = build_batch([(b"b", b"2", []), (b"c", b"3", []), (None, b"4", [])])
    with pytest.raises(RecordErrors) as raised:
        require_keys(good + bad, "t-3")
    assert [index for index, _ in raised.value.record_errors] == [2]


def test_records_outside_the_timestamp_window_are_listed_by_index(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)
    batch = build_batch(
        [(b"a", b"1", [], NOW_MS), (b"b", b"2", [], NOW_MS - 5000), (b"c", b"3", [], NOW_MS + 999),
         (b"d", b"4", [], NOW_MS + 1001)],
    )  # fmt: skip
    with pytest.raises(RecordErrors) as raised:
        log.append(batch, leader_epoch=0, now_ms=NOW_MS)
    assert raised.value.error_code == ErrorCode.INVALID_TIMESTAMP
    assert str(raised.value) == "One or more records have been rejected due to invalid timestamp"
    window = f"[{NOW_MS - 1000}, {NOW_MS + 1000}]"
    assert raised.value.record_errors == [
        (1, f"Timestamp {NOW_MS - 5000} of message with offset 1 is out of range. "
            f"The timestamp should be within {window}"),
        (3, f"Timestamp {NOW_MS + 1001} of message with offset 3 is out of range. "
            f"The timestamp should be within {window}"),
    ]  # fmt: skip
    assert log.log_end_offset == 0


def test_a_header_whose_records_are_all_in_range_gets_the_plain_error(open_log: OpenLog) -> None:
    """A batch header claiming a bad range its records do not have lists nothing."""
    log = open_log(message_timestamp_difference_max_ms=1000)
    batch = bytearray(build_batch([(b"a", b"1", [], NOW_MS)]))
    batch[35:43] = (NOW_MS + 10_000).to_bytes(8, "big")  # max_timestamp
    batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")  # attributes..end
    with pytest.raises(LogError) as raised:
        log.append(batch, leader_epoch=0, now_ms=NOW_MS)
    assert raised.value.error_code == ErrorCode.INVALID_TIMESTAMP
    assert not isinstance(raised.value, RecordErrors)
