"""`weir consume TOPIC`: a Fetch loop over the topic's partitions (or one of them).

Positions start at the high watermark (latest), the log start offset with
`--from-beginning`, or the given `--offset`. Each whole batch is decoded
(CRC checked) with `decode_records`; control batches are skipped. The loop
ends after `max_records` records, or when `idle_timeout_ms` passes with nothing new.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from weir.cli.cluster import NO_LEADER, Cluster, TopicMetadata
from weir.cli.errors import CliError, describe_kafka_error, kafka_error
from weir.cli.formatting import bytes_fields, render_json
from weir.cli.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, list_offsets
from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    InvalidBatch,
    Record,
    decode_records,
    parse_batch_header,
)
from weir.wire.protocol import ApiKey

FETCH_WAIT_MS_MAX = 500
FETCH_BYTES_MAX = 8 * 1024 * 1024
PARTITION_FETCH_BYTES_MAX = 1024 * 1024
BATCH_UNCOMPRESSED_BYTES_MAX = 64 * 1024 * 1024
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED = 0
SESSIONLESS_ID = 0
SESSIONLESS_EPOCH = -1
RETRY_BACKOFF_S = 0.1
NULL_TEXT = b"null"

# Errors after which fresh metadata (a new leader) lets the fetch go on.
LEADERSHIP_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
    }
)


@dataclass(frozen=True)
class ConsumeOptions:
    from_beginning: bool = False
    partition: int | None = None
    offset: int | None = None
    max_records: int | None = None
    idle_timeout_ms: int | None = None


@dataclass(frozen=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


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
    stream: BinaryIO, *, output_json: bool, print_key: bool
) -> Callable[[ConsumedRecord], None]:
    """Writes each record to `stream` at once (JSON lines, or raw values)."""

    def emit(record: ConsumedRecord) -> None:
        if output_json:
            stream.write(record_json_line(record).encode("utf-8"))
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
        self.records_emitted = 0

    def run(self) -> int:
        """Consume until done; returns how many records were printed."""
        self._start_positions()
        max_records = self.options.max_records
        idle_s = (
            None if self.options.idle_timeout_ms is None else self.options.idle_timeout_ms / 1000
        )
        last_progress = time.monotonic()
        while max_records is None or self.records_emitted < max_records:
            wait_ms = FETCH_WAIT_MS_MAX
            if idle_s is not None:
                remaining_s = last_progress + idle_s - time.monotonic()
                if remaining_s <= 0:
                    break
                wait_ms = max(0, min(FETCH_WAIT_MS_MAX, int(remaining_s * 1000)))
            if self._fetch_once(wait_ms):
                last_progress = time.monotonic()
        return self.records_emitted

    def _partitions(self) -> list[int]:
        count = len(self.topic.partitions)
        wanted = self.options.partition
        if wanted is None:
            return list(range(count))
        if not 0 <= wanted < count:
            raise CliError(
                f"topic '{self.topic_name}' has no partition {wanted} "
                f"(it has {count}: 0..{count - 1})"
            )
        return [wanted]

    def _start_positions(self) -> None:
        partitions = self._partitions()
        if self.options.offset is not None:
            self.positions = {p: self.options.offset for p in partitions}
            return
        self._reset(partitions)

    def _reset(self, partitions: list[int]) -> None:
        timestamp = EARLIEST_TIMESTAMP if self.options.from_beginning else LATEST_TIMESTAMP
        for lookup in list_offsets(self.cluster, self.topic, partitions, timestamp).values():
            if lookup.error_code != ErrorCode.NONE or lookup.offset is None:
                raise kafka_error(
                    lookup.error_code,
                    topic=self.topic_name,
                    partition=lookup.partition,
                    action="find the start offset of",
                )
            self.positions[lookup.partition] = lookup.offset

    def _fetch_once(self, wait_ms: int) -> bool:
        """One Fetch per leader; True when any record was printed."""
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
            response = self.cluster.broker(leader).request(
                ApiKey.FETCH, self._fetch_body(partitions, wait_ms), wait_ms=wait_ms
            )
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
        return {
            "replica_id": CONSUMER_REPLICA_ID,
            "max_wait_ms": wait_ms,
            "min_bytes": 1,
            "max_bytes": FETCH_BYTES_MAX,
            "isolation_level": READ_UNCOMMITTED,
            "session_id": SESSIONLESS_ID,
            "session_epoch": SESSIONLESS_EPOCH,
            "topics": [
                {
                    "topic": self.topic_name,
                    "partitions": [
                        {
                            "partition": p,
                            "current_leader_epoch": -1,
                            "fetch_offset": self.positions[p],
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": PARTITION_FETCH_BYTES_MAX,
                        }
                        for p in partitions
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    def _take(self, part: Any) -> bool:
        """Print one partition's records; True when its leader must be looked up again."""
        partition = int(part["partition_index"])
        if partition not in self.positions:
            return False
        error = int(part["error_code"])
        if error in LEADERSHIP_ERRORS:
            return True
        if error == ErrorCode.OFFSET_OUT_OF_RANGE and self.options.offset is None:
            self._reset([partition])
            return False
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            raise CliError(
                describe_kafka_error(
                    error,
                    topic=self.topic_name,
                    partition=partition,
                    message=f"offset {self.positions[partition]} is out of range",
                )
            )
        if error != ErrorCode.NONE:
            raise kafka_error(error, topic=self.topic_name, partition=partition)
        records = part.get("records")
        if records is None:
            return False
        try:
            self._print_batches(partition, records)
        except InvalidBatch as exc:
            raise CliError(
                f"topic '{self.topic_name}' partition {partition}: unreadable batch: {exc}"
            ) from None
        return False

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
        return limit is not None and self.records_emitted >= limit
