"""The records of a Fetch response's record set as a consumer sees them, pure:
batches before the wanted offset and control batches skipped, a truncated last
batch left for the next fetch, and under read_committed the records of aborted
transactions left out (the consumer's own rule: the response lists each aborted
transaction's producer id and first offset; its records are skipped from that
offset until the producer's next control batch, its abort marker)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from weir.format.record_batch import (
    BATCH_HEADER_SIZE,
    InvalidBatch,
    Record,
    decode_records,
    parse_batch_header,
)

# What one record set's records may take decoded (compressed batches inflate), per fetch.
UNCOMPRESSED_BYTES_MAX = 64 * 1024 * 1024


@dataclass(frozen=True)
class FetchedRecords:
    records: list[Record]
    # The offset to fetch next: past the last whole batch read (control and
    # aborted batches included), or `start_offset` when none was whole.
    next_offset: int


def fetched_records(
    record_set: bytes | memoryview | None,
    start_offset: int,
    aborted: Sequence[tuple[int, int]] = (),
    *,
    read_committed: bool = False,
) -> FetchedRecords:
    """The records at or after `start_offset` in `record_set`. `aborted` is the
    response's (producer_id, first_offset) list (read_committed only).
    Raises InvalidBatch on a batch that fails its CRC or does not decode."""
    buf = memoryview(record_set or b"")
    pending = sorted(aborted, key=lambda item: item[1])
    aborting: set[int] = set()
    records: list[Record] = []
    next_offset = start_offset
    budget_bytes = UNCOMPRESSED_BYTES_MAX
    pos = 0
    while len(buf) - pos >= BATCH_HEADER_SIZE:
        header = parse_batch_header(buf, pos)
        if header.size > len(buf) - pos:
            break  # a partial batch at the end of the response: fetched again next time
        if header.size < BATCH_HEADER_SIZE:
            raise InvalidBatch(f"record batch at offset {header.base_offset} is too short")
        batch = buf[pos : pos + header.size]
        pos += header.size
        next_offset = max(next_offset, header.next_offset)
        if read_committed:
            while pending and pending[0][1] <= header.last_offset:
                aborting.add(pending.pop(0)[0])
            if header.is_control:
                aborting.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborting:
                continue
        if header.is_control or header.next_offset <= start_offset:
            continue
        for record in decode_records(batch, uncompressed_bytes_max=max(0, budget_bytes)):
            budget_bytes -= record_bytes(record)
            if record.offset >= start_offset:
                records.append(record)
    return FetchedRecords(records, next_offset)


def record_bytes(record: Record) -> int:
    """About what a decoded record holds: key, value and headers."""
    size = len(record.key or b"") + len(record.value or b"")
    return size + sum(len(name) + len(value or b"") for name, value in record.headers)
