"""Topic compression.type other than `producer`: batches of another codec are
rewritten with the topic's codec before the log stores them (as Kafka's
LogValidator), keeping offsets, producer fields and record contents."""

from __future__ import annotations

import pytest

from weir.format.compression import Codec
from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    build_batch,
    decode_records,
    iter_batch_headers,
    parse_batch_header,
    verify_crc,
)
from weir.log import recompression
from weir.log.errors import LogError
from weir.log.recompression import recompress

from .conftest import NOW_MS, OpenLog

BOUND = 64 * 1024 * 1024
RECORDS = [
    (b"k0", b"v0" * 50, [("h", b"x")], NOW_MS),
    (None, b"v1" * 50, [], NOW_MS + 7),
    (b"k2", None, [("a", None), ("b", b"")], NOW_MS + 3),
]


def contents(batches: bytes | bytearray | memoryview) -> list[tuple[object, ...]]:
    return [
        (r.offset, r.timestamp_ms, r.key, r.value, r.headers)
        for r in decode_records(batches, uncompressed_bytes_max=BOUND)
    ]


@pytest.mark.parametrize("source", list(Codec))
@pytest.mark.parametrize("target", list(Codec))
def test_rewrites_a_batch_of_another_codec_keeping_offsets_and_producer_fields(
    source: Codec, target: Codec
) -> None:
    original = build_batch(
        RECORDS, compression=source, producer_id=7, producer_epoch=2, base_sequence=40,
        partition_leader_epoch=3, base_offset=0,
    )  # fmt: skip
    stored = recompress(original, target, batch_bytes_max=BOUND)
    if source == target:
        assert stored is original  # nothing to do: no copy
        return
    before, after = parse_batch_header(original), parse_batch_header(stored)
    assert after.compression == target
    assert verify_crc(stored, 0, after)
    assert (after.base_offset, after.last_offset_delta, after.records_count) == (0, 2, 3)
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (7, 2, 40)
    assert after.partition_leader_epoch == before.partition_leader_epoch
    assert (after.base_timestamp, after.max_timestamp) == (NOW_MS, NOW_MS + 7)
    assert after.is_transactional == before.is_transactional
    assert contents(stored) == contents(original)


def test_only_the_batches_of_another_codec_are_rewritten() -> None:
    kept = build_batch(RECORDS[:1], compression=Codec.ZSTD)
    rewritten = build_batch(RECORDS[1:], compression=Codec.GZIP)
    stored = bytes(recompress(kept + rewritten, Codec.ZSTD, batch_bytes_max=BOUND))
    assert stored.startswith(kept)
    assert [h.compression for _, h in iter_batch_headers(stored)] == [Codec.ZSTD, Codec.ZSTD]
    assert contents(stored) == contents(kept + rewritten)


def test_a_corrupt_batch_is_refused_not_rewritten() -> None:
    corrupt = bytearray(build_batch(RECORDS, compression=Codec.GZIP))
    corrupt[-1] ^= 0xFF
    with pytest.raises(LogError) as raised:
        recompress(corrupt, Codec.LZ4, batch_bytes_max=BOUND)
    assert raised.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_inflating_past_the_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A small gzip batch that inflates to more than the bound (a zip bomb) is
    refused before its output is held, whatever lengths it declares."""
    monkeypatch.setattr(recompression, "BATCH_INFLATE_BYTES_MAX", 64 * 1024)
    bomb = build_batch([(b"k", bytes(1024 * 1024), [])], compression=Codec.GZIP)
    assert len(bomb) < 4096
    with pytest.raises(LogError) as raised:
        recompress(bomb, Codec.ZSTD, batch_bytes_max=BOUND)
    assert raised.value.error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_batches_over_max_message_bytes_are_left_for_the_log_to_refuse() -> None:
    original = build_batch(RECORDS, compression=Codec.GZIP)
    assert recompress(original, Codec.NONE, batch_bytes_max=len(original) - 1) is original


def test_a_retried_idempotent_batch_is_still_a_duplicate_after_the_rewrite(
    open_log: OpenLog,
) -> None:
    log = open_log(compression_type="lz4")
    sent = build_batch(
        RECORDS, compression=Codec.GZIP, producer_id=0, producer_epoch=0, base_sequence=0
    )
    first = log.append(
        recompress(sent, Codec.LZ4, batch_bytes_max=BOUND), leader_epoch=0, now_ms=NOW_MS
    )
    retry = log.append(
        recompress(sent, Codec.LZ4, batch_bytes_max=BOUND), leader_epoch=0, now_ms=NOW_MS
    )
    assert not first.duplicate
    assert retry.duplicate
    assert (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset)
    assert log.log_end_offset == 3
