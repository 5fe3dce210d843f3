"""`weir consume TOPIC`: a Fetch loop over the topic's partitions (or some of them), or
over the partitions a consumer group assigns (`-g GROUP`).

Each partition starts where its offset spec says (weir.cli.offset_specs; the default
is the end), or, in a group, at the group's committed offset (the spec is used only
where there is none). Each whole batch is decoded (CRC checked) with
`decode_records`; control batches are skipped. The loop ends after `max_records`
records, when `idle_timeout_ms` passes with nothing new, or (`exit_at_end`) once every
partition has been read up to its high watermark. A group member commits what it
printed after every fetch that printed something, and when it stops.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, BinaryIO

from weir.cli.cluster import LEADER_MOVED_ERRORS, NO_LEADER, Cluster, TopicMetadata
from weir.cli.errors import BrokerConnectionError, CliError, kafka_error, no_such_partition
from weir.cli.formatting import bytes_fields, render_json
from weir.cli.group_member import GroupMember, RejoinNeededError
from weir.cli.offset_specs import END, OffsetKind, OffsetSpec
from weir.cli.offsets import (
    PartitionRange,
    lookup_offsets,
    out_of_range_error,
    partition_ranges,
)
from weir.cli.record_format import OutputRecord, Token, render_record
from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    InvalidBatch,
    Record,
    decode_records,
    parse_batch_header,
)
from weir.wire.consumer_fetch import consumer_fetch_body
from weir.wire.protocol import ApiKey

FETCH_WAIT_MS_MAX = 500
FETCH_BYTES_MAX = 8 * 1024 * 1024
PARTITION_FETCH_BYTES_MAX = 1024 * 1024
BATCH_UNCOMPRESSED_BYTES_MAX = 64 * 1024 * 1024
RETRY_BACKOFF_S = 0.1
NULL_TEXT = b"null"
NO_TIMESTAMP_OFFSET = -1

# Errors after which fresh metadata (a new leader) lets the fetch go on.
LEADERSHIP_ERRORS = LEADER_MOVED_ERRORS | {
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_ENOUGH_REPLICAS,
}


@dataclass(frozen=True)
class ConsumeOptions:
    """`offsets`: the spec of each partition, None the default for the others."""

    offsets: Mapping[int | None, OffsetSpec] = field(default_factory=dict)
    partitions: tuple[int, ...] | None = None
    max_records: int | None = None
    idle_timeout_ms: int | None = None
    exit_at_end: bool = False
    group_id: str | None = None

    def spec_for(self, partition: int) -> OffsetSpec:
        return self.offsets.get(partition) or self.offsets.get(None) or END


ConsumedRecord = OutputRecord


def record_json_line(record: ConsumedRecord) -> str:
    document: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp_ms": record.timestamp_ms,
    }
    document.update(bytes_fields("key", record.key))
    document.update(bytes_fields("value", record.value))
    document["headers"] = [{"key": k, **bytes_fields("value", v)} for k, v in record.headers]
    return render_json(document)


def record_text_line(record: ConsumedRecord, *, print_key: bool) -> bytes:
    value = NULL_TEXT if record.value is None else record.value
    if print_key:
        key = NULL_TEXT if record.key is None else record.key
        return key + b"\t" + value + b"\n"
    return value + b"\n"


def printer(
    stream: BinaryIO,
    *,
    output_json: bool,
    print_key: bool,
    record_format: list[Token] | None = None,
) -> Callable[[ConsumedRecord], None]:
    """Writes each record to `stream` at once: JSON lines, a format string's output,
    or raw values (with their keys)."""

    def emit(record: ConsumedRecord) -> None:
        if output_json:
            stream.write(record_json_line(record).encode("utf-8"))
        elif record_format is not None:
            stream.write(render_record(record_format, record))
        else:
            stream.write(record_text_line(record, print_key=print_key))
        stream.flush()

    return emit


def iter_batches(records: bytes | memoryview) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Whole batches of a Fetch response's records; a truncated last batch is left out
    (a broker may cut the last batch at the byte limit)."""
    view = memoryview(records)
    pos = 0
    while len(view) - pos >= BATCH_HEADER_SIZE:
        header = parse_batch_header(view, pos)
        end = pos + header.size
        if end > len(view):
            return
        yield header, view[pos:end]
        pos = end


def fetched_records(records: bytes | memoryview, position: int) -> Iterator[Record]:
    """The data records at or after `position` in the whole batches of a Fetch answer
    (a fetch may start inside a batch; control batches carry no data). CRCs are checked;
    raises InvalidBatch."""
    for header, batch in iter_batches(records):
        if header.last_offset < position or header.is_control:
            continue
        for record in decode_records(batch, uncompressed_bytes_max=BATCH_UNCOMPRESSED_BYTES_MAX):
            if record.offset >= position:
                yield record


def end_of_whole_batches(records: bytes | memoryview) -> int:
    """The offset after the last whole batch (0 when there is none)."""
    end = 0
    for header, _ in iter_batches(records):
        end = header.next_offset
    return end


@contextmanager
def interrupt_between_records() -> Iterator[Callable[[], bool]]:
    """Turns the first SIGINT into a flag the consumer reads between records (so a
    record is never printed without its position moving past it); a second SIGINT
    raises KeyboardInterrupt at once. Left alone where SIGINT is ignored (a
    background job) or cannot be handled (not the main thread)."""
    requested = False

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        nonlocal requested
        if requested:
            raise KeyboardInterrupt
        requested = True

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
        yield lambda: False
        return
    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield lambda: requested
    finally:
        signal.signal(signal.SIGINT, previous)


class Consumer:
    """Positions per partition and the Fetch loop that advances them."""

    def __init__(
        self,
        cluster: Cluster,
        topic_name: str,
        options: ConsumeOptions,
        emit: Callable[[ConsumedRecord], None],
    ) -> None:
        self.cluster = cluster
        self.topic_name = topic_name
        self.options = options
        self.emit = emit
        self.topic: TopicMetadata = cluster.topic(topic_name, action="consume from")
        self.positions: dict[int, int] = {}
        self.at_end: set[int] = set()
        self.records_emitted = 0
        self.member: GroupMember | None = None
        if options.group_id is not None:
            self.member = GroupMember(cluster, options.group_id, topic_name)
        self._committed: dict[int, int] = {}
        self._interrupted: Callable[[], bool] = lambda: False

    def run(self) -> int:
        """Consume until done; returns how many records were printed. Ctrl-C stops it
        between two records (a group member then commits and leaves) and raises
        KeyboardInterrupt; a second Ctrl-C interrupts at once."""
        with interrupt_between_records() as self._interrupted:
            if self.member is None:
                self._start(self._partitions())
                self._loop()
            else:
                try:
                    self._join()
                    self._loop()
                finally:
                    self._stop_membership()
            if self._interrupted():
                raise KeyboardInterrupt
        return self.records_emitted

    def _loop(self) -> None:
        idle_s = (
            None if self.options.idle_timeout_ms is None else self.options.idle_timeout_ms / 1000
        )
        last_progress = time.monotonic()
        while not self._done():
            if self.options.exit_at_end and self.at_end >= set(self.positions):
                return
            wait_ms = 0 if self.options.exit_at_end else FETCH_WAIT_MS_MAX
            if idle_s is not None:
                remaining_s = last_progress + idle_s - time.monotonic()
                if remaining_s <= 0:
                    return
                wait_ms = max(0, min(wait_ms, int(remaining_s * 1000)))
            if self._step(wait_ms):
                last_progress = time.monotonic()

    def _step(self, wait_ms: int) -> bool:
        """One fetch round (and, in a group, a heartbeat and a commit); True when it
        printed something."""
        if self.member is None:
            return self._fetch_once(wait_ms)
        try:
            self.member.heartbeat_if_due()
            progressed = self._fetch_once(wait_ms)
            if progressed:
                self._commit()
            return progressed
        except RejoinNeededError:
            self._commit_quietly()
            self._join()
            return False

    # -- start positions -----------------------------------------------------------------------

    def _partitions(self) -> list[int]:
        """The partitions -p names (all without it); each one -o names must be among them."""
        count = len(self.topic.partitions)
        wanted = self.options.partitions
        chosen = list(range(count)) if wanted is None else sorted(set(wanted))
        named = [p for p in self.options.offsets if p is not None]
        for partition in chosen + named:
            if not 0 <= partition < count:
                raise no_such_partition(self.topic_name, partition, count)
        left_out = sorted(set(named) - set(chosen))
        if left_out:
            raise CliError(f"-o names partition {left_out[0]}, which -p leaves out")
        return chosen

    def _start(self, partitions: list[int]) -> None:
        """Each partition's position from its offset spec."""
        if not partitions:
            return
        ranges = partition_ranges(self.cluster, self.topic, partitions)
        for partition in partitions:
            self.positions[partition] = self._resolve(
                self.options.spec_for(partition), ranges[partition]
            )

    def _resolve(self, spec: OffsetSpec, held: PartitionRange) -> int:
        if spec.kind is OffsetKind.BEGINNING:
            return held.start
        if spec.kind is OffsetKind.END:
            return held.end
        if spec.kind is OffsetKind.AFTER_BEGINNING:
            return min(held.start + spec.value, held.end)
        if spec.kind is OffsetKind.BEFORE_END:
            return max(held.end - spec.value, held.start)
        if spec.kind is OffsetKind.TIMESTAMP:
            return self._offset_for_timestamp(held, spec.value)
        if not held.start <= spec.value <= held.end:
            raise out_of_range_error(self.topic_name, spec.value, held)
        return spec.value

    def _offset_for_timestamp(self, held: PartitionRange, timestamp_ms: int) -> int:
        lookup = lookup_offsets(self.cluster, self.topic_name, [held.partition], timestamp_ms)
        found = lookup[held.partition]
        if found.error_code != ErrorCode.NONE:
            raise kafka_error(found.error_code, topic=self.topic_name, partition=held.partition,
                              action="find the offset for a timestamp in")  # fmt: skip
        if found.offset is None or found.offset == NO_TIMESTAMP_OFFSET:
            return held.end  # every record is older: start at the end
        return found.offset

    # -- group membership ----------------------------------------------------------------------

    def _join(self) -> None:
        """Join the group; positions are the committed offsets of the partitions it
        assigns, or their offset spec where none is committed."""
        assert self.member is not None
        partitions = self.member.join()
        committed = self.member.committed(partitions)
        self.positions = dict(committed)
        self._committed = dict(committed)
        self.at_end.clear()
        self._start([p for p in partitions if p not in committed])

    def _commit(self) -> None:
        assert self.member is not None
        changed = {p: o for p, o in self.positions.items() if self._committed.get(p) != o}
        self.member.commit(changed)
        self._committed.update(changed)

    def _commit_quietly(self) -> None:
        """Commit what was printed when the group already moved on: it may be refused
        (the records are then read again by the partition's next owner)."""
        with contextlib.suppress(RejoinNeededError, CliError):
            self._commit()

    def _stop_membership(self) -> None:
        assert self.member is not None
        try:
            self._commit()
            self.member.leave()
        except (RejoinNeededError, CliError):
            pass

    # -- fetching ------------------------------------------------------------------------------

    def _fetch_once(self, wait_ms: int) -> bool:
        """One Fetch per leader; True when any record was printed."""
        if not self.positions:  # a group member without partitions waits its turn
            time.sleep(wait_ms / 1000 if wait_ms else RETRY_BACKOFF_S)
            return False
        by_leader: dict[int, list[int]] = defaultdict(list)
        leaders = {p.partition: p.leader for p in self.topic.partitions}
        needs_metadata = False
        for partition in self.positions:
            leader = leaders.get(partition, NO_LEADER)
            if leader == NO_LEADER:
                needs_metadata = True
            else:
                by_leader[leader].append(partition)
        before = self.records_emitted
        for leader, partitions in by_leader.items():
            try:
                response = self.cluster.broker(leader).request(
                    ApiKey.FETCH, self._fetch_body(partitions, wait_ms), wait_ms=wait_ms
                )
            except BrokerConnectionError:
                needs_metadata = True  # the leader is gone: a new one comes with metadata
                continue
            top_error = int(response.get("error_code", 0))
            if top_error != ErrorCode.NONE:
                raise kafka_error(top_error, topic=self.topic_name, action="fetch from")
            for topic in response["responses"]:
                if topic["topic"] != self.topic_name:
                    continue
                for part in topic["partitions"]:
                    needs_metadata |= self._take(part)
                    if self._done():
                        return True
        if needs_metadata:
            time.sleep(RETRY_BACKOFF_S)
            self.topic = self.cluster.topic(self.topic_name, action="consume from")
        return self.records_emitted > before

    def _fetch_body(self, partitions: list[int], wait_ms: int) -> dict[str, Any]:
        return consumer_fetch_body(
            self.topic_name,
            {p: self.positions[p] for p in partitions},
            bytes_max=FETCH_BYTES_MAX,
            partition_bytes_max=PARTITION_FETCH_BYTES_MAX,
            wait_ms=wait_ms,
        )

    def _take(self, part: Any) -> bool:
        """Print one partition's records; True when its leader must be looked up again."""
        partition = int(part["partition_index"])
        if partition not in self.positions:
            return False
        error = int(part["error_code"])
        if error in LEADERSHIP_ERRORS:
            return True
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(partition)
            return False
        if error != ErrorCode.NONE:
            raise kafka_error(error, topic=self.topic_name, partition=partition)
        records = part.get("records")
        if records is not None:
            try:
                self._print_batches(partition, records)
            except InvalidBatch as exc:
                raise CliError(
                    f"topic '{self.topic_name}' partition {partition}: unreadable batch: {exc}"
                ) from None
        if self.positions[partition] >= int(part["high_watermark"]):
            self.at_end.add(partition)
        return False

    def _out_of_range(self, partition: int) -> None:
        """The position left the log (retention, or an offset asked for): an offset the
        user gave is an error that says what is valid; otherwise start again at the
        beginning, or at the end when that is the spec."""
        held = partition_ranges(self.cluster, self.topic, [partition])[partition]
        spec = self.options.spec_for(partition)
        if spec.kind is OffsetKind.ABSOLUTE and self.member is None:
            raise out_of_range_error(self.topic_name, self.positions[partition], held)
        self.positions[partition] = held.end if spec.kind is OffsetKind.END else held.start

    def _print_batches(self, partition: int, records: bytes | memoryview) -> None:
        for record in fetched_records(records, self.positions[partition]):
            self.emit(
                ConsumedRecord(
                    topic=self.topic_name,
                    partition=partition,
                    offset=record.offset,
                    timestamp_ms=record.timestamp_ms,
                    key=record.key,
                    value=record.value,
                    headers=list(record.headers),
                )
            )
            self.records_emitted += 1
            self.positions[partition] = record.offset + 1
            if self._done():
                return
        self.positions[partition] = max(self.positions[partition], end_of_whole_batches(records))

    def _done(self) -> bool:
        limit = self.options.max_records
        return (limit is not None and self.records_emitted >= limit) or self._interrupted()
