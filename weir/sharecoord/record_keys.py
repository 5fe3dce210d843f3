"""The record keys a share fetch read, for per-key ordering (Weir's own, beyond Kafka;
docs/queues.md, "Per-key ordering"; `SharePartition` rule 11).

Read only for a share group with `weir.share.key.ordering.enable`: the share fetch path
otherwise looks at batch headers alone. Every data batch of the read is decoded (a
compressed one inflated) and each record with a key is given as a hash of its key
bytes: Python's 64-bit `hash` of bytes (SipHash, seeded per process), which is fine
because the hashes live only in the memory of the broker leading the share partition
(after a failover the new leader reads the keys again). Two keys with one hash are
ordered together, which only holds back one key's records behind the other's.
"""

from __future__ import annotations

import logging

from weir.format.record_batch import InvalidBatch, Record, decode_records, iter_batch_headers

__all__ = ["record_keys"]

log = logging.getLogger(__name__)


def record_keys(
    records: bytes | bytearray | memoryview, *, uncompressed_bytes_max: int
) -> dict[int, int]:
    """offset -> hash of the key, for each record of `records`' data batches that has a
    key (null keys left out). A batch that fails to decode (its CRC, or inflating past
    `uncompressed_bytes_max` in all) is logged and its records left out: delivered
    unordered, as records with no key. Raises InvalidBatch for a malformed batch header."""
    view = memoryview(records)
    keys: dict[int, int] = {}
    budget_bytes = uncompressed_bytes_max
    for position, header in iter_batch_headers(view):
        if header.is_control:
            continue
        batch_bytes = view[position : position + header.size]
        found: dict[int, int] = {}
        inflated_bytes = 0
        try:
            for record in decode_records(batch_bytes, uncompressed_bytes_max=budget_bytes):
                if record.key is not None:
                    found[record.offset] = hash(record.key)
                inflated_bytes += _record_bytes(record)
        except InvalidBatch as exc:
            log.warning("share fetch: keys not read from the batch at offset %d (its records "
                        "are not ordered by key): %s", header.base_offset, exc)  # fmt: skip
            continue
        if header.compression:
            budget_bytes = max(0, budget_bytes - inflated_bytes)
        keys.update(found)
    return keys


def _record_bytes(record: Record) -> int:
    """About what a record took inflated (its keys, value and headers)."""
    size = len(record.key or b"") + len(record.value or b"")
    return size + sum(len(name) + len(value or b"") for name, value in record.headers)
