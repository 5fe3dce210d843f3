"""`POST /v3/clusters/{c}/share-groups/{g}/redrive`: a share group's dead letters
written back to where they came from, as `weir queue redrive` does it (same
progress group, same intent commits, so the two take over from each other), each
step a Kafka request as the HTTP caller: it needs READ on the dead-letter topic,
WRITE on the source topics and READ on the group `weir-redrive.G`.

- the dead-letter topic is the group's `errors.deadletterqueue.topic.name`, or
  the body's `from_topic`;
- per dead-letter partition, progress is the committed offset of `weir-redrive.G`;
  a batch is an *intent* commit (the same offset, with the end offsets of the
  partitions it will write to), the records produced (acks=all) to the source
  topic's same partition with the header `weir.redrive.source`, then the
  *progress* commit; a run that finds an intent skips what its predecessor
  already wrote (those sources found past the recorded ends);
- at most `max_records` (default and bound `REDRIVE_RECORDS_MAX`) per call: the
  answer says how many were redriven and `records_left`, the records of the
  dead-letter topic past the redrive's position (any group's), so a client calls
  again until none are left.

Unlike the CLI, redriving to another topic (`--to`) is not offered: placing keyed
records there needs Kafka's murmur2 partitioner, which lives with the CLI.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from starlette.responses import Response

from weir.broker.http.rest_admin_base import (
    AdminCall,
    Endpoint,
    RestError,
    bad_request,
    bounded_int,
    check_kafka,
    json_response,
    not_found,
    resource,
    resource_name,
    retry_later,
    topic_name,
)
from weir.broker.http.rest_admin_lookups import KEY_TYPE_GROUP, coordinator
from weir.broker.http.rest_admin_topics import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    LIST_OFFSETS_VERSION,
    NO_LEADER,
    READ_UNCOMMITTED,
    metadata,
)
from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    BATCH_HEADER_SIZE,
    InvalidBatch,
    Record,
    build_batch,
    decode_records,
    parse_batch_header,
)
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

REDRIVE_GROUP_PREFIX = "weir-redrive."
DEAD_LETTER_TOPIC_CONFIG = "errors.deadletterqueue.topic.name"
RESOURCE_TYPE_GROUP = 32
DESCRIBE_CONFIGS_VERSION = 4
FETCH_VERSION = 12
PRODUCE_VERSION = 9
OFFSET_COMMIT_VERSION = 9
OFFSET_FETCH_VERSION = 9
# Dead letters one call redrives at most (and by default).
REDRIVE_RECORDS_MAX = 10_000
# Dead letters one batch (intent, produce, progress) holds at least.
REDRIVE_BATCH_RECORDS = 200
FETCH_BYTES_MAX = 4 * 1024 * 1024
UNCOMPRESSED_BYTES_MAX = 64 * 1024 * 1024
PRODUCE_TIMEOUT_MS = 30_000
ACKS_ALL = -1
NO_GENERATION = -1


@dataclass(frozen=True)
class Partitions:
    """A topic's partitions: their leaders."""

    name: str
    leaders: dict[int, int]


@dataclass
class Progress:
    partition: int
    position: int
    intent: dict[str, int]
    already: set[bytes] = field(default_factory=set)


@dataclass(frozen=True)
class Send:
    topic: str
    partition: int
    record: Record
    source: bytes


class Redrive:
    """One call's redrive of group `group_id`'s dead letters in `dlq`."""

    def __init__(self, call: AdminCall, group_id: str, records_max: int) -> None:
        self.call = call
        self.group_id = group_id
        self.progress_group = REDRIVE_GROUP_PREFIX + group_id
        self.records_max = records_max
        self.redriven: dict[str, int] = {}
        self.recovered = 0
        self.passed = 0
        self._topics: dict[str, Partitions] = {}

    @property
    def total(self) -> int:
        return sum(self.redriven.values())

    async def topic(self, name: str) -> Partitions:
        if name not in self._topics:
            response = await metadata(self.call, [name])
            described = response.topics[0]
            if described.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise not_found(f"no topic {name!r}")
            check_kafka(described.error_code, None, f"describe topic {name!r}")
            leaders = {p.partition_index: p.leader_id for p in described.partitions}
            self._topics[name] = Partitions(name, leaders)
        return self._topics[name]

    def leader(self, topic: Partitions, partition: int) -> int:
        leader = topic.leaders.get(partition, NO_LEADER)
        if leader == NO_LEADER:
            raise retry_later(f"{topic.name}-{partition} has no leader; retry")
        return leader

    async def offsets(self, topic: Partitions, timestamp: int) -> dict[int, int]:
        found = {}
        for partition in sorted(topic.leaders):
            response = await self.call.send(
                ApiKey.LIST_OFFSETS,
                LIST_OFFSETS_VERSION,
                {
                    "replica_id": -1,
                    "isolation_level": READ_UNCOMMITTED,
                    "topics": [
                        {
                            "name": topic.name,
                            "partitions": [
                                {
                                    "partition_index": partition,
                                    "current_leader_epoch": -1,
                                    "timestamp": timestamp,
                                }
                            ],
                        }
                    ],
                },
                node_id=self.leader(topic, partition),
            )
            part = response.topics[0].partitions[0]
            check_kafka(part.error_code, None, f"read the offsets of {topic.name}-{partition}")
            found[partition] = part.offset
        return found

    async def fetch(self, topic: Partitions, partition: int, offset: int) -> list[Record]:
        response = await self.call.send(
            ApiKey.FETCH,
            FETCH_VERSION,
            consumer_fetch_body(topic.name, {partition: offset}, bytes_max=FETCH_BYTES_MAX),
            node_id=self.leader(topic, partition),
        )
        part = response.responses[0].partitions[0]
        check_kafka(part.error_code, None, f"read {topic.name}-{partition}")
        try:
            return [r for r in _whole_batch_records(part.records or b"") if r.offset >= offset]
        except InvalidBatch as exc:
            raise RestError(500, f"{topic.name}-{partition}: unreadable batch: {exc}") from None

    async def read(
        self, topic: Partitions, partition: int, start: int, end: int
    ) -> list[tuple[int, Record]]:
        """The records of a partition in [start, end), fetched until end or no progress."""
        records: list[tuple[int, Record]] = []
        position = start
        while position < end:
            fetched = [r for r in await self.fetch(topic, partition, position) if r.offset < end]
            if not fetched:
                break
            records += [(partition, r) for r in fetched]
            position = fetched[-1].offset + 1
        return records

    # -- the progress group ------------------------------------------------------------------

    async def committed(self, coordinator_id: int, dlq: str) -> dict[int, tuple[int, str]]:
        response = await self.call.send(
            ApiKey.OFFSET_FETCH,
            OFFSET_FETCH_VERSION,
            {
                "groups": [
                    {
                        "group_id": self.progress_group,
                        "member_id": None,
                        "member_epoch": -1,
                        "topics": None,
                    }
                ],
                "require_stable": False,
            },
            node_id=coordinator_id,
        )
        fetched = response.groups[0]
        check_kafka(fetched.error_code, None, f"read the progress of {self.progress_group!r}")
        return {
            part.partition_index: (part.committed_offset, part.metadata or "")
            for topic in fetched.topics
            if topic.name == dlq
            for part in topic.partitions
            if part.error_code == ErrorCode.NONE and part.committed_offset >= 0
        }

    async def commit(
        self, coordinator_id: int, dlq: str, partition: int, offset: int, intent: dict[str, int]
    ) -> None:
        response = await self.call.send(
            ApiKey.OFFSET_COMMIT,
            OFFSET_COMMIT_VERSION,
            {
                "group_id": self.progress_group,
                "generation_id_or_member_epoch": NO_GENERATION,
                "member_id": "",
                "topics": [
                    {
                        "name": dlq,
                        "partitions": [
                            {
                                "partition_index": partition,
                                "committed_offset": offset,
                                "committed_metadata": intent_metadata(intent),
                            }
                        ],
                    }
                ],
            },
            node_id=coordinator_id,
        )
        for topic in response.topics:
            for part in topic.partitions:
                check_kafka(
                    part.error_code, None, f"commit the progress of {self.progress_group!r}"
                )

    # -- the batches ------------------------------------------------------------------------------

    async def written_sources(self, dlq: str, partition: int, intent: dict[str, int]) -> set[bytes]:
        """The sources of `dlq`-`partition` an interrupted run wrote past its intent's ends."""
        prefix = f"{dlq}/{partition}/".encode()
        found: set[bytes] = set()
        for name, end in intent.items():
            target_name, _, index_text = name.rpartition("/")
            target = await self.topic(target_name)
            index = int(index_text)
            high = (await self.offsets(target, LATEST_TIMESTAMP)).get(index, end)
            for _, record in await self.read(target, index, end, high):
                for header, value in record.headers:
                    if header == REDRIVE_SOURCE and value is not None and value.startswith(prefix):
                        found.add(value)
        return found

    async def next_batch(
        self, dlq: Partitions, progress: Progress, end: int
    ) -> list[tuple[Record, DeadLetter | None]]:
        last_written = max((int(s.rsplit(b"/", 1)[1]) for s in progress.already), default=-1)
        wanted = min(self.records_max - self.total, REDRIVE_BATCH_RECORDS)
        batch: list[tuple[Record, DeadLetter | None]] = []
        letters = 0
        position = progress.position
        while position < end:
            fetched = [
                r for r in await self.fetch(dlq, progress.partition, position) if r.offset < end
            ]
            if not fetched:
                break
            for record in fetched:
                letter = parse_dead_letter(record.headers)
                batch.append((record, letter))
                letters += letter is not None
                if letters >= wanted and record.offset >= last_written:
                    return batch
            position = fetched[-1].offset + 1
        return batch

    async def planned(
        self, dlq: str, partition: int, letters: Sequence[tuple[Record, DeadLetter]]
    ) -> list[Send]:
        sends = []
        for record, letter in letters:
            target = await self.topic(letter.topic)
            if letter.partition not in target.leaders:
                raise RestError(
                    409,
                    f"dead letter {dlq}-{partition}@{record.offset} comes from "
                    f"{letter.topic}-{letter.partition}, which no longer exists",
                )
            source = redrive_source(dlq, partition, record.offset)
            sends.append(Send(letter.topic, letter.partition, record, source))
        return sends

    async def target_ends(self, targets: Sequence[tuple[str, int]]) -> dict[str, int]:
        ends = {}
        for name in sorted({t for t, _ in targets}):
            offsets = await self.offsets(await self.topic(name), LATEST_TIMESTAMP)
            for target_name, partition in targets:
                if target_name == name:
                    ends[f"{name}/{partition}"] = offsets[partition]
        return ends

    async def produce(self, sends: Sequence[Send]) -> None:
        by_target: dict[tuple[str, int], list[Send]] = {}
        for send in sends:
            by_target.setdefault((send.topic, send.partition), []).append(send)
        for (name, partition), group in sorted(by_target.items()):
            records = build_batch(
                [
                    (s.record.key, s.record.value, redrive_headers(s.record.headers, s.source))
                    for s in group
                ]
            )
            response = await self.call.send(
                ApiKey.PRODUCE,
                PRODUCE_VERSION,
                {
                    "transactional_id": None,
                    "acks": ACKS_ALL,
                    "timeout_ms": PRODUCE_TIMEOUT_MS,
                    "topic_data": [
                        {"name": name, "partition_data": [{"index": partition, "records": records}]}
                    ],
                },
                node_id=self.leader(await self.topic(name), partition),
                wait_ms=PRODUCE_TIMEOUT_MS,
            )
            for answered in response.responses:
                for part in answered.partition_responses:
                    check_kafka(
                        part.error_code, part.error_message, f"redrive to {name}-{partition}"
                    )

    async def partition(
        self, coordinator_id: int, dlq: Partitions, progress: Progress, end: int
    ) -> None:
        if progress.intent:
            progress.already = await self.written_sources(
                dlq.name, progress.partition, progress.intent
            )
        while self.total < self.records_max:
            # Each batch may take a produce's timeout: the call outlives the listener's.
            self.call.extend_deadline(PRODUCE_TIMEOUT_MS / 1000)
            batch = await self.next_batch(dlq, progress, end)
            if not batch:
                return
            batch_end = batch[-1][0].offset + 1
            letters = [
                (record, letter)
                for record, letter in batch
                if letter is not None and letter.group_id == self.group_id
            ]
            self.passed += len(batch) - len(letters)
            sends = await self.planned(dlq.name, progress.partition, letters)
            fresh = [s for s in sends if s.source not in progress.already]
            self.recovered += len(sends) - len(fresh)
            targets = sorted({(s.topic, s.partition) for s in fresh})
            intent = merged_intent(progress.intent, await self.target_ends(targets))
            await self.commit(
                coordinator_id, dlq.name, progress.partition, progress.position, intent
            )
            await self.produce(fresh)
            await self.commit(coordinator_id, dlq.name, progress.partition, batch_end, {})
            for send in fresh:
                self.redriven[send.topic] = self.redriven.get(send.topic, 0) + 1
            progress.position, progress.intent, progress.already = batch_end, {}, set()


def _whole_batch_records(records: bytes | memoryview) -> Iterator[Record]:
    """The data records of the whole batches in a Fetch answer (a broker may cut the
    last one at the byte limit)."""
    view = memoryview(records)
    end = 0
    while len(view) - end >= BATCH_HEADER_SIZE:
        size = parse_batch_header(view, end).size
        if end + size > len(view):
            break
        end += size
    return decode_records(view[:end], uncompressed_bytes_max=UNCOMPRESSED_BYTES_MAX)


async def _dead_letter_topic(call: AdminCall, group_id: str) -> str:
    response = await call.send(
        ApiKey.DESCRIBE_CONFIGS,
        DESCRIBE_CONFIGS_VERSION,
        {
            "resources": [
                {
                    "resource_type": RESOURCE_TYPE_GROUP,
                    "resource_name": group_id,
                    "configuration_keys": [DEAD_LETTER_TOPIC_CONFIG],
                }
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    result = response.results[0]
    check_kafka(result.error_code, result.error_message, f"read the configs of {group_id!r}")
    for entry in result.configs:
        if entry.name == DEAD_LETTER_TOPIC_CONFIG and entry.value:
            return str(entry.value)
    raise RestError(
        409,
        f"share group {group_id!r} has no dead-letter topic ({DEAD_LETTER_TOPIC_CONFIG} "
        "is not set); name one with from_topic",
    )


async def redrive_share_group(call: AdminCall) -> Response:
    group_id = resource_name(call.path("share_group_id"), "share_group_id")
    has_body = call.request.headers.get("content-length") not in (None, "0")
    document = await call.json_body() if has_body else {}
    given = document.get("from_topic")
    records_max = document.get("max_records", REDRIVE_RECORDS_MAX)
    records_max = bounded_int(records_max, "max_records", 1, REDRIVE_RECORDS_MAX)
    if given is not None and not isinstance(given, str):
        raise bad_request("from_topic must be a topic name")
    dlq_name = topic_name(given, "from_topic") if given is not None else None
    redrive = Redrive(call, group_id, records_max)
    dlq = await redrive.topic(dlq_name or await _dead_letter_topic(call, group_id))
    coordinator_id = await coordinator(
        call, redrive.progress_group, KEY_TYPE_GROUP, f"group {redrive.progress_group!r}"
    )
    starts = await redrive.offsets(dlq, EARLIEST_TIMESTAMP)
    ends = await redrive.offsets(dlq, LATEST_TIMESTAMP)
    committed = await redrive.committed(coordinator_id, dlq.name)
    positions = {}
    for partition in sorted(starts):
        offset, metadata_text = committed.get(partition, (starts[partition], ""))
        progress = Progress(
            partition, max(offset, starts[partition]), redrive_intent(metadata_text)
        )
        await redrive.partition(coordinator_id, dlq, progress, ends[partition])
        positions[partition] = progress.position
    left = sum(max(0, ends[p] - positions[p]) for p in positions)
    return json_response(
        resource(
            "WeirShareGroupRedrive",
            call.url("share-groups", group_id, "redrive"),
            cluster_id=call.cluster_id,
            share_group_id=group_id,
            dead_letter_topic=dlq.name,
            progress_group=redrive.progress_group,
            redriven=redrive.total,
            by_topic=redrive.redriven,
            recovered=redrive.recovered,
            other_records_passed=redrive.passed,
            records_left=left,
        )
    )


ENDPOINT = Endpoint(
    "POST",
    "/v3/clusters/{cluster_id}/share-groups/{share_group_id}/redrive",
    redrive_share_group,
    "Write a share group's dead letters back to their source partitions",
    body={
        "type": "object",
        "properties": {
            "from_topic": {"type": "string"},
            "max_records": {"type": "integer", "minimum": 1, "maximum": REDRIVE_RECORDS_MAX},
        },
    },
    body_required=False,
    tag="queues",
)


async def configured_dead_letter_topic(call: AdminCall, group_id: str) -> str | None:
    """The group's dead-letter topic, None when it has none or the caller may not
    read the group's configs (DESCRIBE_CONFIGS on the group)."""
    try:
        return await _dead_letter_topic(call, group_id)
    except RestError as error:
        if error.status in (403, 409):
            return None
        raise
