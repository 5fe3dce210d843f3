"""A partition log's producer table (weir.txn.producer_state owns its rules) and
its transactions: rebuilt from the newest snapshot and the batches after it (at
open and after a truncation), markers included, which also rebuilds the
aborted-transaction indexes; snapshotted at each roll and at close, expired
when idle. The transaction queries: the last stable offset, the aborted
transactions of a fetched range, the producers (DescribeProducers)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from weir.format.control_records import InvalidControlRecord, read_end_txn_marker
from weir.format.record_batch import BatchHeader, InvalidBatch
from weir.log.errors import LogCorrupt
from weir.log.partition_base import PartitionLogState, log
from weir.log.producer_snapshots import load_latest_snapshot, write_snapshot
from weir.log.segment import Segment
from weir.log.transaction_index import AbortedTxn, TransactionIndexCorrupt
from weir.txn.producer_state import NO_TRANSACTION, ProducerStateTable


@dataclass(frozen=True, slots=True)
class ProducerDescription:
    """One active producer of the partition (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1 when none is retained (a marker's entry)
    last_timestamp_ms: int  # of its last append
    coordinator_epoch: int  # of its last marker, -1 before any
    current_txn_start_offset: int  # -1 when no transaction is open


class ProducerStateMixin(PartitionLogState):
    def _load_producer_state(self, txn_index_trusted_below: int | None = None) -> None:
        """Rebuild the producer table: the newest snapshot at or below the log
        end, then every batch after it (markers complete their transactions).
        An aborted transaction the replay completes is added to the index of
        the segment holding its marker when that index lacks it.

        `txn_index_trusted_below` (recovery: the offset below which every write
        was fsynced): index entries of markers at or above it are dropped and
        rebuilt, so the replay starts at a snapshot at or below it. A segment's
        index that fails its sanity check is emptied and rebuilt likewise. None
        (after a truncation): the indexes were cut with the log; the replay
        only adds what is missing."""
        rebuild_from = self._check_txn_indexes(txn_index_trusted_below)
        snapshot_offset, table = load_latest_snapshot(
            self.directory, self.log_end_offset, rebuild_from
        )
        self._snapshot_offsets = None  # some may have been deleted: list them at the next write
        replay_ms = time.time_ns() // 1_000_000
        start = max(snapshot_offset, self._segments[0].base_offset)
        rebuilt: dict[int, Segment] = {}
        try:
            for segment, position, header in self._batches_from(start):
                if not header.is_control:
                    table.replay(
                        header.producer_id, header.producer_epoch, header.base_sequence,
                        header.base_offset, header.last_offset, replay_ms,
                        header.is_transactional,
                    )  # fmt: skip
                elif header.is_transactional:
                    self._replay_stored_marker(table, segment, position, header, replay_ms, rebuilt)
        except (LogCorrupt, OSError) as exc:
            log.warning("%s: producer state rebuilt only up to a bad batch: %s",
                        self.directory.name, exc)  # fmt: skip
        for segment in rebuilt.values():
            try:
                segment.txn_index.sync()
            except OSError as exc:  # only weakens what the next recovery trusts
                log.warning("%s: aborted transaction index not synced: %s",
                            segment.txn_index.path, exc)  # fmt: skip
        table.on_high_watermark(self.high_watermark)
        self.producer_state = table

    def _check_txn_indexes(self, trusted_below: int | None) -> int | None:
        """Cut index entries at or above `trusted_below`, empty indexes that fail
        their sanity check; the offset the replay must start at or below."""
        rebuild_from = trusted_below
        for segment in self._segments:
            index = segment.txn_index
            if not len(index):
                continue
            try:
                index.sanity_check()
                if trusted_below is not None:
                    index.truncate_to(trusted_below)
                index.truncate_to(segment.next_offset)
            except (TransactionIndexCorrupt, OSError) as exc:
                log.warning("%s: rebuilding the aborted transaction index: %s", index.path, exc)
                index.reset()
                base = segment.base_offset
                rebuild_from = base if rebuild_from is None else min(rebuild_from, base)
        return rebuild_from

    def _replay_stored_marker(
        self,
        table: ProducerStateTable,
        segment: Segment,
        position: int,
        header: BatchHeader,
        replay_ms: int,
        rebuilt: dict[int, Segment],
    ) -> None:
        try:
            marker = read_end_txn_marker(segment.read_batch(position, header))
        except InvalidControlRecord:
            return  # another control type: it ends no transaction
        except InvalidBatch as exc:
            raise LogCorrupt(f"{segment.log_path} at {position}: {exc}") from exc
        if marker is None:
            return  # compaction emptied it: its transaction is gone
        completed = table.apply_marker(
            header.producer_id, header.producer_epoch, marker, header.base_offset, replay_ms
        )
        if completed is None or not completed.aborted:
            return
        index = segment.txn_index
        if index.last_offset is not None and index.last_offset >= completed.last_offset:
            return  # already indexed
        index.append(
            AbortedTxn(
                completed.producer_id,
                completed.first_offset,
                completed.last_offset,
                completed.last_stable_offset,
            )  # fmt: skip
        )
        rebuilt[segment.base_offset] = segment

    def _batches_from(self, offset: int) -> Iterator[tuple[Segment, int, BatchHeader]]:
        for segment in self._segments[self._segment_index(offset) :]:
            if segment.base_offset >= offset:
                position = 0
            else:
                found = segment.find_batch(offset)
                if found is None:
                    continue
                position = found[0]
            for batch_position, header in segment.headers(position):
                yield segment, batch_position, header

    def _write_producer_snapshot(self) -> None:
        try:
            self._snapshot_offsets = write_snapshot(
                self.directory, self.producer_state, self.log_end_offset, self._snapshot_offsets
            )
        except OSError as exc:  # only costs a longer scan at the next open
            log.warning("%s: producer snapshot not written: %s", self.directory.name, exc)

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget idempotent producers idle for longer than `expiration_ms`."""
        return self.producer_state.expire(now_ms, expiration_ms)

    # -- transactions ----------------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the first offset of the oldest transaction still open (or
        whose marker is not below the high watermark yet), else the high
        watermark. Never above the high watermark."""
        return self.last_stable_offset_at(self.high_watermark)

    def last_stable_offset_at(self, high_watermark: int) -> int:
        """The LSO for the caller's view of the high watermark (a replica's). Never
        below the log start (Kafka's rule: DeleteRecords may cut into an open
        transaction, which then holds read_committed consumers at the log start)."""
        stable = self.producer_state.last_stable_offset(high_watermark)
        return min(max(stable, self.log_start_offset), high_watermark)

    def ongoing_transaction_first_offset(
        self, producer_id: int, producer_epoch: int | None = None
    ) -> int | None:
        """The first offset of the producer's open transaction here (of that epoch,
        when given), or None (the Produce handler's KIP-890 check: a transactional
        batch of a producer with none open, or with one of an older epoch, whose
        marker is still on its way under transaction version 2, needs the
        coordinator's verification first)."""
        entry = self.producer_state.entry(producer_id)
        if entry is None or not entry.in_transaction:
            return None
        if producer_epoch is not None and entry.epoch != producer_epoch:
            return None
        return entry.txn_first_offset

    def producers(self) -> list[ProducerDescription]:
        """Every producer this partition remembers (DescribeProducers)."""
        return [
            ProducerDescription(
                entry.producer_id,
                entry.epoch,
                entry.last_sequence,
                entry.last_append_ms,
                entry.coordinator_epoch,
                entry.txn_first_offset if entry.in_transaction else NO_TRANSACTION,
            )  # fmt: skip
            for entry in self.producer_state.entries()
        ]

    def aborted_transactions(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction overlapping
        [fetch_offset, upper_bound_offset) (Kafka's collectAbortedTxns): the
        segments' indexes from the one holding `fetch_offset` on, until an
        entry's LSO at completion reaches the upper bound."""
        return [
            (entry.producer_id, entry.first_offset)
            for entry in self.aborted_txns_between(fetch_offset, upper_bound_offset)
        ]

    def aborted_txns_between(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """The index entries of `aborted_transactions` (compaction's too)."""
        aborted: list[AbortedTxn] = []
        if end_offset <= start_offset:
            return aborted
        for segment in self._segments[self._segment_index(start_offset) :]:
            if not len(segment.txn_index):
                continue
            found = segment.txn_index.collect(start_offset, end_offset)
            aborted.extend(found.aborted)
            if found.complete:
                break
        return aborted
