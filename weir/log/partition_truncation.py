"""A follower's truncation when its log diverged from the leader's (KIP-101,
KIP-279): `truncation_point` from the leader's OffsetForLeaderEpoch answer, then
`truncate_to`, or `truncate_fully_and_start_at` when the follower fell below the
leader's log start. Each starts a new generation: a flush round begun before it
makes nothing durable after it, and waiters above the new end fail with
LogTruncated."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from weir.format.errors import ErrorCode
from weir.log.checkpoint import write_checkpoint
from weir.log.errors import LogError, LogTruncated
from weir.log.partition_base import LOG_START_CHECKPOINT_FILE_NAME
from weir.log.partition_durability import DurabilityMixin
from weir.log.partition_producers import ProducerStateMixin
from weir.log.producer_snapshots import delete_all_snapshots
from weir.log.segment import Segment


@dataclass(frozen=True, slots=True)
class TruncationPoint:
    """Where a follower cuts its log after one OffsetForLeaderEpoch answer
    (`PartitionLog.truncation_point`)."""

    offset: int
    complete: bool  # False: truncate there, then ask the leader again (KIP-279)


class TruncationMixin(DurabilityMixin, ProducerStateMixin):
    def truncation_point(self, leader_epoch: int, leader_end_offset: int) -> TruncationPoint:
        """KIP-279: where a follower cuts its log, given the leader's answer to
        OffsetForLeaderEpoch for the follower's latest epoch: `leader_epoch`, the
        largest epoch at or below it that the leader has, and `leader_end_offset`,
        where that epoch ends on the leader. Kafka's rule (AbstractFetcherThread.
        getOffsetTruncationState), with F(e) = this log's (epoch, end offset) for
        its largest epoch <= e (`end_offset_for_epoch`):

        - the follower has `leader_epoch` (F's epoch equals it): cut at
          min(leader_end_offset, its own end of that epoch), complete;
        - it lacks that epoch: cut at its own end of the largest epoch below it,
          NOT complete: the caller truncates there and asks again with its new
          latest epoch (each round removes at least one epoch, so this ends);
        - it has no epoch at or below `leader_epoch` (an empty cache), or the
          leader gave no epoch (-1) with an offset: min(leader_end_offset, log
          end), complete, as Kafka;
        - the leader has no such epoch (`leader_end_offset` -1, UNDEFINED): Kafka
          falls back to the follower's fetch offset (the high watermark for a log
          without epochs), which KIP-101 showed can keep diverged records. Here
          nothing of this log is known to match the leader's, so it is cut to its
          log start and fetched again: safe, at the cost of a refetch.

        Never above the log end. It can be below the log start (the leader's
        epoch ended before this log starts): `truncate_to` then empties the log
        and restarts it there."""
        end = self.log_end_offset
        if leader_end_offset < 0:
            return TruncationPoint(self.log_start_offset, complete=True)
        if leader_epoch < 0:
            return TruncationPoint(min(leader_end_offset, end), complete=True)
        own_epoch, own_end = self.epoch_cache.end_offset_for(leader_epoch, end)
        if own_epoch < 0:
            return TruncationPoint(min(leader_end_offset, end), complete=True)
        if own_epoch != leader_epoch:
            return TruncationPoint(min(own_end, end), complete=False)
        return TruncationPoint(min(own_end, leader_end_offset, end), complete=True)

    def truncation_offset(self, leader_epoch: int, leader_end_offset: int) -> int:
        """The offset of `truncation_point` (see there; when it is not complete the
        caller must truncate and ask the leader again)."""
        return self.truncation_point(leader_epoch, leader_end_offset).offset

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= `offset` (a follower diverged).
        The new log end is the base of the first removed batch (<= `offset`).
        Below the log start, the log is emptied and restarts at `offset`.
        Raises LogError(KAFKA_STORAGE_ERROR), the log gone offline, when the disk fails."""
        self._check_writable()
        if offset >= self.log_end_offset:
            # No record goes, but an epoch this log led without writing in it
            # starts at its end: a follower drops it (as Kafka's truncateTo does).
            with self._failing_on_disk_errors():
                self.epoch_cache.truncate_from_end(self.log_end_offset)
            return
        with self._failing_on_disk_errors():
            self._generation += 1
            if offset < self.log_start_offset:
                self._restart_at(offset)
            else:
                while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
                    self._delete_segment(self._segments.pop())
                self._segments[-1].truncate_to(offset)
                self.log_end_offset = self._segments[-1].next_offset
            self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at `offset`, below or above its end (Kafka's
        truncateFullyAndStartAt): a follower whose log end is below the leader's log
        start (the leader answered OFFSET_OUT_OF_RANGE) starts over there.
        `truncate_to` cannot: it never moves the log end up."""
        self._check_writable()
        assert offset >= 0, offset
        with self._failing_on_disk_errors():
            self._generation += 1
            self._restart_at(offset)
            self._after_truncation()

    @contextlib.contextmanager
    def _failing_on_disk_errors(self) -> Iterator[None]:
        """A failed file operation takes the log offline (KAFKA_STORAGE_ERROR)."""
        try:
            yield
        except OSError as exc:
            self._fail(exc)
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc

    def _after_truncation(self) -> None:
        """Bookkeeping once the log end moved down, or the log restarted."""
        self._segments_changed()
        self._segments[-1].pin()
        self._unsynced[self._segments[-1].log_file] = None
        self.durable_end_offset = min(self.durable_end_offset, self.log_end_offset)
        self._fsynced_end_offset = min(self._fsynced_end_offset, self.log_end_offset)
        self._sealed_synced_below = min(self._sealed_synced_below, self._segments[-1].base_offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self._write_recovery_point(min(self._recovery_point, self.log_end_offset))
        self._lower_durable_checkpoint()
        self._load_producer_state()
        self._fail_waiters(LogTruncated, offset_above=self.log_end_offset)
        self.flush()
        self._check_invariants()

    def _restart_at(self, offset: int) -> None:
        for segment in self._segments:
            self._delete_segment(segment)
        self._segments = [Segment(self.directory, offset, self.config.segment_index_bytes)]
        self._directory_unsynced = True
        self.log_start_offset = offset
        self.log_end_offset = offset
        self.durable_end_offset = offset
        self._fsynced_end_offset = offset
        self._sealed_synced_below = offset
        self.epoch_cache.clear()
        self.producer_state.clear()
        delete_all_snapshots(self.directory)
        self._snapshot_offsets = []
        write_checkpoint(self.directory / LOG_START_CHECKPOINT_FILE_NAME, [[offset]])
