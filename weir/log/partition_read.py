"""A partition log's reading side: Fetch's `read` (whole batches up to the high
watermark, KIP-74), ListOffsets' timestamp lookups (`offset_for_timestamp`,
`max_timestamp`) and OffsetForLeaderEpoch (`end_offset_for_epoch`). It never
changes the log."""

from __future__ import annotations

from dataclasses import dataclass

from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    InvalidBatch,
    decode_records,
)
from weir.log.errors import LogCorrupt, LogError, OffsetOutOfRange
from weir.log.partition_base import PartitionLogState, log
from weir.log.segment import NO_TIMESTAMP, Segment
from weir.log.settings import BATCH_INFLATE_BYTES_MAX


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: bytes | bytearray  # whole batches, b"" when there is nothing to return
    next_offset: int  # the offset after the last returned batch (`offset` when empty)


class ReadMixin(PartitionLogState):
    def read(
        self, offset: int, *, bytes_max: int, end_offset: int, cached_only: bool = False
    ) -> ReadResult:
        """Whole batches from the one holding `offset`, none reaching
        `end_offset` (the high watermark), within `bytes_max` unless the first
        batch alone is larger (KIP-74). Raises OffsetOutOfRange; with
        `cached_only`, ReadNotCached when the records are not in the page cache."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.log_end_offset)
        end_offset = min(end_offset, self.log_end_offset)
        if offset >= end_offset:
            return ReadResult(b"", offset)
        try:
            for segment in self._segments[self._segment_index(offset) :]:
                found = segment.read(offset, bytes_max, end_offset, cached_only=cached_only)
                if found is not None:
                    data, next_offset = found
                    return ReadResult(data, next_offset if data else offset)
        except LogCorrupt as exc:
            self.corrupt_batches_read += 1
            log.error(
                "%s: a stored batch is damaged reading offset %d: %s. Readers of this "
                "offset get KAFKA_STORAGE_ERROR; with the broker stopped, `weir repair` "
                "skips the damaged range.",
                self.directory.name, offset, exc,
            )  # fmt: skip
            raise
        except OSError as exc:
            log.error("read from %s failed: %s", self.directory, exc)
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc
        return ReadResult(b"", offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start whose
        timestamp is >= `timestamp_ms`, or None."""
        start = self._segment_index(self.log_start_offset)
        for segment in self._segments[start:]:
            for position, header in segment.batches_from_timestamp(timestamp_ms):
                if header.last_offset < self.log_start_offset:
                    continue
                located = self._record_at_or_after(segment, position, header, timestamp_ms)
                if located is not None:
                    return located
        return None

    def _record_at_or_after(
        self, segment: Segment, position: int, header: BatchHeader, timestamp_ms: int
    ) -> tuple[int, int] | None:
        """Refine a batch-level match to the first record (from the log start)."""
        first_offset = max(header.base_offset, self.log_start_offset)
        if header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME:  # every record: max_timestamp
            return first_offset, header.max_timestamp
        try:
            batch = segment.read_batch(position, header)
            for record in decode_records(
                batch, uncompressed_bytes_max=BATCH_INFLATE_BYTES_MAX,
                include_control=True,
            ):  # fmt: skip
                if record.offset >= first_offset and record.timestamp_ms >= timestamp_ms:
                    return record.offset, record.timestamp_ms
        except InvalidBatch as exc:
            log.warning("%s: cannot decode batch at %d: %s", segment.log_path, position, exc)
            return first_offset, header.max_timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp
        (ListOffsets MAX_TIMESTAMP, KIP-734), or None for an empty log."""
        best: Segment | None = None
        for segment in self._segments:
            if segment.max_timestamp_ms == NO_TIMESTAMP or segment.is_empty:
                continue
            if best is None or segment.max_timestamp_ms > best.max_timestamp_ms:
                best = segment
        if best is None:
            return None
        found = best.find_batch(max(best.offset_of_max_timestamp, self.log_start_offset))
        if found is not None:
            position, header = found
            located = self._record_at_or_after(best, position, header, best.max_timestamp_ms)
            if located is not None:
                return located
        return max(best.offset_of_max_timestamp, self.log_start_offset), best.max_timestamp_ms

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= `epoch`, where it ends), or (-1, -1)."""
        return self.epoch_cache.end_offset_for(epoch, self.log_end_offset)
