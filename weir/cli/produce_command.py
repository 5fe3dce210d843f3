"""`weir produce TOPIC`: lines from stdin become records, sent in RecordBatches.

Each line is one record: its value, or key and value split at `--key-separator`,
or the fields a kcat-style format names (`-f '%k %v'`, weir.cli.record_format).
`-k` gives every record a key, `-H key=value` a header. Reading and parsing the lines is
`weir.cli.produce_input`'s; this module sends them and accounts for each.

Records are grouped per partition; one Produce request carries at most one batch
per partition (Kafka rejects more from v3 on) and is sent once the pending
records reach PRODUCE_REQUEST_BYTES_MAX, at end of input, or as soon as no more
input is ready (a terminal after each line, a quiet pipe: kcat's linger). Keyed
records go to Kafka's murmur2 partition; records without a key stick to one
partition per request, rotating (the sticky partitioner's behaviour).

A file given as stdin is checked up to VALIDATE_AHEAD_BYTES before the first
request, and a pipe up to what one request holds, so a bad line in a small input
sends nothing. Every line is accounted for: the summary names the lines
acknowledged, those the broker refused, those whose request got no answer (the
broker died: they may or may not be written) and those never sent.
With acks=all (the default) the producer is idempotent (InitProducerId, sequence
numbers per partition, as Kafka's enable.idempotence): a batch whose broker was lost
before it answered is sent again to the partition's leader, and a leader that already
has it drops the copy. A partition whose leader moved is sent again in any case
(nothing was written); with acks=0 or 1 a request that got no answer is not.
"""

from __future__ import annotations

import bisect
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from weir.cli.cluster import LEADER_MOVED_ERRORS, Cluster, TopicMetadata
from weir.cli.errors import (
    BrokerConnectionError,
    CliError,
    KafkaCodeError,
    describe_kafka_error,
    kafka_error,
    no_such_partition,
)
from weir.cli.formatting import counted, headers_for, render_table
from weir.cli.kafka_client import KafkaClient
from weir.cli.produce_input import (
    InputLine,
    InputLineError,
    LineReader,
    checked_ahead,
    parse_input,
)
from weir.cli.record_format import InputRecord, Token
from weir.format.errors import ErrorCode
from weir.format.partitioner import partition_for_key
from weir.format.record_batch import build_batch
from weir.wire.protocol import ApiKey

COMPRESSION_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
ACKS_NAMES = {0: "0", 1: "1", -1: "all"}
PRODUCE_REQUEST_BYTES_MAX = 512 * 1024
VALIDATE_AHEAD_BYTES = 16 * 1024 * 1024
RETRY_ATTEMPTS_MAX = 10
RETRY_BACKOFF_S = 0.25
ACKS_ALL = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_TRANSACTION_TIMEOUT_MS = -1
SEQUENCE_WRAP = 2**31

# The broker answered without appending: the same records may be sent again.
RETRIABLE_ERRORS = LEADER_MOVED_ERRORS | {ErrorCode.NOT_ENOUGH_REPLICAS}

RecordTuple = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]


@dataclass(frozen=True)
class ProduceOptions:
    timeout_ms: int
    key_separator: bytes | None = None
    record_format: Sequence[Token] | None = None
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    partition: int | None = None
    acks: int = -1
    compression: int = 0
    max_records: int | None = None


@dataclass
class PartitionTally:
    partition: int
    records_acknowledged: int = 0
    first_offset: int | None = None
    last_offset: int | None = None


class LineSet:
    """Line numbers as sorted, disjoint, merged ranges (input lines mostly arrive in
    runs, so millions of lines take a few ranges)."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []  # inclusive

    def __len__(self) -> int:
        return sum(end - start + 1 for start, end in zip(self._starts, self._ends, strict=True))

    def add(self, numbers: Iterable[int]) -> None:
        for start, end in _runs(sorted(numbers)):
            self._add_run(start, end)

    def add_run(self, start: int, end: int) -> None:
        """Lines `start` to `end`, both included (none when end < start)."""
        if start <= end:
            self._add_run(start, end)

    def _add_run(self, start: int, end: int) -> None:
        index = bisect.bisect_left(self._ends, start - 1)
        while index < len(self._starts) and self._starts[index] <= end + 1:
            start = min(start, self._starts[index])
            end = max(end, self._ends[index])
            del self._starts[index], self._ends[index]
        self._starts.insert(index, start)
        self._ends.insert(index, end)

    def text(self) -> str:
        """ "1-3,7"; "" when empty."""
        return ",".join(
            str(start) if start == end else f"{start}-{end}"
            for start, end in zip(self._starts, self._ends, strict=True)
        )


def _runs(numbers: Sequence[int]) -> Iterator[tuple[int, int]]:
    if not numbers:
        return
    start = previous = numbers[0]
    for number in numbers[1:]:
        if number != previous + 1:
            yield start, previous
            start = number
        previous = number
    yield start, previous


@dataclass
class ProduceSummary:
    """What became of every line read."""

    topic: str
    acks: int
    partitions: dict[int, PartitionTally] = field(default_factory=dict)
    acknowledged_lines: LineSet = field(default_factory=LineSet)
    sent_unconfirmed_lines: LineSet = field(default_factory=LineSet)
    refused_lines: LineSet = field(default_factory=LineSet)
    not_sent_lines: LineSet = field(default_factory=LineSet)
    lines_read: int = 0
    interrupted: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def records_acknowledged(self) -> int:
        return len(self.acknowledged_lines)

    def no_line_sent(self) -> bool:
        return not (
            len(self.acknowledged_lines)
            or len(self.sent_unconfirmed_lines)
            or len(self.refused_lines)
        )

    def to_document(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "acks": ACKS_NAMES[self.acks],
            "records_read": self.lines_read,
            "records_acknowledged": self.records_acknowledged,
            "records_sent_unconfirmed": len(self.sent_unconfirmed_lines),
            "records_refused": len(self.refused_lines),
            "records_not_sent": len(self.not_sent_lines),
            "lines_acknowledged": self.acknowledged_lines.text(),
            "lines_sent_unconfirmed": self.sent_unconfirmed_lines.text(),
            "lines_refused": self.refused_lines.text(),
            "lines_not_sent": self.not_sent_lines.text(),
            "partitions": [
                {
                    "partition": t.partition,
                    "records_acknowledged": t.records_acknowledged,
                    "first_offset": t.first_offset,
                    "last_offset": t.last_offset,
                }
                for t in sorted(self.partitions.values(), key=lambda t: t.partition)
            ],
            "errors": self.errors,
        }


def render_summary(document: dict[str, Any]) -> str:
    acknowledged = document["records_acknowledged"]
    if document["acks"] == "0":
        text = f"sent {counted(document['records_sent_unconfirmed'], 'record')} to topic " \
               f"'{document['topic']}' (acks=0: the broker does not confirm)\n"  # fmt: skip
    else:
        text = f"wrote {counted(acknowledged, 'record')} to topic '{document['topic']}'"
        if document["errors"] and acknowledged:
            text += f" (lines {document['lines_acknowledged']})"
        text += "\n"
    if document["lines_sent_unconfirmed"] and document["acks"] != "0":
        text += f"unconfirmed (sent, no answer; may or may not be written): lines " \
                f"{document['lines_sent_unconfirmed']}\n"  # fmt: skip
    if document["lines_refused"]:
        text += f"refused by the broker: lines {document['lines_refused']}\n"
    if document["lines_not_sent"]:
        text += f"not sent: lines {document['lines_not_sent']}\n"
    if len(document["partitions"]) > 1:
        rows = [
            [p["partition"], p["records_acknowledged"], p["first_offset"], p["last_offset"]]
            for p in document["partitions"]
        ]
        fields = ("partition", "records_acknowledged", "first_offset", "last_offset")
        text += render_table(headers_for(fields), rows)
    return text


class PartitionChooser:
    """Kafka's default choice: the given partition, murmur2 of the key, else sticky."""

    def __init__(self, partition_count: int, fixed: int | None) -> None:
        self.partition_count = partition_count
        self.fixed = fixed
        self.sticky = random.randrange(partition_count)

    def choose(self, key: bytes | None) -> int:
        if self.fixed is not None:
            return self.fixed
        if key is not None:
            return partition_for_key(key, self.partition_count)
        return self.sticky

    def next_request(self) -> None:
        self.sticky = (self.sticky + 1) % self.partition_count


# -- sending -------------------------------------------------------------------------------------


@dataclass
class Pending:
    """Records not yet sent, per partition, with their line numbers."""

    records: dict[int, list[InputLine]] = field(default_factory=lambda: defaultdict(list))
    size_bytes: int = 0

    def add(self, partition: int, item: InputLine) -> None:
        self.records[partition].append(item)
        self.size_bytes += item.size_bytes

    def clear(self) -> None:
        self.records = defaultdict(list)
        self.size_bytes = 0


@dataclass
class OpenBatch:
    """One partition's records in flight: built once, so a retry sends the same bytes
    (and, idempotent, the same sequence numbers, which lets the broker drop a copy)."""

    partition: int
    items: list[InputLine]
    records: bytes
    attempted: bool = False

    def line_numbers(self) -> list[int]:
        return [item.line_number for item in self.items]


class ProducerIdentity:
    """An idempotent producer's id, epoch and next sequence number per partition
    (InitProducerId; Kafka's enable.idempotence)."""

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self._next_sequences: dict[int, int] = defaultdict(int)

    @classmethod
    def obtain(cls, cluster: Cluster) -> ProducerIdentity:
        body = {
            "transactional_id": None,
            "transaction_timeout_ms": NO_TRANSACTION_TIMEOUT_MS,
            "producer_id": NO_PRODUCER_ID,
            "producer_epoch": NO_PRODUCER_EPOCH,
        }
        response = cluster.request_any(ApiKey.INIT_PRODUCER_ID, body)
        error = int(response["error_code"])
        if error != ErrorCode.NONE:
            raise kafka_error(error, action="get a producer id for idempotent produce")
        return cls(int(response["producer_id"]), int(response["producer_epoch"]))

    def take_sequence(self, partition: int, count: int) -> int:
        base = self._next_sequences[partition]
        self._next_sequences[partition] = (base + count) % SEQUENCE_WRAP
        return base


class Producer:
    def __init__(self, cluster: Cluster, topic: TopicMetadata, options: ProduceOptions) -> None:
        self.cluster = cluster
        self.topic = topic
        self.options = options
        self.summary = ProduceSummary(topic=topic.name, acks=options.acks)
        self.chooser = PartitionChooser(len(topic.partitions), options.partition)
        self.pending = Pending()
        self.identity: ProducerIdentity | None = None
        if options.acks == ACKS_ALL:  # idempotence needs acks=all, as in Kafka
            self.identity = ProducerIdentity.obtain(cluster)
        self._unresolved: dict[int, OpenBatch] = {}
        self._last_send_error: str | None = None
        self.last_line_sent = 0

    def run(self, reader: LineReader) -> ProduceSummary:
        items = parse_input(reader, self.options)
        checked = reader.is_regular_file()
        if checked:
            items = checked_ahead(items, VALIDATE_AHEAD_BYTES, self._check_partition)
        try:
            for item in items:
                self.summary.lines_read = item.line_number
                if not checked:
                    self._check_partition(item)
                self.pending.add(self._partition_of(item.record), item)
                full = self.pending.size_bytes >= PRODUCE_REQUEST_BYTES_MAX
                if full or not reader.input_waiting():
                    self._flush()
                    if self.summary.errors:
                        return self.summary
            self._flush()
        except InputLineError as exc:
            self.summary.lines_read = exc.line_number
            self.summary.errors.append(exc.message + _nothing_sent_note(self.summary))
            self._give_up_pending(exc.line_number)
        except CliError as exc:  # no broker reachable: what was sent is counted
            self.summary.errors.append(exc.message)
        except KeyboardInterrupt:  # Ctrl-C: say what became of the lines read so far
            self._abandon_unresolved()
            self._give_up_pending(self.summary.lines_read)
            self.summary.interrupted = True
            self.summary.errors.append("interrupted (Ctrl-C)")
        return self.summary

    def _check_partition(self, item: InputLine) -> None:
        partition = item.record.partition
        count = len(self.topic.partitions)
        if partition is not None and not 0 <= partition < count:
            reason = no_such_partition(self.topic.name, partition, count).message
            raise InputLineError(item.line_number, reason)

    def _partition_of(self, record: InputRecord) -> int:
        if record.partition is not None:
            return record.partition
        return self.chooser.choose(record.key)

    def _give_up_pending(self, last_line: int) -> None:
        """Input stopped at `last_line`: the lines after those handed to a request
        (pending, or checked ahead) up to it were not sent."""
        self.summary.not_sent_lines.add_run(self.last_line_sent + 1, last_line)
        self.pending.clear()

    # -- sending -------------------------------------------------------------------------------

    def _flush(self) -> None:
        """Send what is pending. A partition whose leader moved is sent again; so is one
        whose broker was lost, when idempotent (the broker drops a copy it already
        has). What is left after the retries is accounted for and an error recorded."""
        if not self.pending.records:
            return
        self._unresolved = {
            p: OpenBatch(p, items, self._batch_bytes(p, items))
            for p, items in self.pending.records.items()
        }
        self.last_line_sent = self.summary.lines_read  # every line read so far is pending
        self.pending.clear()
        self.chooser.next_request()
        self._last_send_error = None
        try:
            for attempt in range(RETRY_ATTEMPTS_MAX):
                self._send_round()
                if not self._unresolved:
                    return
                time.sleep(RETRY_BACKOFF_S * (attempt + 1))
                self.topic = self.cluster.topic(self.topic.name, action="produce to")
        except CliError:
            self._abandon_unresolved()
            raise
        partitions = sorted(self._unresolved)
        self._abandon_unresolved()
        self.summary.errors.append(
            self._last_send_error
            or f"topic '{self.topic.name}': partitions {partitions} found no leader after "
            f"{RETRY_ATTEMPTS_MAX} attempts"
        )

    def _abandon_unresolved(self) -> None:
        """Batches given up: one that was sent may have been written (unconfirmed),
        one never sent was not."""
        for batch in self._unresolved.values():
            lines = (
                self.summary.sent_unconfirmed_lines
                if batch.attempted
                else (self.summary.not_sent_lines)
            )
            lines.add(batch.line_numbers())
        self._unresolved = {}

    def _send_round(self) -> None:
        """Send each leader its unresolved partitions once."""
        leaders = {p.partition: p.leader for p in self.topic.partitions}
        by_leader: dict[int, list[OpenBatch]] = defaultdict(list)
        for partition, batch in sorted(self._unresolved.items()):
            by_leader[leaders[partition]].append(batch)
        for leader, batches in by_leader.items():
            if leader < 0:
                continue  # no leader now: again after fresh metadata
            try:
                client = self.cluster.broker(leader)
            except BrokerConnectionError as exc:
                self._last_send_error = exc.message
                continue  # the leader is gone (a failover): nothing sent, ask again
            for batch in batches:
                batch.attempted = True
            try:
                self._send_to(client, batches)
            except BrokerConnectionError as exc:
                if self.identity is None:
                    raise  # without idempotence a resend could write a second copy
                self._last_send_error = exc.message

    def _send_to(self, client: KafkaClient, batches: list[OpenBatch]) -> None:
        body = {
            "transactional_id": None,
            "acks": self.options.acks,
            "timeout_ms": self.options.timeout_ms,
            "topic_data": [
                {
                    "name": self.topic.name,
                    "partition_data": [
                        {"index": b.partition, "records": b.records} for b in batches
                    ],
                }
            ],
        }
        if self.options.acks == 0:
            client.send_without_response(ApiKey.PRODUCE, body)
            for batch in batches:
                self.summary.sent_unconfirmed_lines.add(batch.line_numbers())
                del self._unresolved[batch.partition]
            return
        response = client.request(ApiKey.PRODUCE, body, wait_ms=self.options.timeout_ms)
        self._record_outcomes(response, {b.partition: b for b in batches})

    def _batch_bytes(self, partition: int, items: list[InputLine]) -> bytes:
        now_ms = int(time.time() * 1000)
        records: list[RecordTuple] = [
            (
                i.record.key,
                i.record.value,
                i.record.headers,
                now_ms if i.record.timestamp_ms is None else i.record.timestamp_ms,
            )
            for i in items
        ]
        if self.identity is None:
            return build_batch(records, compression=self.options.compression)
        return build_batch(
            records,
            compression=self.options.compression,
            producer_id=self.identity.producer_id,
            producer_epoch=self.identity.producer_epoch,
            base_sequence=self.identity.take_sequence(partition, len(records)),
        )

    def _record_outcomes(self, response: Any, batches: dict[int, OpenBatch]) -> None:
        """Tally what the broker accepted and an error line for each refusal; partitions
        to send again stay unresolved."""
        answered: set[int] = set()
        for topic in response["responses"]:
            if topic["name"] != self.topic.name:
                continue
            for part in topic["partition_responses"]:
                partition = int(part["index"])
                if partition not in batches or partition in answered:
                    continue
                answered.add(partition)
                self._outcome(part, batches[partition])
        for partition in sorted(set(batches) - answered):
            self.summary.sent_unconfirmed_lines.add(batches[partition].line_numbers())
            del self._unresolved[partition]
            self.summary.errors.append(f"topic '{self.topic.name}' partition {partition}: "
                                       "the broker's answer left it out")  # fmt: skip

    def _outcome(self, part: Any, batch: OpenBatch) -> None:
        error = int(part["error_code"])
        if error in RETRIABLE_ERRORS:
            return
        del self._unresolved[batch.partition]
        lines = batch.line_numbers()
        if error != ErrorCode.NONE:
            self.summary.refused_lines.add(lines)
            self.summary.errors.append(describe_kafka_error(
                error, topic=self.topic.name, partition=batch.partition,
                message=_error_message(part),
            ))  # fmt: skip
            return
        tally = self.summary.partitions.get(batch.partition) or PartitionTally(batch.partition)
        self.summary.partitions[batch.partition] = tally
        base_offset = int(part["base_offset"])
        tally.records_acknowledged += len(lines)
        if tally.first_offset is None:
            tally.first_offset = base_offset
        tally.last_offset = base_offset + len(lines) - 1
        self.summary.acknowledged_lines.add(lines)


def _nothing_sent_note(summary: ProduceSummary) -> str:
    return "; nothing was sent" if summary.no_line_sent() else ""


def produce_lines(
    cluster: Cluster,
    topic_name: str,
    reader: LineReader,
    options: ProduceOptions,
    notice: Callable[[str], None] = lambda text: None,
) -> ProduceSummary:
    """Send every line as a record; stops at the first bad line, refusal or lost broker.
    `notice` is told (before any line is read) when the topic was created on use."""
    topic = topic_for_produce(cluster, topic_name, notice)
    count = len(topic.partitions)
    if options.partition is not None and not 0 <= options.partition < count:
        raise no_such_partition(topic_name, options.partition, count)
    return Producer(cluster, topic, options).run(reader)


def topic_for_produce(
    cluster: Cluster, topic_name: str, notice: Callable[[str], None]
) -> TopicMetadata:
    """The topic to produce to. A missing one is asked for again with auto-creation
    allowed (as a Kafka producer's Metadata request does): if the broker then names
    it, it was created just now, and `notice` says so with what it got."""
    try:
        return cluster.topic(topic_name, action="produce to")
    except KafkaCodeError as exc:
        if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise
    try:
        topic = cluster.topic(topic_name, action="produce to", auto_create=True)
    except KafkaCodeError as exc:
        if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise
        raise CliError(
            f"topic '{topic_name}' does not exist and the broker does not create topics on "
            f"use: create it with `weir topic create {topic_name}` (UNKNOWN_TOPIC_OR_PARTITION)"
        ) from None
    notice(created_on_use_notice(topic))
    return topic


def created_on_use_notice(topic: TopicMetadata) -> str:
    return (
        f"created topic '{topic.name}' ({counted(len(topic.partitions), 'partition')}, "
        f"replication factor {topic.replication_factor}): it did not exist and the broker "
        "creates topics on use (broker setting auto_create_topics)"
    )


def _error_message(part: Any) -> str | None:
    message = part.get("error_message")
    if message:
        return str(message)
    record_errors = part.get("record_errors") or []
    if record_errors:
        return "; ".join(
            f"record {e['batch_index']}: {e.get('batch_index_error_message') or 'rejected'}"
            for e in record_errors
        )
    return None
