"""A partition log's writing side: a leader's `append` (validate every batch,
check idempotent and transactional producers, assign offsets, stamp the leader
epoch and LogAppendTime, write without fsync), a transaction marker's
`append_txn_marker` (WriteTxnMarkers), and a follower's `append_replicated` (the
leader's batches byte for byte, structurally checked; producer state and the
aborted-transaction index learn from them as from the leader's). Each rolls
first when due (partition_roll.py) and hands the written bytes to the flusher."""

from __future__ import annotations

import errno
from dataclasses import dataclass

from weir.format.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    InvalidControlRecord,
    build_end_txn_marker_batch,
    read_end_txn_marker,
)
from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    InvalidBatch,
    decode_records,
    parse_batch_header,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
    verify_crc,
)
from weir.log.errors import LogError, RecordErrors, record_errors_message
from weir.log.partition_base import log
from weir.log.partition_roll import RollMixin
from weir.log.segment import AppendedBatch
from weir.log.settings import BATCH_INFLATE_BYTES_MAX
from weir.log.transaction_index import AbortedTxn
from weir.txn.producer_state import (
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    CompletedTxn,
    PendingBatch,
    ProducerBatch,
    ProducerStateError,
)

# Write errors about the process's own limits, not the disk: the append is
# refused (nothing of it stays written) and the log stays writable. Any other
# failed write (ENOSPC, EROFS, EIO, EDQUOT, ...) takes the log offline.
PROCESS_LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})
COMPRESSION_CODEC_MAX = 4  # none, gzip, snappy, lz4, zstd


# Not frozen: a frozen dataclass costs about 7x more to construct (1.4 µs against
# 0.2 µs for a 13-field one), and this is built on the produce path. Never mutated.
@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False  # a producer's retry of batches already in the log


def _check_replicated_batch(view: memoryview, position: int, header: BatchHeader) -> None:
    """A replicated batch's structural checks (the leader applied the topic's
    limits): at least one record and no more than its offsets span (compaction
    removes records but keeps the span), a known codec, its CRC32C."""
    if not 1 <= header.records_count <= header.last_offset_delta + 1:
        raise LogError(
            ErrorCode.INVALID_RECORD,
            f"replicated batch at offset {header.base_offset}: {header.records_count} records "
            f"for {header.last_offset_delta + 1} offsets",
        )
    if header.compression > COMPRESSION_CODEC_MAX:
        raise LogError(ErrorCode.CORRUPT_MESSAGE, f"unknown codec {header.compression}")
    if not verify_crc(view, position, header):
        raise LogError(
            ErrorCode.CORRUPT_MESSAGE,
            f"replicated batch at offset {header.base_offset}: CRC32C mismatch",
        )


def _timestamp_errors(batch: memoryview | bytes | bytearray, low_ms: int, high_ms: int) -> LogError:
    """INVALID_TIMESTAMP listing each record of `batch` outside [low_ms, high_ms], as
    Kafka's LogValidator words them; without the list when the records cannot be
    decoded within the bound or none is outside (the header lied)."""
    try:
        errors = [
            (index, f"Timestamp {record.timestamp_ms} of message with offset {record.offset} "
                    f"is out of range. The timestamp should be within [{low_ms}, {high_ms}]")
            for index, record in enumerate(
                decode_records(batch, uncompressed_bytes_max=BATCH_INFLATE_BYTES_MAX)
            )
            if not low_ms <= record.timestamp_ms <= high_ms
        ]  # fmt: skip
    except InvalidBatch:
        errors = []
    if not errors:
        return LogError(
            ErrorCode.INVALID_TIMESTAMP,
            f"the batch's timestamps are outside [{low_ms}, {high_ms}]",
        )
    return RecordErrors(
        ErrorCode.INVALID_TIMESTAMP,
        record_errors_message(ErrorCode.INVALID_TIMESTAMP, errors),
        errors,
    )


class AppendMixin(RollMixin):
    def append(
        self,
        records: memoryview | bytes | bytearray,
        *,
        leader_epoch: int,
        now_ms: int,
        allow_control_batches: bool = False,
        origin_coordinator: bool = False,
    ) -> AppendResult:
        """Validate every batch, assign offsets, stamp the leader epoch (and the
        append time under LogAppendTime) and write them, without fsync.

        A transactional batch opens its producer's transaction here at its first
        offset (the sequence and epoch rules are the idempotent ones, see
        weir.txn.producer_state). `origin_coordinator`: the batches come from
        this broker's group coordinator (Kafka's AppendOrigin.COORDINATOR):
        its transactional batches carry no sequence (-1) and skip the sequence
        checks, but still open and track the transaction. Control batches are
        refused (INVALID_RECORD) unless `allow_control_batches`: markers are
        written by `append_txn_marker` only."""
        self._check_writable()
        view = memoryview(records).cast("B") if isinstance(records, memoryview) else records
        headers = self._validate(view, now_ms, allow_control_batches)
        if len(view) > self.config.segment_bytes:
            raise LogError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"{len(view)} bytes of batches exceed segment.bytes {self.config.segment_bytes}",
            )
        pending = self._check_producers(headers, origin_coordinator)
        if isinstance(pending, ProducerBatch):
            return AppendResult(
                pending.first_offset, pending.last_offset, -1, self.log_start_offset, True
            )
        base_offset = self.log_end_offset
        last_offset = base_offset + sum(h.last_offset_delta + 1 for _, h in headers) - 1
        data, batches = self._assign(view, headers, base_offset, leader_epoch, now_ms)
        self._write(data, batches, now_ms)
        assert self.log_end_offset == last_offset + 1, (self.log_end_offset, last_offset)
        self._commit_producers(pending, batches, base_offset, now_ms)
        self._after_write()
        if leader_epoch >= 0:
            self._assign_epoch(leader_epoch, base_offset)
        append_time_ms = now_ms if self.config.log_append_time else -1
        return AppendResult(base_offset, last_offset, append_time_ms, self.log_start_offset)

    def append_replicated(
        self, records: memoryview | bytes | bytearray, *, now_ms: int
    ) -> AppendResult | None:
        """A follower's append of a Fetch response's records: the leader's batches
        stored byte for byte, with the leader's offsets and leader epochs.

        Batches wholly below the log end are skipped (already here); a partial
        batch at the end (a fetch cuts the last one) is left for the next fetch.
        The first batch kept must start at the log end and each next one where
        the previous ends: a gap or an overlap is LogError(INVALID_RECORD), and
        so is a leader epoch older than the latest one here; a batch that fails
        its structural checks (magic, length, record count, codec, CRC32C) is
        LogError(CORRUPT_MESSAGE or INVALID_RECORD). On any error nothing of the
        call is written. The leader alone applied the topic's limits (timestamps,
        max.message.bytes) and the producers' sequence checks: producer state
        only records the batches, so a follower promoted to leader recognises a
        producer's retry. Control batches are stored like any other.

        Returns the offsets written (`base_offset` is the old log end), or None
        when there was no complete batch at or past the log end. Rolling, index
        entries, the flusher and `wait_durable` work as for `append`."""
        self._check_writable()
        view = memoryview(records).cast("B")
        headers = self._replicated_headers(view)
        if not headers:
            return None
        self._check_replicated_epochs(headers)
        base_offset = self.log_end_offset
        first_position = headers[0][0]
        last_position, last_header = headers[-1]
        batches = [
            AppendedBatch(position - first_position, h.last_offset, h.max_timestamp, h.size)
            for position, h in headers
        ]
        self._write(view[first_position : last_position + last_header.size], batches, now_ms)
        self._record_replicated_producers(view, headers, now_ms)
        self._after_write()
        for _, header in headers:
            if header.partition_leader_epoch >= 0:
                self._assign_epoch(header.partition_leader_epoch, header.base_offset)
        assert self.log_end_offset == last_header.last_offset + 1
        return AppendResult(base_offset, last_header.last_offset, -1, self.log_start_offset)

    def _replicated_headers(self, view: memoryview) -> list[tuple[int, BatchHeader]]:
        """(position, header) of each complete batch of `view` from the log end on,
        checked; batches before it and a trailing partial batch are left out."""
        headers: list[tuple[int, BatchHeader]] = []
        expected = self.log_end_offset
        position = 0
        total = len(view)
        while total - position >= BATCH_HEADER_SIZE:
            try:
                header = parse_batch_header(view, position)
            except InvalidBatch as exc:
                message = f"replicated batch at byte {position}: {exc}"
                raise LogError(exc.error_code, message) from exc
            if header.size > total - position:
                break  # the fetch cut the last batch
            if not headers and header.last_offset < expected:
                position += header.size  # already in this log
                continue
            if header.base_offset < expected:
                # A gap is a compacted leader's (whole batches removed), as Kafka's
                # followers accept it; an overlap never happens to a sound log.
                raise LogError(
                    ErrorCode.INVALID_RECORD,
                    f"replicated batch of offsets {header.base_offset}..{header.last_offset} "
                    f"overlaps offsets below {expected}",
                )
            _check_replicated_batch(view, position, header)
            headers.append((position, header))
            expected = header.last_offset + 1
            position += header.size
        return headers

    def _check_replicated_epochs(self, headers: list[tuple[int, BatchHeader]]) -> None:
        """Leader epochs never go back. A batch without one (-1) is stored as it is
        and leaves the epoch cache alone."""
        latest = self.epoch_cache.latest_epoch
        for _, header in headers:
            epoch = header.partition_leader_epoch
            if epoch < 0:
                continue
            if latest is not None and epoch < latest:
                raise LogError(
                    ErrorCode.INVALID_RECORD,
                    f"replicated batch at offset {header.base_offset} has leader epoch "
                    f"{epoch}, older than epoch {latest}",
                )
            latest = epoch

    def _record_replicated_producers(
        self, view: memoryview, headers: list[tuple[int, BatchHeader]], now_ms: int
    ) -> None:
        """Producer state learns each written batch as the leader accepted it: no
        sequence or epoch check (the same as rebuilding it from the log). A
        marker completes its transaction as on the leader, and an abort goes to
        the aborted-transaction index."""
        for position, header in headers:
            if not header.is_control:
                self.producer_state.replay(
                    header.producer_id, header.producer_epoch, header.base_sequence,
                    header.base_offset, header.last_offset, now_ms, header.is_transactional,
                )  # fmt: skip
            elif header.is_transactional:
                self._replay_marker(view, position, header, now_ms)

    def _replay_marker(
        self, data: memoryview | bytes, position: int, header: BatchHeader, now_ms: int
    ) -> None:
        """A control batch already in the log (a follower's append): if it is a
        transaction marker, its transaction completes; an abort is indexed."""
        try:
            marker = read_end_txn_marker(data, position)
        except InvalidControlRecord as exc:  # not a marker (another control type)
            log.debug("%s: control batch at %d is no marker: %s",
                      self.directory.name, header.base_offset, exc)  # fmt: skip
            return
        except InvalidBatch as exc:
            raise LogError(exc.error_code, str(exc)) from exc
        if marker is None:
            return
        completed = self.producer_state.apply_marker(
            header.producer_id, header.producer_epoch, marker, header.base_offset, now_ms
        )
        self._index_aborted(completed)

    def _index_aborted(self, completed: CompletedTxn | None) -> None:
        """An aborted transaction goes to the index of the active segment, which
        holds its marker; the next flush round syncs it with the marker."""
        if completed is None or not completed.aborted:
            return
        entry = AbortedTxn(
            completed.producer_id, completed.first_offset, completed.last_offset,
            completed.last_stable_offset,
        )  # fmt: skip
        try:
            synced = self._segments[-1].append_aborted_txn(entry)
        except OSError as exc:
            log.error("%s: aborted transaction index not written: %s", self.directory, exc)
            self._fail(exc)
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc
        self._unsynced[synced] = None

    def append_txn_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        leader_epoch: int,
        now_ms: int,
        transaction_version: int = 1,
    ) -> AppendResult:
        """Write the COMMIT or ABORT marker ending producer `producer_id`'s
        transaction (WriteTxnMarkers): a control batch of one record, checked
        first (weir.txn.producer_state rule 8): an epoch older than the
        producer's (not newer, with `transaction_version` 2) is
        LogError(INVALID_PRODUCER_EPOCH), a coordinator epoch older than the
        last marker's LogError(TRANSACTION_COORDINATOR_FENCED). A marker for a
        producer with no transaction open here is written all the same (as
        Kafka's: it ends nothing). The transaction completes; an aborted one is
        added to the active segment's aborted-transaction index. Durable as any
        append (`wait_durable(result.last_offset + 1)`, or the ISR's high
        watermark). Returns the marker's offset as base and last offset."""
        self._check_writable()
        control_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        marker = EndTransactionMarker(control_type, coordinator_epoch)
        try:
            self.producer_state.check_marker(
                producer_id, producer_epoch, marker, transaction_version
            )
        except ProducerStateError as exc:
            raise LogError(exc.error_code, str(exc)) from exc
        offset = self.log_end_offset
        data = bytearray(
            build_end_txn_marker_batch(
                marker, producer_id=producer_id, producer_epoch=producer_epoch,
                timestamp_ms=now_ms, base_offset=offset, partition_leader_epoch=leader_epoch,
            )
        )  # fmt: skip
        if self.config.log_append_time:
            set_log_append_time(data, 0, now_ms)
        self._write(data, [AppendedBatch(0, offset, now_ms, len(data))], now_ms)
        completed = self.producer_state.apply_marker(
            producer_id, producer_epoch, marker, offset, now_ms
        )
        self._index_aborted(completed)
        self._after_write()
        if leader_epoch >= 0:
            self._assign_epoch(leader_epoch, offset)
        append_time_ms = now_ms if self.config.log_append_time else -1
        return AppendResult(offset, offset, append_time_ms, self.log_start_offset)

    def _check_producers(
        self, headers: list[tuple[int, BatchHeader]], origin_coordinator: bool = False
    ) -> list[PendingBatch | None] | ProducerBatch:
        """Sequence and epoch checks of idempotent and transactional batches
        (weir.txn.producer_state): per batch a PendingBatch (None without a
        producer id), or the batch already in the log when this is a producer's
        retry of it."""
        pending: list[PendingBatch | None] = []
        earlier: list[PendingBatch] = []
        for _, header in headers:
            if header.producer_id == NO_PRODUCER_ID or header.is_control:
                pending.append(None)
                continue
            try:
                if (
                    origin_coordinator
                    and header.is_transactional
                    and header.base_sequence == NO_SEQUENCE
                ):
                    checked: PendingBatch | ProducerBatch = (
                        self.producer_state.check_coordinator_batch(
                            header.producer_id, header.producer_epoch, earlier
                        )
                    )
                else:
                    checked = self.producer_state.check(
                        header.producer_id, header.producer_epoch, header.base_sequence,
                        header.last_offset_delta, earlier, header.is_transactional,
                    )  # fmt: skip
            except ProducerStateError as exc:
                raise LogError(exc.error_code, str(exc)) from exc
            if isinstance(checked, ProducerBatch):
                if len(headers) > 1:
                    raise LogError(
                        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                        "a retried batch arrived together with other batches",
                    )
                return checked
            pending.append(checked)
            earlier.append(checked)
        return pending

    def _commit_producers(
        self,
        pending: list[PendingBatch | None],
        batches: list[AppendedBatch],
        base_offset: int,
        now_ms: int,
    ) -> None:
        first_offset = base_offset
        for checked, batch in zip(pending, batches, strict=True):
            if checked is not None:
                self.producer_state.commit(checked, first_offset, batch.last_offset, now_ms)
            first_offset = batch.last_offset + 1

    def _write(
        self, data: bytes | bytearray | memoryview, batches: list[AppendedBatch], now_ms: int
    ) -> None:
        """Write whole batches (offsets final, contiguous from the log end) to the
        active segment, rolling first when due, and advance the log end; unsynced."""
        last_offset = batches[-1].last_offset
        assert last_offset >= self.log_end_offset, (last_offset, self.log_end_offset)
        try:
            self._maybe_roll(len(data), last_offset, len(batches), now_ms)
            segment = self._segments[-1]
            if not segment.pinned:  # the partition was idle: reopen its files
                segment.pin()
            segment.append(data, batches, self.config.index_interval_bytes)
        except OSError as exc:
            log.error("append to %s failed: %s", self.directory, exc)
            if exc.errno not in PROCESS_LIMIT_ERRNOS:
                self._fail(exc)  # what the disk holds past the log end is unknown
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc
        self.log_end_offset = last_offset + 1
        self._unsynced[segment.log_file] = None

    def _assign_epoch(self, leader_epoch: int, base_offset: int) -> None:
        latest = self.epoch_cache.latest_epoch
        if latest is not None and leader_epoch < latest:
            log.warning("%s: append with epoch %d after epoch %d",
                        self.directory.name, leader_epoch, latest)  # fmt: skip
            return
        try:
            self.epoch_cache.assign(leader_epoch, base_offset)
        except OSError as exc:
            self._fail(exc)
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc

    def begin_leader_epoch(self, leader_epoch: int) -> None:
        """A leader's term starts at the log end: the epoch cache records it there
        unless it already has this epoch or a newer one. Raises
        LogError(KAFKA_STORAGE_ERROR), the log gone offline, when that cannot be written."""
        if self._failure is not None:
            raise LogError(ErrorCode.KAFKA_STORAGE_ERROR, f"log is offline: {self._failure}")
        latest = self.latest_epoch
        if latest is None or latest < leader_epoch:
            self._assign_epoch(leader_epoch, self.log_end_offset)

    def _validate(
        self, view: memoryview | bytes | bytearray, now_ms: int, allow_control: bool
    ) -> list[tuple[int, BatchHeader]]:
        total = len(view)
        if total == 0:
            raise LogError(ErrorCode.INVALID_RECORD, "no record batches")
        headers = []
        position = 0
        while position < total:
            header = self._validate_batch(view, position, total - position, now_ms)
            if header.is_control and not allow_control:
                raise LogError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
            headers.append((position, header))
            position += header.size
        return headers

    def _validate_batch(
        self, view: memoryview | bytes | bytearray, position: int, remaining: int, now_ms: int
    ) -> BatchHeader:
        if remaining < BATCH_HEADER_SIZE:
            raise LogError(ErrorCode.CORRUPT_MESSAGE, f"{remaining} trailing bytes after batches")
        try:
            header = parse_batch_header(view, position)
        except InvalidBatch as exc:
            raise LogError(exc.error_code, str(exc)) from exc
        if header.size > remaining:
            raise LogError(ErrorCode.CORRUPT_MESSAGE, "record batch is truncated")
        if header.size > self.config.max_message_bytes:
            raise LogError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {header.size} bytes exceeds max.message.bytes "
                f"{self.config.max_message_bytes}",
            )
        if header.records_count < 1 or header.last_offset_delta != header.records_count - 1:
            raise LogError(
                ErrorCode.INVALID_RECORD,
                f"records_count {header.records_count} does not match last_offset_delta "
                f"{header.last_offset_delta}",
            )
        if header.compression > COMPRESSION_CODEC_MAX:
            raise LogError(ErrorCode.CORRUPT_MESSAGE, f"unknown codec {header.compression}")
        if not verify_crc(view, position, header):
            raise LogError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC32C mismatch")
        if not self.config.log_append_time:
            self._check_timestamps(view, position, header, now_ms)
        return header

    def _check_timestamps(
        self, view: memoryview | bytes | bytearray, position: int, header: BatchHeader, now_ms: int
    ) -> None:
        """The batch's timestamp range (its base and max timestamps) must lie in the
        topic's window; only when it does not are its records decoded, to name
        the ones outside it (KIP-467)."""
        config = self.config
        before_max = min(config.message_timestamp_before_max_ms,
                         config.message_timestamp_difference_max_ms)  # fmt: skip
        after_max = min(config.message_timestamp_after_max_ms,
                        config.message_timestamp_difference_max_ms)  # fmt: skip
        low_ms, high_ms = now_ms - before_max, now_ms + after_max
        for timestamp_ms in (header.base_timestamp, header.max_timestamp):
            if not low_ms <= timestamp_ms <= high_ms:
                raise _timestamp_errors(view[position : position + header.size], low_ms, high_ms)

    def _assign(
        self,
        view: memoryview | bytes | bytearray,
        headers: list[tuple[int, BatchHeader]],
        base_offset: int,
        leader_epoch: int,
        now_ms: int,
    ) -> tuple[bytearray | memoryview, list[AppendedBatch]]:
        """Patch base offsets and epochs (and LogAppendTime): in place when the
        caller's buffer is writable (a request frame of its own), else in a copy."""
        data = view if isinstance(view, memoryview) and not view.readonly else bytearray(view)
        log_append_time = self.config.log_append_time
        batches = []
        next_offset = base_offset
        for position, header in headers:
            patch_base_offset(data, position, next_offset)
            patch_leader_epoch(data, position, leader_epoch)
            max_timestamp_ms = header.max_timestamp
            if log_append_time:
                set_log_append_time(data, position, now_ms)
                max_timestamp_ms = now_ms
            last_offset = next_offset + header.last_offset_delta
            batches.append(AppendedBatch(position, last_offset, max_timestamp_ms, header.size))
            next_offset = last_offset + 1
        return data, batches

    def _after_write(self) -> None:
        if not self.flusher.fsync_enabled:
            # Relaxed mode: acknowledged once written; synced in the background.
            self.durable_end_offset = self.log_end_offset
            self._durable_end_moved()
            self._wake_waiters()
        self.flusher.request(self)
        assert self.log_start_offset <= self.durable_end_offset <= self.log_end_offset
