"""`weir queue`: a share group's dead letters, listed and redriven.

`weir queue dead-letters --group G` (alias `peek`) lists the dead letters of share
group G in its dead-letter topic (the group's `errors.deadletterqueue.topic.name`,
or `--from`), with what their headers say: the source topic, partition and offset,
the delivery count and the reason (`weir.sharecoord.dead_letter_records`).

`weir queue redrive --group G [--from DLQ] [--to TOPIC] [--max N]` writes G's dead
letters back to their source topic (the same partition) or to `--to` (partitioned by
key), none lost and none written twice, even when the command is killed midway:

- progress is the committed offset of the consumer group `weir-redrive.G` on each
  dead-letter partition (committed with OffsetCommit, no members);
- a batch (dead letters from the committed offset on) goes in three steps:
  1. an *intent* commit: the same offset, with metadata naming the end offset of
     every partition the batch will write to (taken before writing; an intent left
     by a killed run is kept: the lower ends win);
  2. the records are produced (acks=all), each with the header `weir.redrive.source`
     ("dlq-topic/partition/offset");
  3. the *progress* commit: the offset after the batch, no metadata.
- a run that finds an intent (its predecessor was killed between 1 and 3) reads
  those partitions from the recorded ends and skips the dead letters whose
  `weir.redrive.source` it finds there; its first batch reaches at least past the
  last of them, so that the progress commit passes them all at once.

Records of other groups in the topic are passed over (and the offset moves past
them). A dead letter without its record (the group's
`errors.deadletterqueue.copy.record.enable` was false) is redriven with no key and
value; `dead-letters` shows which those are.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weir.cli.cluster import NO_LEADER, Cluster, TopicMetadata
from weir.cli.consume_command import fetched_records
from weir.cli.errors import CliError, kafka_error
from weir.cli.formatting import bytes_fields, counted, render_table
from weir.cli.kafka_client import KafkaClient
from weir.cli.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, list_offsets
from weir.format.errors import ErrorCode
from weir.format.partitioner import partition_for_key
from weir.format.record_batch import InvalidBatch, Record, build_batch
from weir.sharecoord.dead_letter_records import (
    REDRIVE_SOURCE,
    DeadLetter,
    intent_metadata,
    merged_intent,
    parse_dead_letter,
    redrive_headers,
    redrive_intent,
    redrive_source,
)
from weir.wire.consumer_fetch import consumer_fetch_body
from weir.wire.protocol import ApiKey

# A crash point for the test that kills a redrive midway (tests/cli/test_queue_commands.py):
# the command SIGKILLs itself after producing its first batch, before committing it.
FAILPOINT_ENV = "WEIR_REDRIVE_FAILPOINT"
REDRIVE_GROUP_PREFIX = "weir-redrive."
DEAD_LETTER_TOPIC_CONFIG = "errors.deadletterqueue.topic.name"
RESOURCE_TYPE_GROUP = 32
# Dead letters one redrive batch holds (at least; see the module doc).
REDRIVE_BATCH_RECORDS = 200
FETCH_BYTES_MAX = 4 * 1024 * 1024
PRODUCE_TIMEOUT_MS = 30_000
COORDINATOR_WAIT_MS = 15_000
NO_GENERATION = -1
ACKS_ALL = -1


@dataclass(frozen=True)
class Letter:
    """A record of the dead-letter topic, and what its headers say (None: not a
    dead letter)."""

    partition: int
    record: Record
    letter: DeadLetter | None


# -- the dead-letter topic -----------------------------------------------------------


def dead_letter_topic(cluster: Cluster, group_id: str, given: str | None) -> TopicMetadata:
    name = given or _configured_topic(cluster, group_id)
    if not name:
        raise CliError(
            f"share group '{group_id}' has no dead-letter topic "
            f"({DEAD_LETTER_TOPIC_CONFIG} is not set); name one with --from"
        )
    return cluster.topic(name, action="read dead letters from")


def _configured_topic(cluster: Cluster, group_id: str) -> str | None:
    body = {
        "resources": [
            {
                "resource_type": RESOURCE_TYPE_GROUP,
                "resource_name": group_id,
                "configuration_keys": [DEAD_LETTER_TOPIC_CONFIG],
            }
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    response = cluster.any_broker().request(ApiKey.DESCRIBE_CONFIGS, body)
    for result in response["results"]:
        if int(result["error_code"]) != ErrorCode.NONE:
            raise kafka_error(
                int(result["error_code"]),
                action=f"read the configs of group '{group_id}'",
                message=result.get("error_message"),
            )
        for entry in result["configs"]:
            if entry["name"] == DEAD_LETTER_TOPIC_CONFIG and entry.get("value"):
                return str(entry["value"])
    return None


def _offsets(cluster: Cluster, topic: TopicMetadata, timestamp: int) -> dict[int, int]:
    found = list_offsets(cluster, topic, [p.partition for p in topic.partitions], timestamp)
    offsets = {}
    for partition, lookup in found.items():
        if lookup.offset is None:
            raise kafka_error(lookup.error_code, topic=topic.name, partition=partition)
        offsets[partition] = lookup.offset
    return offsets


def read_partition(
    cluster: Cluster, topic: TopicMetadata, partition: int, start: int, end: int
) -> Iterator[Record]:
    """The records of a partition in `[start, end)` (`end` at most its high watermark)."""
    leader = {p.partition: p.leader for p in topic.partitions}.get(partition, NO_LEADER)
    if leader == NO_LEADER:
        raise kafka_error(ErrorCode.LEADER_NOT_AVAILABLE, topic=topic.name, partition=partition)
    position = start
    while position < end:
        part = _fetch(cluster.broker(leader), topic.name, partition, position)
        error = int(part["error_code"])
        if error != ErrorCode.NONE:
            raise kafka_error(error, topic=topic.name, partition=partition, action="read")
        moved = False
        try:
            for record in fetched_records(part.get("records") or b"", position):
                if record.offset >= end:
                    return
                yield record
                position = record.offset + 1
                moved = True
        except InvalidBatch as exc:
            raise CliError(f"{topic.name}-{partition}: unreadable batch: {exc}") from None
        if not moved:
            return


def _fetch(client: KafkaClient, topic: str, partition: int, offset: int) -> Any:
    body = consumer_fetch_body(topic, {partition: offset}, bytes_max=FETCH_BYTES_MAX)
    response = client.request(ApiKey.FETCH, body)
    for answered in response["responses"]:
        for part in answered["partitions"]:
            if int(part["partition_index"]) == partition:
                return part
    raise CliError(f"{topic}-{partition}: the leader did not answer for it")


# -- dead-letters ----------------------------------------------------------------------


def list_dead_letters(
    cluster: Cluster, group_id: str, given_topic: str | None, records_max: int | None
) -> dict[str, Any]:
    topic = dead_letter_topic(cluster, group_id, given_topic)
    starts = _offsets(cluster, topic, EARLIEST_TIMESTAMP)
    ends = _offsets(cluster, topic, LATEST_TIMESTAMP)
    rows = []
    for partition in sorted(starts):
        for record in read_partition(cluster, topic, partition, starts[partition], ends[partition]):
            letter = parse_dead_letter(record.headers)
            if letter is None or letter.group_id != group_id:
                continue
            rows.append(_letter_row(partition, record, letter))
            if records_max is not None and len(rows) >= records_max:
                break
    return {"group": group_id, "topic": topic.name, "dead_letters": rows}


def _letter_row(partition: int, record: Record, letter: DeadLetter) -> dict[str, Any]:
    reason = letter.reason
    return {
        "partition": partition,
        "offset": record.offset,
        "timestamp_ms": record.timestamp_ms,
        "source_topic": letter.topic,
        "source_partition": letter.partition,
        "source_offset": letter.offset,
        "delivery_count": letter.delivery_count,
        "reason": None if reason is None else reason.value,
        "message": letter.message,
        **bytes_fields("key", record.key),
        **bytes_fields("value", record.value),
    }


def render_dead_letters(document: Mapping[str, Any]) -> str:
    rows = document["dead_letters"]
    header = (
        f"{counted(len(rows), 'dead letter')} of share group '{document['group']}' "
        f"in {document['topic']}\n"
    )
    if not rows:
        return header
    table = render_table(
        ("PARTITION", "OFFSET", "SOURCE", "DELIVERIES", "REASON", "KEY", "VALUE"),
        [
            (
                r["partition"],
                r["offset"],
                f"{r['source_topic']}-{r['source_partition']}@{r['source_offset']}",
                r["delivery_count"],
                r["reason"] or r["message"],
                r.get("key", "(binary)"),
                r.get("value", "(binary)"),
            )
            for r in rows
        ],
    )
    return header + table


# -- redrive -----------------------------------------------------------------------------


@dataclass
class RedriveProgress:
    """A dead-letter partition's redrive: where it is, what a killed run left."""

    partition: int
    position: int
    intent: dict[str, int]  # "topic/partition" -> end offset before the unfinished batch
    already: set[bytes]  # weir.redrive.source values written by the killed run


def redrive(
    cluster: Cluster,
    group_id: str,
    given_topic: str | None,
    to_topic: str | None,
    records_max: int | None,
) -> dict[str, Any]:
    topic = dead_letter_topic(cluster, group_id, given_topic)
    progress_group = REDRIVE_GROUP_PREFIX + group_id
    coordinator = cluster.group_coordinator(progress_group, wait_ms=COORDINATOR_WAIT_MS)
    starts = _offsets(cluster, topic, EARLIEST_TIMESTAMP)
    ends = _offsets(cluster, topic, LATEST_TIMESTAMP)
    committed = _committed(coordinator, progress_group, topic.name)
    redriven: dict[str, int] = {}
    skipped = 0
    recovered = 0
    for partition in sorted(starts):
        offset, metadata = committed.get(partition, (starts[partition], ""))
        progress = RedriveProgress(
            partition, max(offset, starts[partition]), redrive_intent(metadata), set()
        )
        if progress.intent:
            progress.already = _written_sources(cluster, topic.name, partition, progress.intent)
        while records_max is None or sum(redriven.values()) < records_max:
            room = None if records_max is None else records_max - sum(redriven.values())
            batch = _next_batch(cluster, topic, progress, ends[partition], room)
            if not batch:
                break
            end = batch[-1].record.offset + 1
            letters = [b for b in batch if b.letter is not None and b.letter.group_id == group_id]
            skipped += len(batch) - len(letters)
            sends = _planned(cluster, topic.name, letters, to_topic)
            fresh = [s for s in sends if s.source not in progress.already]
            recovered += len(sends) - len(fresh)
            targets = sorted({(s.topic, s.partition) for s in fresh})
            intent = merged_intent(progress.intent, _target_ends(cluster, targets))
            _commit(coordinator, progress_group, topic.name, partition, progress.position, intent)
            _produce(cluster, fresh)
            if os.environ.get(FAILPOINT_ENV) == "after-produce":
                os.kill(os.getpid(), signal.SIGKILL)
            _commit(coordinator, progress_group, topic.name, partition, end, {})
            for send in fresh:
                redriven[send.topic] = redriven.get(send.topic, 0) + 1
            progress.position, progress.intent, progress.already = end, {}, set()
    return {
        "group": group_id,
        "topic": topic.name,
        "progress_group": progress_group,
        "redriven": sum(redriven.values()),
        "by_topic": redriven,
        "recovered": recovered,
        "other_records_passed": skipped,
    }


def render_redriven(document: Mapping[str, Any]) -> str:
    lines = [
        f"redrove {counted(document['redriven'], 'dead letter')} of share group "
        f"'{document['group']}' from {document['topic']}"
    ]
    for name, count in sorted(document["by_topic"].items()):
        lines.append(f"  {name}: {count}")
    if document["recovered"]:
        lines.append(
            f"{counted(document['recovered'], 'dead letter')} already written by an "
            "interrupted redrive were not written again"
        )
    return "\n".join(lines) + "\n"


def _committed(coordinator: KafkaClient, group: str, topic: str) -> dict[int, tuple[int, str]]:
    response = coordinator.request(
        ApiKey.OFFSET_FETCH,
        {"group_id": group, "topics": None},
    )
    error = int(response.get("error_code", ErrorCode.NONE))
    if error != ErrorCode.NONE:
        raise kafka_error(error, action=f"read the committed offsets of group '{group}'")
    found = {}
    for answered in response["topics"]:
        if answered["name"] != topic:
            continue
        for part in answered["partitions"]:
            if int(part["committed_offset"]) >= 0:
                found[int(part["partition_index"])] = (
                    int(part["committed_offset"]),
                    part.get("metadata") or "",
                )
    return found


def _written_sources(
    cluster: Cluster, dlq_topic: str, partition: int, intent: Mapping[str, int]
) -> set[bytes]:
    """The redrive sources of `dlq_topic`-`partition` found past the intent's ends."""
    prefix = f"{dlq_topic}/{partition}/".encode()
    found: set[bytes] = set()
    for name, end in intent.items():
        target_name, _, index_text = name.rpartition("/")
        target = cluster.topic(target_name, action="check an interrupted redrive of")
        index = int(index_text)
        high = _offsets(cluster, target, LATEST_TIMESTAMP)[index]
        for record in read_partition(cluster, target, index, end, high):
            for header, value in record.headers:
                if header == REDRIVE_SOURCE and value is not None and value.startswith(prefix):
                    found.add(value)
    return found


def _next_batch(
    cluster: Cluster,
    topic: TopicMetadata,
    progress: RedriveProgress,
    end: int,
    room: int | None,
) -> list[Letter]:
    """The next records from the position: REDRIVE_BATCH_RECORDS of them (fewer
    with --max), and at least up to the last one an interrupted run wrote."""
    last_written = max((int(source.rsplit(b"/", 1)[1]) for source in progress.already), default=-1)
    wanted = REDRIVE_BATCH_RECORDS if room is None else min(room, REDRIVE_BATCH_RECORDS)
    batch: list[Letter] = []
    letters = 0
    for record in read_partition(cluster, topic, progress.partition, progress.position, end):
        letter = parse_dead_letter(record.headers)
        batch.append(Letter(progress.partition, record, letter))
        letters += letter is not None
        if letters >= wanted and record.offset >= last_written:
            break
    return batch


@dataclass(frozen=True)
class Send:
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    source: bytes


def _planned(
    cluster: Cluster, dlq_topic: str, letters: Sequence[Letter], to_topic: str | None
) -> list[Send]:
    sends = []
    topics: dict[str, TopicMetadata] = {}
    for item in letters:
        letter = item.letter
        assert letter is not None
        name = to_topic or letter.topic
        if name not in topics:
            topics[name] = cluster.topic(name, action="redrive to")
        count = len(topics[name].partitions)
        if name == letter.topic and letter.partition < count:
            partition = letter.partition
        elif item.record.key is not None:
            partition = partition_for_key(item.record.key, count)
        else:
            partition = item.record.offset % count
        source = redrive_source(dlq_topic, item.partition, item.record.offset)
        headers = redrive_headers(list(item.record.headers), source)
        sends.append(Send(name, partition, item.record.key, item.record.value, headers, source))
    return sends


def _target_ends(cluster: Cluster, targets: Sequence[tuple[str, int]]) -> dict[str, int]:
    ends = {}
    for name in sorted({t for t, _ in targets}):
        offsets = _offsets(cluster, cluster.topic(name, action="redrive to"), LATEST_TIMESTAMP)
        for target_name, partition in targets:
            if target_name == name:
                ends[f"{name}/{partition}"] = offsets[partition]
    return ends


def _commit(
    coordinator: KafkaClient,
    group: str,
    topic: str,
    partition: int,
    offset: int,
    intent: Mapping[str, int],
) -> None:
    metadata = intent_metadata(intent)
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": NO_GENERATION,
        "member_id": "",
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "committed_offset": offset,
                        "committed_metadata": metadata,
                    }
                ],
            }
        ],
    }
    response = coordinator.request(ApiKey.OFFSET_COMMIT, body)
    for answered in response["topics"]:
        for part in answered["partitions"]:
            error = int(part["error_code"])
            if error != ErrorCode.NONE:
                raise kafka_error(
                    error,
                    topic=topic,
                    partition=partition,
                    action=f"commit the progress of {group} on",
                )


def _produce(cluster: Cluster, sends: Sequence[Send]) -> None:
    """One batch per target partition, acks=all; any error stops the redrive (the
    next run finds what was written by its intent)."""
    by_target: dict[tuple[str, int], list[Send]] = {}
    for send in sends:
        by_target.setdefault((send.topic, send.partition), []).append(send)
    now_ms = int(time.time() * 1000)
    for (name, partition), group in sorted(by_target.items()):
        topic = cluster.topic(name, action="redrive to")
        leader = {p.partition: p.leader for p in topic.partitions}.get(partition, NO_LEADER)
        if leader == NO_LEADER:
            raise kafka_error(ErrorCode.LEADER_NOT_AVAILABLE, topic=name, partition=partition)
        records = build_batch([(s.key, s.value, s.headers) for s in group], timestamp_ms=now_ms)
        body = {
            "transactional_id": None,
            "acks": ACKS_ALL,
            "timeout_ms": PRODUCE_TIMEOUT_MS,
            "topic_data": [
                {"name": name, "partition_data": [{"index": partition, "records": records}]}
            ],
        }
        response = cluster.broker(leader).request(ApiKey.PRODUCE, body, wait_ms=PRODUCE_TIMEOUT_MS)
        for answered in response["responses"]:
            for part in answered["partition_responses"]:
                error = int(part["error_code"])
                if error != ErrorCode.NONE:
                    raise kafka_error(error, topic=name, partition=partition, action="redrive to")
