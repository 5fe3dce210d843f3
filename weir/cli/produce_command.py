"""`weir produce TOPIC`: lines from stdin become records, sent in RecordBatches.

Records are grouped per partition; one Produce request carries at most one batch
per partition (Kafka rejects more from v3 on) and is sent once the pending
records reach PRODUCE_REQUEST_BYTES_MAX, at end of input, or after every line
when stdin is a terminal. Keyed records go to Kafka's murmur2 partition; records
without a key stick to one partition per request, rotating (the sticky
partitioner's behaviour).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from weir.cli.cluster import Cluster, TopicMetadata
from weir.cli.errors import CliError, describe_kafka_error
from weir.cli.formatting import render_table
from weir.cli.partitioner import partition_for_key
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.wire.protocol import ApiKey

COMPRESSION_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
PRODUCE_REQUEST_BYTES_MAX = 512 * 1024
RECORD_OVERHEAD_BYTES = 24
LINE_BYTES_MAX = 8 * 1024 * 1024

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


@dataclass(frozen=True)
class ProduceOptions:
    timeout_ms: int
    key_separator: bytes | None = None
    partition: int | None = None
    acks: int = -1
    compression: int = 0
    send_each_line: bool = False


@dataclass
class PartitionTally:
    partition: int
    records_written: int = 0
    first_offset: int | None = None
    last_offset: int | None = None


@dataclass
class ProduceSummary:
    topic: str
    acks: int
    partitions: dict[int, PartitionTally] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def records_written(self) -> int:
        return sum(t.records_written for t in self.partitions.values())

    def to_document(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "records_written": self.records_written,
            "acknowledged": self.acks != 0,
            "partitions": [
                {
                    "partition": t.partition,
                    "records_written": t.records_written,
                    "first_offset": t.first_offset,
                    "last_offset": t.last_offset,
                }
                for t in sorted(self.partitions.values(), key=lambda t: t.partition)
            ],
            "errors": self.errors,
        }


def render_summary(document: dict[str, Any]) -> str:
    count = document["records_written"]
    noun = "record" if count == 1 else "records"
    verb = "wrote" if document["acknowledged"] else "sent (acks=0, unconfirmed)"
    text = f"{verb} {count} {noun} to topic '{document['topic']}'\n"
    if len(document["partitions"]) > 1:
        rows = [
            [p["partition"], p["records_written"], p["first_offset"], p["last_offset"]]
            for p in document["partitions"]
        ]
        text += render_table(["PARTITION", "RECORDS", "FIRST OFFSET", "LAST OFFSET"], rows)
    return text


def read_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Lines of `stream` without their line ending (\\n or \\r\\n); CliError past LINE_BYTES_MAX."""
    line_number = 0
    while True:
        line = stream.readline(LINE_BYTES_MAX + 2)
        if not line:
            return
        line_number += 1
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        if len(line) > LINE_BYTES_MAX:
            raise CliError(f"line {line_number} is longer than {LINE_BYTES_MAX} bytes")
        yield line


def split_line(
    line: bytes, separator: bytes | None, line_number: int
) -> tuple[bytes | None, bytes]:
    """(key, value) of one input line: the whole line is the value without a separator."""
    if separator is None:
        return None, line
    key, found, value = line.partition(separator)
    if not found:
        raise CliError(
            f"line {line_number} has no key separator {separator.decode(errors='replace')!r}"
        )
    return key, value


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


def produce_lines(
    cluster: Cluster, topic_name: str, lines: Iterable[bytes], options: ProduceOptions
) -> ProduceSummary:
    """Send every line as a record; stops at the first input or partition error."""
    topic = cluster.topic(topic_name, action="produce to")
    count = len(topic.partitions)
    if options.partition is not None and not 0 <= options.partition < count:
        raise CliError(
            f"topic '{topic_name}' has no partition {options.partition} "
            f"(it has {count}: 0..{count - 1})"
        )
    summary = ProduceSummary(topic=topic_name, acks=options.acks)
    chooser = PartitionChooser(count, options.partition)
    pending: dict[int, list[Record]] = defaultdict(list)
    pending_bytes = 0
    try:
        for line_number, line in enumerate(lines, start=1):
            key, value = split_line(line, options.key_separator, line_number)
            pending[chooser.choose(key)].append((key, value, []))
            pending_bytes += len(line) + RECORD_OVERHEAD_BYTES
            if pending_bytes >= PRODUCE_REQUEST_BYTES_MAX or options.send_each_line:
                _send(cluster, topic, pending, options, summary)
                chooser.next_request()
                pending.clear()
                pending_bytes = 0
                if summary.errors:
                    return summary
    except CliError as exc:
        summary.errors.append(exc.message)
    if pending:
        _send(cluster, topic, pending, options, summary)
    return summary


def _send(
    cluster: Cluster,
    topic: TopicMetadata,
    pending: dict[int, list[Record]],
    options: ProduceOptions,
    summary: ProduceSummary,
) -> None:
    leaders = {p.partition: p.leader for p in topic.partitions}
    by_leader: dict[int, list[int]] = defaultdict(list)
    for partition in sorted(pending):
        by_leader[leaders[partition]].append(partition)
    for leader, partitions in by_leader.items():
        body = {
            "transactional_id": None,
            "acks": options.acks,
            "timeout_ms": options.timeout_ms,
            "topic_data": [
                {
                    "name": topic.name,
                    "partition_data": [
                        {
                            "index": p,
                            "records": build_batch(pending[p], compression=options.compression),
                        }
                        for p in partitions
                    ],
                }
            ],
        }
        client = cluster.broker(leader)
        if options.acks == 0:
            client.send_without_response(ApiKey.PRODUCE, body)
            for p in partitions:
                _tally(summary, p).records_written += len(pending[p])
            continue
        response = client.request(ApiKey.PRODUCE, body, wait_ms=options.timeout_ms)
        sent = {p: len(pending[p]) for p in partitions}
        _record_outcomes(response, topic.name, sent, summary)


def _record_outcomes(
    response: Any, topic_name: str, sent: dict[int, int], summary: ProduceSummary
) -> None:
    """Tally the partitions the broker accepted, and one error line for each it did not."""
    answered: set[int] = set()
    for topic in response["responses"]:
        if topic["name"] != topic_name:
            continue
        for part in topic["partition_responses"]:
            partition = int(part["index"])
            if partition not in sent:
                continue
            answered.add(partition)
            error = int(part["error_code"])
            if error != ErrorCode.NONE:
                summary.errors.append(
                    describe_kafka_error(
                        error,
                        topic=topic_name,
                        partition=partition,
                        message=_error_message(part),
                    )
                )
                continue
            tally = _tally(summary, partition)
            base_offset = int(part["base_offset"])
            written = sent[partition]
            tally.records_written += written
            if tally.first_offset is None:
                tally.first_offset = base_offset
            tally.last_offset = base_offset + written - 1
    for partition in sorted(set(sent) - answered):
        summary.errors.append(
            f"topic '{topic_name}' partition {partition}: the broker's answer left it out"
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


def _tally(summary: ProduceSummary, partition: int) -> PartitionTally:
    tally = summary.partitions.get(partition)
    if tally is None:
        tally = summary.partitions[partition] = PartitionTally(partition)
    return tally
