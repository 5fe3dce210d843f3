"""When a partition log seals its active segment and starts the next: on
segment.bytes, segment.ms (with its jitter) or a full index, postponed while every
log file descriptor is in use. A roll snapshots producer state and requests the
round that syncs the sealed segment."""

from __future__ import annotations

from weir.log.descriptors import SEGMENT_FILES_COUNT, shared_log_files
from weir.log.partition_base import log
from weir.log.partition_durability import DurabilityMixin
from weir.log.partition_producers import ProducerStateMixin
from weir.log.segment import Segment


class RollMixin(DurabilityMixin, ProducerStateMixin):
    def _maybe_roll(
        self, size_bytes: int, last_offset: int, batches_count: int, now_ms: int
    ) -> None:
        active = self._segments[-1]
        if active.is_empty:
            return
        full = not active.can_hold(last_offset, batches_count)  # must roll
        oversize = active.size_bytes + size_bytes > self.config.segment_bytes
        due = oversize or self._segment_expired(active, now_ms)
        if full or (due and self._descriptors_for_roll(active)):
            self.roll()

    def _descriptors_for_roll(self, active: Segment) -> bool:
        """Whether the descriptor cache has room for a roll (the new segment's files,
        and the sealed one's if the partition was idle). When every descriptor is
        pinned by segments awaiting their sync or held by a round, the roll waits
        and the active segment grows past segment.bytes until a round releases them."""
        needed = SEGMENT_FILES_COUNT if active.pinned else 2 * SEGMENT_FILES_COUNT
        if shared_log_files().has_room_for(needed):
            self._roll_postponed = False
            return True
        if not self._roll_postponed:
            log.warning("%s: segment roll postponed: every log file descriptor is in use",
                        self.directory.name)  # fmt: skip
            self._roll_postponed = True
        return False

    def _segment_expired(self, segment: Segment, now_ms: int) -> bool:
        started_ms = segment.rolling_timestamp_ms
        if started_ms is None:
            return False
        return now_ms - started_ms > self.config.segment_ms - self._roll_jitter_ms

    def roll(self) -> Segment:
        """Seal the active segment and start a new one at the log end offset."""
        self._check_writable()
        active = self._segments[-1]
        if active.is_empty:
            return active
        # Open the new segment first: if that fails, nothing has changed.
        segment = Segment(self.directory, self.log_end_offset, self.config.segment_index_bytes)
        try:
            active.pin()  # until the round that syncs it (an idle partition's is not)
        except OSError:
            segment.delete()
            raise
        active.seal()
        self._unsynced.update(dict.fromkeys(active.files))
        self._sealed_with_open_indexes.append(active)
        if self._sealed_bytes is not None:
            self._sealed_bytes += active.size_bytes
        self._segments.append(segment)
        self._directory_unsynced = True
        self._write_producer_snapshot()
        self._roll_jitter_ms = self._draw_roll_jitter_ms()
        # Segments wholly below this point are fsynced with their final indexes.
        # Written without fsync (the roll runs on the event loop): the round
        # requested below makes it durable, and one lost only lags (recovery
        # then scans more), the safe side.
        self._write_recovery_point(
            min(self._fsynced_end_offset, self._sealed_synced_below), sync=False
        )
        self.flusher.request(self)
        return segment
