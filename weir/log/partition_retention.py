"""Segments leaving a partition log from its start: DeleteRecords
(`delete_records_before`), retention by time and size (`enforce_retention`), and
compaction's swap of cleaned segments (the work and its crash protocol:
compaction.py). Only durable, sealed segments go; never the active one."""

from __future__ import annotations

from collections.abc import Callable

from weir.log.checkpoint import write_checkpoint
from weir.log.errors import OffsetOutOfRange
from weir.log.partition_base import LOG_START_CHECKPOINT_FILE_NAME
from weir.log.partition_roll import RollMixin
from weir.log.segment import Segment


class RetentionMixin(RollMixin):
    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to `offset` (checkpointed) and delete
        the segments wholly below it. Returns the new log start offset."""
        self._check_writable()
        if offset > self.durable_end_offset or offset < 0:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.durable_end_offset)
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        write_checkpoint(self.directory / LOG_START_CHECKPOINT_FILE_NAME, [[offset]])
        self.epoch_cache.truncate_from_start(offset)
        self._delete_oldest_while(lambda segment, next_base: next_base <= offset)
        self._check_invariants()
        return self.log_start_offset

    def enforce_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms (by their largest timestamp)
        or while the log exceeds retention.bytes. Only committed (durable)
        segments go; an expired active segment is rolled first. Returns the
        number of segments deleted."""
        if self._closed or self._failure is not None or not self.config.deletes_by_retention:
            return 0
        deleted = self._enforce_retention_ms(now_ms) + self._enforce_retention_bytes()
        if deleted:
            self._advance_log_start(self._segments[0].base_offset)
        return deleted

    def _enforce_retention_ms(self, now_ms: int) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0

        def expired(segment: Segment, next_base: int) -> bool:
            return now_ms - segment.max_timestamp_ms > retention_ms

        deleted = self._delete_oldest_while(expired)
        active = self._segments[-1]
        if (
            len(self._segments) == 1
            and not active.is_empty
            and expired(active, active.next_offset)
            and active.next_offset <= self.durable_end_offset
        ):
            self.roll()
            deleted += self._delete_oldest_while(expired)
        return deleted

    def _enforce_retention_bytes(self) -> int:
        retention_bytes = self.config.retention_bytes
        if retention_bytes < 0:
            return 0
        excess_bytes = self.size_bytes - retention_bytes

        def over(segment: Segment, next_base: int) -> bool:
            nonlocal excess_bytes
            if excess_bytes - segment.size_bytes < 0:
                return False
            excess_bytes -= segment.size_bytes
            return True

        return self._delete_oldest_while(over)

    def _delete_oldest_while(self, predicate: Callable[[Segment, int], bool]) -> int:
        """Delete non-active, durable segments from the oldest while `predicate`
        (segment, next segment's base offset) holds."""
        deleted = 0
        while len(self._segments) > 1:
            segment, next_base = self._segments[0], self._segments[1].base_offset
            if next_base > self.durable_end_offset or not predicate(segment, next_base):
                break
            self._segments.pop(0)
            self._delete_segment(segment)
            deleted += 1
        if deleted:
            self._advance_log_start(self._segments[0].base_offset)
        return deleted

    def _advance_log_start(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.epoch_cache.truncate_from_start(offset)

    def compaction_inputs(self) -> list[tuple[Segment, int]]:
        """The sealed segments wholly below the durable end offset and the last
        stable offset (Kafka's cleaner never passes the first unstable offset),
        oldest first, each with the next segment's base offset (where its
        offset range ends). Never the active segment; empty while the log is
        closed or offline."""
        if self._closed or self._failure is not None:
            return []
        limit = min(self.durable_end_offset, self.last_stable_offset)
        inputs = []
        for segment, following in zip(self._segments, self._segments[1:]):  # noqa: B905
            if following.base_offset > limit:
                break
            inputs.append((segment, following.base_offset))
        return inputs

    def swap_cleaned_segments(self, old: list[Segment], new: list[Segment]) -> None:
        """Replace the sealed segments `old` by `new`: their cleaned copies, already
        renamed into place and fsynced (compaction.py). The old files were
        replaced or unlinked by name already, so the old segments are only closed."""
        old_ids = {id(segment) for segment in old}
        active = self._segments[-1]
        assert id(active) not in old_ids, "the active segment is never cleaned"
        kept = [segment for segment in self._segments if id(segment) not in old_ids]
        assert len(kept) == len(self._segments) - len(old_ids), "swapping unknown segments"
        self._segments = sorted(kept + new, key=lambda segment: segment.base_offset)
        assert self._segments[-1] is active
        for segment in old:
            for synced in segment.files:
                self._unsynced.pop(synced, None)
            segment.close()
        self._sealed_with_open_indexes = [
            segment for segment in self._sealed_with_open_indexes if id(segment) not in old_ids
        ]
        for segment in new:
            segment.release_index_files()
        self._segments_changed()
        self._check_invariants()
