"""A partition log's idempotent-producer table (weir.txn.producer_state owns its
rules): rebuilt from the newest snapshot and the batch headers after it (at open
and after a truncation), snapshotted at each roll and at close, expired when idle."""

from __future__ import annotations

import time
from collections.abc import Iterator

from weir.format.record_batch import BatchHeader
from weir.log.errors import LogCorrupt
from weir.log.partition_base import PartitionLogState, log
from weir.log.producer_snapshots import load_latest_snapshot, write_snapshot


class ProducerStateMixin(PartitionLogState):
    def _load_producer_state(self) -> None:
        """Rebuild the idempotent-producer table: the newest snapshot at or below
        the log end, then the headers of every batch after it."""
        snapshot_offset, table = load_latest_snapshot(self.directory, self.log_end_offset)
        self._snapshot_offsets = None  # some may have been deleted: list them at the next write
        replay_ms = time.time_ns() // 1_000_000
        start = max(snapshot_offset, self._segments[0].base_offset)
        try:
            for header in self._headers_from(start):
                if not header.is_control:
                    table.replay(
                        header.producer_id, header.producer_epoch, header.base_sequence,
                        header.base_offset, header.last_offset, replay_ms,
                    )  # fmt: skip
        except (LogCorrupt, OSError) as exc:
            log.warning("%s: producer state rebuilt only up to a bad batch: %s",
                        self.directory.name, exc)  # fmt: skip
        self.producer_state = table

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        for segment in self._segments[self._segment_index(offset) :]:
            if segment.base_offset >= offset:
                position = 0
            else:
                found = segment.find_batch(offset)
                if found is None:
                    continue
                position = found[0]
            for _, header in segment.headers(position):
                yield header

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
