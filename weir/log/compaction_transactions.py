"""What a compaction pass (compaction.py) does with transactions, Kafka's
cleaner rules (KIP-98, KIP-534):

- a transactional batch of an aborted transaction (the aborted-transaction
  indexes say which) is removed, and its keys never enter the offset map, so
  an aborted record never shadows a committed one;
- a committed transaction's batches are compacted like any;
- a marker stays while a batch of its transaction is still in the log (the
  pass read one since the producer's previous marker); once none is, the pass
  stamps it with a delete horizon (now + `delete.retention.ms`, in its base
  timestamp) and the first pass after the horizon removes it;
- a kept ABORT marker keeps its entry in its cleaned segment's `.txnindex`; a
  cleaned segment whose original had a `.txnindex` gets one, empty if need
  be, so the rename of the swap replaces the old file.

Pure of PartitionLog state; runs on the pass's worker thread."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from weir.format.record_batch import BatchHeader, InvalidBatch, decode_records, rebuild_batch
from weir.log.config import INT64_MAX
from weir.log.segment import Segment, segment_file_name
from weir.log.settings import BATCH_INFLATE_BYTES_MAX
from weir.log.transaction_index import TXN_INDEX_SUFFIX, AbortedTxn


class TransactionsInRange:
    """What a pass knows of the transactions in its range: which transactional
    batches were aborted, and, walking the batches in log order, whether a
    marker's transaction still has a batch in the log (Kafka's
    CleanedTransactionMetadata)."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._aborted: dict[int, list[AbortedTxn]] = {}
        for entry in aborted:
            self._aborted.setdefault(entry.producer_id, []).append(entry)
        self.by_marker = {entry.last_offset: entry for entry in aborted}
        # Producers with a transactional batch read since their last marker.
        self._batches_read: set[int] = set()

    def aborted(self, header: BatchHeader) -> bool:
        """Whether a transactional data batch belongs to an aborted transaction."""
        for entry in self._aborted.get(header.producer_id, ()):
            if entry.first_offset <= header.base_offset <= entry.last_offset:
                return True
        return False

    def read_data(self, header: BatchHeader) -> None:
        if header.is_transactional:
            self._batches_read.add(header.producer_id)

    def read_marker(self, header: BatchHeader) -> bool:
        """A marker read after its transaction's batches: True when none of them
        was read in this pass (the marker may go, after its delete horizon)."""
        if header.producer_id in self._batches_read:
            self._batches_read.discard(header.producer_id)
            return False
        return True


def retain_control(
    header: BatchHeader,
    data: bytes,
    transactions: TransactionsInRange,
    *,
    now_ms: int,
    delete_retention_ms: int,
    cleaned_offset: int,
) -> tuple[bytes | None, int | None]:
    """(what stays of a control batch: `data` itself, the marker stamped with
    its delete horizon, or None; the horizon a later pass must honour, if any)."""
    removable = transactions.read_marker(header)
    if not (header.is_transactional and removable) or header.base_offset >= cleaned_offset:
        return data, None
    horizon_ms = header.delete_horizon_ms
    if horizon_ms is not None:
        return (None, None) if now_ms >= horizon_ms else (data, horizon_ms)
    try:
        records = list(
            decode_records(
                data, uncompressed_bytes_max=BATCH_INFLATE_BYTES_MAX, include_control=True
            )
        )
    except InvalidBatch:
        return data, None
    if not records:
        return data, None
    horizon_ms = min(INT64_MAX, now_ms + delete_retention_ms)
    return rebuild_batch(header, records, delete_horizon_ms=horizon_ms), horizon_ms


def keep_txn_index_file(log_path: Path, base_offset: int, output: Segment) -> None:
    """A segment that had an aborted-transaction index gets one in its cleaned
    copy, empty if no entry is kept (created and fsynced here)."""
    name = segment_file_name(base_offset, TXN_INDEX_SUFFIX)
    if len(output.txn_index) or not (log_path.parent / name).exists():
        return
    fd = os.open(output.txn_index.path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
