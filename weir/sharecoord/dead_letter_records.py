"""A dead letter's record, as Kafka 4.4 writes it (KIP-1191), and Weir's redrive header.

When a share group has a dead-letter topic (`errors.deadletterqueue.topic.name`),
every record it archives by REJECT or at the delivery count limit (and, Weir's, by its
TTL) is written there as one record (Kafka 4.4's `ShareGroupDLQStateManager`, read in
its bytecode and checked against a running 4.4 broker):

- partition: the source partition modulo the dead-letter topic's partition count;
- timestamp: the broker's clock when written (CreateTime);
- key and value: the original record's when the group's
  `errors.deadletterqueue.copy.record.enable` is true (default false), else none;
  the original record's headers are never copied;
- headers, in this order, each UTF-8 text (numbers in decimal):

| header | value |
|---|---|
| `__dlq.errors.topic` | the source topic's name |
| `__dlq.errors.partition` | the source partition |
| `__dlq.errors.offset` | the record's offset in it |
| `__dlq.errors.group` | the share group |
| `__dlq.errors.delivery.count` | its delivery count when archived |
| `__dlq.errors.message` | the reason: `REASON_MESSAGES` |

Weir adds nothing to a dead letter (the reason is Kafka's `__dlq.errors.message`;
`reason_of` maps it back). `weir queue redrive` writes a record back with the dead
letter's key, value and headers other than `__dlq.errors.*`, plus
`weir.redrive.source` ("dlq-topic/partition/offset", where it came from), by which a
redrive that was killed mid-batch recognises what it already wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from weir.sharecoord.share_partition import ArchiveReason

__all__ = [
    "DEAD_LETTER_HEADER_PREFIX",
    "DLQ_DELIVERY_COUNT",
    "DLQ_GROUP",
    "DLQ_MESSAGE",
    "DLQ_OFFSET",
    "DLQ_PARTITION",
    "DLQ_TOPIC",
    "REASON_MESSAGES",
    "REDRIVE_SOURCE",
    "DeadLetter",
    "dead_letter_headers",
    "dead_letter_partition",
    "intent_metadata",
    "merged_intent",
    "parse_dead_letter",
    "reason_of",
    "redrive_headers",
    "redrive_intent",
    "redrive_source",
    "written_offsets",
]

DEAD_LETTER_HEADER_PREFIX = "__dlq.errors."
DLQ_TOPIC = "__dlq.errors.topic"
DLQ_PARTITION = "__dlq.errors.partition"
DLQ_OFFSET = "__dlq.errors.offset"
DLQ_GROUP = "__dlq.errors.group"
DLQ_DELIVERY_COUNT = "__dlq.errors.delivery.count"
DLQ_MESSAGE = "__dlq.errors.message"
REDRIVE_SOURCE = "weir.redrive.source"

# Kafka 4.4's ShareGroupDLQManager.CLIENT_REJECT and DELIVERY_COUNT_EXCEEDED messages
# ("Offset rejected by client.", "Offset delivery count exceeded the threshold."), and
# Weir's for a record archived by its TTL (Kafka has no expiry).
REASON_MESSAGES = {
    ArchiveReason.REJECTED: "Offset rejected by client.",
    ArchiveReason.DELIVERY_LIMIT: "Offset delivery count exceeded the threshold.",
    ArchiveReason.EXPIRED: "Offset expired before delivery.",
}

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class DeadLetter:
    """What a dead letter's headers say of the record it stands for."""

    group_id: str
    topic: str
    partition: int
    offset: int
    delivery_count: int | None
    message: str | None

    @property
    def reason(self) -> ArchiveReason | None:
        return reason_of(self.message)


def dead_letter_partition(source_partition: int, partition_count: int) -> int:
    """Where Kafka 4.4 writes the dead letters of a source partition."""
    assert partition_count > 0, partition_count
    return source_partition % partition_count


def dead_letter_headers(
    group_id: str,
    topic: str,
    partition: int,
    offset: int,
    delivery_count: int,
    reason: ArchiveReason,
) -> Headers:
    """A dead letter's headers, Kafka 4.4's names, order and encodings."""
    return [
        (DLQ_TOPIC, topic.encode()),
        (DLQ_PARTITION, str(partition).encode()),
        (DLQ_OFFSET, str(offset).encode()),
        (DLQ_GROUP, group_id.encode()),
        (DLQ_DELIVERY_COUNT, str(delivery_count).encode()),
        (DLQ_MESSAGE, REASON_MESSAGES[reason].encode()),
    ]


def reason_of(message: str | None) -> ArchiveReason | None:
    for reason, text in REASON_MESSAGES.items():
        if message == text:
            return reason
    return None


def parse_dead_letter(headers: Iterable[tuple[str, bytes | None]]) -> DeadLetter | None:
    """The dead letter these headers describe; None when they are not a dead
    letter's (a header missing or unreadable: another producer's record)."""
    found: dict[str, str] = {}
    for name, value in headers:
        if name.startswith(DEAD_LETTER_HEADER_PREFIX) and value is not None:
            try:
                found.setdefault(name, value.decode())
            except UnicodeDecodeError:
                return None
    try:
        partition = int(found[DLQ_PARTITION])
        offset = int(found[DLQ_OFFSET])
        count_text = found.get(DLQ_DELIVERY_COUNT)
        delivery_count = int(count_text) if count_text is not None else None
        return DeadLetter(
            group_id=found[DLQ_GROUP],
            topic=found[DLQ_TOPIC],
            partition=partition,
            offset=offset,
            delivery_count=delivery_count,
            message=found.get(DLQ_MESSAGE),
        )
    except (KeyError, ValueError):
        return None


def written_offsets(
    letters: Iterable[DeadLetter | None], group_id: str, topic: str, partition: int
) -> set[int]:
    """The source offsets of (group, topic, partition) among `letters`."""
    return {
        letter.offset
        for letter in letters
        if letter is not None
        and letter.group_id == group_id
        and letter.topic == topic
        and letter.partition == partition
    }


def redrive_source(dlq_topic: str, partition: int, offset: int) -> bytes:
    return f"{dlq_topic}/{partition}/{offset}".encode()


def redrive_headers(headers: Sequence[tuple[str, bytes | None]], source: bytes) -> Headers:
    """The headers a redriven record gets: the dead letter's own, without Kafka's
    `__dlq.errors.*` ones or an earlier redrive's mark, plus where it came from."""
    kept = [
        (name, value)
        for name, value in headers
        if not name.startswith(DEAD_LETTER_HEADER_PREFIX) and name != REDRIVE_SOURCE
    ]
    return [*kept, (REDRIVE_SOURCE, source)]


# A redrive's progress is a committed offset of the group `weir-redrive.G` on each
# dead-letter partition; before writing a batch it commits the same offset with this
# metadata naming the end offset of every partition it will write to ("topic/partition"
# -> end offset), so a redrive killed mid-batch is found and finished by the next one
# (`weir queue redrive`, and POST .../share-groups/{g}/redrive over HTTP).


def redrive_intent(metadata: str) -> dict[str, int]:
    """The intent a committed offset's metadata records ({} when none or unreadable)."""
    try:
        document = json.loads(metadata) if metadata else {}
        return {str(k): int(v) for k, v in document.get("redrive_intent", {}).items()}
    except (ValueError, AttributeError, TypeError):
        return {}


def intent_metadata(intent: Mapping[str, int]) -> str:
    return json.dumps({"redrive_intent": dict(intent)}) if intent else ""


def merged_intent(old: Mapping[str, int], new: Mapping[str, int]) -> dict[str, int]:
    """A new intent, keeping what an interrupted run recorded (the lower ends win)."""
    merged = dict(new)
    for name, end in old.items():
        merged[name] = min(end, merged.get(name, end))
    return merged
