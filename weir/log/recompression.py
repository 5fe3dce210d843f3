"""Topic-level `compression.type` other than `producer`: batches are stored with
the topic's codec, as Kafka's LogValidator does.

The produce path calls `recompress` for such topics only, before the log
validates and appends: a batch whose codec differs is decoded (its CRC checked,
decompression bounded by `BATCH_INFLATE_BYTES_MAX`, never by a length the client
wrote) and rebuilt with the topic's codec (`recompress_batch`: same base offset,
producer id/epoch and base sequence, so the idempotent producer table treats it
as the batch the client sent; records renumbered densely, a new CRC). The log
then validates the rewritten bytes like any other batch. What one request's
batches inflate to is bounded as a whole: each batch may inflate only into what
the earlier ones left of the bound. Batches already in the
topic's codec, control batches (the log refuses them from clients), batches larger
than `max.message.bytes` and batches whose record count disagrees with their last
offset delta are left as they are for the log's own checks to answer.
"""

from __future__ import annotations

from weir.format.record_batch import (
    BatchHeader,
    InvalidBatch,
    Record,
    decode_records,
    iter_batch_headers,
    recompress_batch,
)
from weir.log.errors import LogError
from weir.log.settings import BATCH_INFLATE_BYTES_MAX

Buffer = memoryview | bytes | bytearray


def recompress(batches: Buffer, codec: int, *, batch_bytes_max: int) -> Buffer:
    """`batches` with every batch of another codec rewritten with `codec`; the
    same object when none needs it. Raises LogError for a batch that cannot be
    decoded (CORRUPT_MESSAGE) or inflates past the bound (MESSAGE_TOO_LARGE)."""
    view = memoryview(batches).cast("B") if isinstance(batches, memoryview) else batches
    try:
        headers = list(iter_batch_headers(view))
    except InvalidBatch:
        return batches  # malformed framing: the log's validation answers it
    if not any(_needs_rewrite(header, codec, batch_bytes_max) for _, header in headers):
        return batches
    out = bytearray()
    budget_bytes = BATCH_INFLATE_BYTES_MAX
    for position, header in headers:
        batch = view[position : position + header.size]
        if not _needs_rewrite(header, codec, batch_bytes_max):
            out += batch
            continue
        try:
            records = list(decode_records(batch, uncompressed_bytes_max=budget_bytes))
        except InvalidBatch as exc:
            raise LogError(exc.error_code, str(exc)) from exc
        budget_bytes -= sum(_held_bytes(record) for record in records)
        out += recompress_batch(header, records, codec)
    return memoryview(out)


def _held_bytes(record: Record) -> int:
    """What a decoded record holds, charged to the request's inflate budget."""
    held = len(record.key or b"") + len(record.value or b"")
    return held + sum(len(name) + len(value or b"") for name, value in record.headers)


def _needs_rewrite(header: BatchHeader, codec: int, batch_bytes_max: int) -> bool:
    return (
        header.compression != codec
        and not header.is_control
        and header.size <= batch_bytes_max
        and header.records_count >= 1
        and header.last_offset_delta == header.records_count - 1
    )
