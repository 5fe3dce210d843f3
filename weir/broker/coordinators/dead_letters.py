"""Dead letters of share groups (KIP-1191, as Kafka 4.4 has it), written exactly once.

A share group with `errors.deadletterqueue.topic.name` set gets, in that topic, one
record per record it archived by REJECT, at the delivery count limit or (Weir's) by
its TTL (the record's format: `weir.sharecoord.dead_letter_records`). Kafka 4.4 writes
them best effort (a failed write is logged and the record archived anyway; a crash
after the write and before the record is stored ARCHIVED writes it again). Weir writes
each dead letter exactly once, across a broker kill at any point.

The design: the share state carries the intent, and the dead-letter partition is
read back after a crash.

1. Archiving: the share partition puts such a record in ARCHIVING (Kafka 4.4's state
   3), not ARCHIVED (`SharePartition`, rule 10). ARCHIVING is not final: the start
   offset stops at it, and it is stored in `__share_group_state` with the rest of
   the state. A record that reached ARCHIVING is thus never delivered again and
   never forgotten: after any crash it is still ARCHIVING.
2. The writer (`DeadLetters.run`, one task) takes the share partitions with
   ARCHIVING records, one at a time, in rounds. A round:
   a. checks the group's dead-letter topic as Kafka does (`dead_letter_topic_refusal`:
      configured, not internal, has the broker's prefix; exists with
      `errors.deadletterqueue.group.enable=true`, or is created with it when
      `errors.deadletterqueue.auto.create.topics.enable`). A refused topic is
      Kafka's outcome: the records are archived without dead letters (logged);
   b. finds the dead-letter partition (source partition modulo its partition
      count) and its leader, here or another broker; without a leader, or when it
      refuses a step, the round is retried later;
   c. reads that partition from the share partition's *dead-letter mark* (stored in
      the share state, below) to its end, once that end is durable (a share partition
      just taken over with a mark first waits `TAKEOVER_SETTLE_S`: its previous
      leader, which learns of the move a moment late, may still be appending), and
      finishes (ARCHIVED, no new write) every ARCHIVING offset that already has a
      dead letter there (headers group, topic, partition, offset): the dead letters
      of a round that was cut short by a crash;
   d. sets the mark to the partition's end and stores the state: durable before any
      dead letter of the round is appended, the mark is at or below all of them;
   e. reads the archived records from the source log (key and value, when copied),
      checks that it still leads the share partition, appends the dead letters,
      waits until they are durable (in a cluster: committed);
   f. finishes them (ARCHIVED), clears the mark when nothing else is ARCHIVING (else
      moves it to the end), stores the state, wakes parked share fetches.
   A crash before (d) is durable: no dead letter of the round exists beyond the old
   mark... nor below it, so (c) finds none and they are written once. A crash
   between (e) and (f): (c) finds them from the mark and does not write them again.
   A crash after (f): they are ARCHIVED. Hence none lost, none doubled.
3. `on_archived` (called by `SharePartitions` when records are archived) only wakes
   the writer; a share partition loaded with ARCHIVING records wakes it too. A round
   that failed is retried after `RETRY_INTERVAL_S`.

The dead-letter partition is led here or by another broker of the cluster; the round
reads, marks and appends through `dead_letter_destinations` (a Produce with acks=all
and Fetches to its leader when it is another broker; the one gap of that path is
written there). Limits: a record below the source log's start when its round runs
(retention, DeleteRecords) gets a dead letter with headers only, as in Kafka. A group
whose dead-letter topic changes while records are ARCHIVING may get, once, a dead
letter in both topics (the mark belongs to the topic it was taken in).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator, Sequence

import trio

from weir.broker.broker import Broker
from weir.broker.coordinators.dead_letter_destinations import (
    Destination,
    LocalDestination,
    RemoteDestination,
    RemoteWriter,
    RoundDeferredError,
    read_log,
)
from weir.broker.coordinators.share_configs import (
    ShareGroupConfig,
    dead_letter_refusal,
    share_broker_limits,
)
from weir.broker.coordinators.share_partitions import ShareLeader, SharePartitions
from weir.broker.coordinators.share_state_service import ShareKey, ShareStateUnavailableError
from weir.controller.controller import ControllerError
from weir.controller.metadata import TopicRecord
from weir.format.errors import ErrorCode
from weir.format.record_batch import Record, RecordInput
from weir.log.config import LogConfig
from weir.sharecoord.dead_letter_records import (
    dead_letter_headers,
    dead_letter_partition,
    parse_dead_letter,
    written_offsets,
)
from weir.sharecoord.share_partition import Archived
from weir.sharecoord.share_state import NO_DEAD_LETTER_MARK, RecordState

log = logging.getLogger(__name__)

# A round that could not finish is tried again after this.
RETRY_INTERVAL_S = 0.5
# A share partition taken over with a round in flight waits this before reading the
# dead-letter partition (`_wait_for_previous_writer`).
TAKEOVER_SETTLE_S = 2.0
# Dead letters one round writes at most (the rest wait for the next round).
ROUND_RECORDS_MAX = 1_000
# The configs of a dead-letter topic the broker creates (Kafka 4.4's).
CREATED_TOPIC_CONFIGS = {
    "errors.deadletterqueue.group.enable": "true",
    "message.timestamp.type": "CreateTime",
}


# A crash point for the tests that kill the broker mid-round
# (compat_tests/test_dead_letters.py): the broker SIGKILLs itself at the named step,
# "after-mark" (d) or "after-append" (e, once the dead letters are durable).
FAILPOINT_ENV = "WEIR_DEAD_LETTERS_FAILPOINT"


class DeadLetters:
    def __init__(self, broker: Broker, partitions: SharePartitions) -> None:
        self.broker = broker
        self.partitions = partitions
        # For dead-letter partitions led by other brokers: the connections, this
        # broker's producer id and the appends not answered yet.
        self.remote = RemoteWriter(broker)
        self._due: set[ShareKey] = set()
        self._wakeup = trio.Event()
        # Why a round was last deferred, per key (logged once per reason).
        self._deferred: dict[ShareKey, str] = {}
        # When each share partition with a dead-letter mark was first seen here.
        self._taken_over: dict[ShareKey, tuple[ShareLeader, float]] = {}
        # Dead letters written since this broker started, in all and per key.
        self.letters_written = 0
        self.written_by_key: dict[ShareKey, int] = {}
        self._failpoint = os.environ.get(FAILPOINT_ENV)
        # Look for stored states with ARCHIVING records (at start, on leadership changes).
        self._sweep = True

    def on_archived(self, key: ShareKey, archived: Sequence[Archived]) -> None:
        if archived:
            self._due.add(key)
            self._wakeup.set()

    def leadership_changed(self) -> None:
        self._sweep = True
        self._wakeup.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            await self._rounds()
        finally:
            await self.remote.aclose()

    async def _rounds(self) -> None:
        while True:
            self._wakeup = trio.Event()
            if self._sweep:
                self._sweep = False
                await self._load_stored()
            due, self._due = self._due, set()
            retry = False
            for key in sorted(due, key=lambda k: (k.group_id, str(k.topic_id), k.partition)):
                if not await self.drain(key):
                    self._due.add(key)
                    retry = True
            if self._due and not retry:
                continue
            with trio.move_on_after(RETRY_INTERVAL_S if retry else float("inf")):
                await self._wakeup.wait()

    async def _load_stored(self) -> None:
        """Serve the share partitions led here whose stored state has ARCHIVING
        records (a restart, a failover): they are loaded, which makes them due."""
        store = self.partitions.store
        if not store.loaded:
            return
        for key, state in list(store.latest.items()):
            if key in self.partitions.leaders or not any(
                batch.state is RecordState.ARCHIVING for batch in state.batches
            ):
                continue
            topic = self.broker.controller.topic_by_id(key.topic_id)
            replica = None if topic is None else self.broker.partition(topic.name, key.partition)
            if replica is None or not replica.is_leader:
                continue
            try:
                await self.partitions.leader(key, replica)
            except ShareStateUnavailableError as exc:
                log.warning("share group %r: cannot load %s-%d for its dead letters: %s",
                            key.group_id, replica.topic.name, key.partition, exc)  # fmt: skip

    async def drain(self, key: ShareKey) -> bool:
        """Rounds until the share partition has no ARCHIVING record; False when one
        was deferred (try again later)."""
        while True:
            leader = self.partitions.leaders.get(key)
            if leader is None or not leader.partition.pending_dead_letters():
                self._deferred.pop(key, None)
                return True
            try:
                await self.round(leader)
            except RoundDeferredError as exc:
                if self._deferred.get(key) != str(exc):
                    log.warning("share group %r, %s-%d: dead letters wait: %s", key.group_id,
                                leader.replica.topic.name, key.partition, exc)  # fmt: skip
                    self._deferred[key] = str(exc)
                return False

    # -- one round ------------------------------------------------------------------

    async def round(self, leader: ShareLeader) -> None:
        key = leader.key
        config = self.partitions.config(key.group_id)
        topic_name, refusal = await self._destination_topic(key.group_id, config)
        if refusal is not None:
            await self._archive_without_letters(leader, refusal)
            return
        assert topic_name is not None
        destination = self._destination(topic_name, key.partition)
        await destination.settle()  # an earlier round's unanswered append, first
        self._wait_for_previous_writer(leader)
        await self._recover(leader, destination)
        pending = leader.partition.pending_dead_letters()
        if not pending:
            await self._store(leader)
            return
        leader.partition.dead_letter_mark = await destination.end_offset()
        await self._store(leader)
        self._crash_at("after-mark")
        pending = _first_records(leader.partition.pending_dead_letters(), ROUND_RECORDS_MAX)
        source = await self._source_records(leader, pending, config.dead_letter_copy_record)
        bytes_max = LogConfig.from_overrides(destination.topic.configs).max_message_bytes
        if self.partitions.leaders.get(key) is not leader:  # moved meanwhile: not ours
            raise RoundDeferredError("the share partition is no longer served here")
        await destination.append(list(_batches(leader, pending, source, bytes_max)))
        self._crash_at("after-append")
        for archived in pending:
            leader.partition.dead_lettered(archived.first_offset, archived.last_offset)
        written = sum(a.last_offset - a.first_offset + 1 for a in pending)
        self.letters_written += written
        self.written_by_key[key] = self.written_by_key.get(key, 0) + written
        leader.partition.dead_letter_mark = (
            await destination.end_offset()
            if leader.partition.pending_dead_letters()
            else NO_DEAD_LETTER_MARK
        )
        await self._store(leader)
        leader.wake()

    def _wait_for_previous_writer(self, leader: ShareLeader) -> None:
        """A share partition taken over with a dead-letter mark may have a round of its
        previous leader still in flight (that broker learns of the move a moment
        late, and may append just after this one read the dead-letter partition): its
        first round here waits `TAKEOVER_SETTLE_S` from the takeover, so that such an
        append is in the partition, and committed, when step (c) reads it."""
        key = leader.key
        if leader.partition.dead_letter_mark == NO_DEAD_LETTER_MARK:
            self._taken_over.pop(key, None)
            return
        if self._taken_over.get(key, (None, 0.0))[0] is not leader:
            self._taken_over[key] = (leader, trio.current_time())
        waited_s = trio.current_time() - self._taken_over[key][1]
        if waited_s < TAKEOVER_SETTLE_S:
            raise RoundDeferredError("the previous leader's round may still be in flight")

    def _crash_at(self, point: str) -> None:
        if self._failpoint == point:
            log.warning("%s=%s: killing the broker", FAILPOINT_ENV, point)
            os.kill(os.getpid(), signal.SIGKILL)

    async def _destination_topic(
        self, group_id: str, config: ShareGroupConfig
    ) -> tuple[str | None, str | None]:
        """(the dead-letter topic, None) or (None, why there are no dead letters)."""
        name = config.dead_letter_topic
        if name is None:
            return None, f"DLQ topic is not configured for share group {group_id}."
        refusal = dead_letter_refusal(self.broker, group_id, name)
        if refusal is not None:
            return None, refusal
        topic = self.broker.controller.topic(name)
        if topic is not None:
            if not LogConfig.from_overrides(topic.configs).errors_deadletterqueue_group_enable:
                return None, (
                    "DLQ is not enabled on configured DLQ topic for share group: "
                    f"{group_id}, topic: {name}."
                )
            return name, None
        if not share_broker_limits(self.broker).dead_letter_auto_create_topics:
            return None, (
                "DLQ topic does not exist and auto create is disabled on cluster for share "
                f"group: {group_id}, topic: {name}."
            )
        await self._create_topic(name)
        return name, None

    async def _create_topic(self, name: str) -> None:
        def plan() -> TopicRecord:
            return self.broker.controller.plan_topic(name, -1, -1, configs=CREATED_TOPIC_CONFIGS)

        try:
            await self.broker.topic_changes.create_topic(plan)
        except ControllerError as exc:
            if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise RoundDeferredError(f"cannot create {name}: {exc}") from exc
        except OSError as exc:
            raise RoundDeferredError(f"cannot create {name}: {exc}") from exc
        log.info("created the dead-letter topic %s", name)

    def _destination(self, topic_name: str, source_partition: int) -> Destination:
        topic = self.broker.controller.topic(topic_name)
        if topic is None:
            raise RoundDeferredError(f"{topic_name} does not exist (yet)")
        index = dead_letter_partition(source_partition, topic.partition_count)
        replica = self.broker.partition(topic_name, index)
        if replica is not None and replica.is_leader:
            # Led here now: this log has whatever an unanswered remote append left
            # that will survive (step c reads it), so that append is not sent again.
            self.remote.unsettled.pop((topic_name, index), None)
            return LocalDestination(self.broker, topic, replica)
        cluster = self.broker.cluster
        leader_id = -1 if cluster is None else cluster.partition_state(topic, index).leader
        if leader_id < 0 or leader_id == self.broker.config.node_id:
            raise RoundDeferredError(f"{topic_name}-{index} has no leader now")
        return RemoteDestination(self.broker, self.remote, topic, index, leader_id)

    async def _archive_without_letters(self, leader: ShareLeader, refusal: str) -> None:
        """Kafka's outcome for a refused dead-letter topic: archived, no dead letter."""
        pending = leader.partition.pending_dead_letters()
        log.error("share group %r, %s-%d: %d records archived without dead letters: %s",
                  leader.key.group_id, leader.replica.topic.name, leader.key.partition,
                  sum(a.last_offset - a.first_offset + 1 for a in pending), refusal)  # fmt: skip
        for archived in pending:
            leader.partition.dead_lettered(archived.first_offset, archived.last_offset)
        leader.partition.dead_letter_mark = NO_DEAD_LETTER_MARK
        await self._store(leader)
        leader.wake()

    async def _recover(self, leader: ShareLeader, destination: Destination) -> None:
        """Step (c): finish the ARCHIVING records whose dead letters are already in
        the dead-letter partition at or after the mark."""
        mark = leader.partition.dead_letter_mark
        if mark == NO_DEAD_LETTER_MARK:
            return
        key = leader.key
        letters = (parse_dead_letter(record.headers) for record in await destination.read(mark))
        found = written_offsets(letters, key.group_id, leader.replica.topic.name, key.partition)
        finished = 0
        for archived in leader.partition.pending_dead_letters():
            for offset in range(archived.first_offset, archived.last_offset + 1):
                if offset in found:
                    finished += leader.partition.dead_lettered(offset, offset)
        if finished:
            log.info("share group %r, %s-%d: %d dead letters were written before a restart",
                     key.group_id, leader.replica.topic.name, key.partition, finished)  # fmt: skip

    async def _store(self, leader: ShareLeader) -> None:
        if self.partitions.leaders.get(leader.key) is not leader:
            raise RoundDeferredError("the share partition is no longer served here")
        error = await self.partitions.persist([leader])
        if error != ErrorCode.NONE:
            raise RoundDeferredError(f"its state was not stored: {error.name}")

    async def _source_records(
        self, leader: ShareLeader, pending: Sequence[Archived], copy: bool
    ) -> dict[int, Record]:
        if not copy:
            return {}
        replica = leader.replica
        first = pending[0].first_offset
        last = pending[-1].last_offset
        start = max(first, replica.log.log_start_offset)
        return {
            record.offset: record
            for record in await read_log(self.broker, replica, start, last + 1)
            if first <= record.offset <= last
        }


def _first_records(pending: Sequence[Archived], records_max: int) -> list[Archived]:
    """The first ranges of `pending` holding at most `records_max` records."""
    kept: list[Archived] = []
    room = records_max
    for archived in pending:
        if room <= 0:
            break
        last = min(archived.last_offset, archived.first_offset + room - 1)
        kept.append(Archived(archived.first_offset, last, archived.delivery_count, archived.reason))
        room -= last - archived.first_offset + 1
    return kept


def _batches(
    leader: ShareLeader,
    pending: Sequence[Archived],
    source: dict[int, Record],
    bytes_max: int,
) -> Iterator[list[RecordInput]]:
    """The dead letters of `pending`, as the records of batches of at most `bytes_max`
    (one record per batch at least)."""
    key = leader.key
    topic = leader.replica.topic.name
    entries: list[RecordInput] = []
    size = 0
    for archived in pending:
        for offset in range(archived.first_offset, archived.last_offset + 1):
            record = source.get(offset)
            headers = dead_letter_headers(
                key.group_id, topic, key.partition, offset, archived.delivery_count, archived.reason
            )
            entry = (
                None if record is None else record.key,
                None if record is None else record.value,
                headers,
            )
            entry_size = _entry_bytes(entry)
            if entries and size + entry_size > bytes_max:
                yield entries
                entries, size = [], 0
            entries.append(entry)
            size += entry_size
    if entries:
        yield entries


def _entry_bytes(entry: tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]) -> int:
    key, value, headers = entry
    header_bytes = sum(len(name) + len(data or b"") + 4 for name, data in headers)
    return len(key or b"") + len(value or b"") + header_bytes + 24
