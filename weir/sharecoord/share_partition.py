"""One share group's view of one topic partition: KIP-932's share-partition leader state.

Plain data with its rules, like `weir.groupcoord`'s groups: no sockets, disk or clock
(time is `now_ms`); the broker reads the log, answers ShareFetch/ShareAcknowledge and
writes `state()` to `__share_group_state`.

The window. Every record below the *start offset* is done (acknowledged or archived).
Records in `[start offset, in-flight end)` are *in flight*, each with a state, a
delivery count, and while ACQUIRED an owner (a member id) and a lock deadline. Records
at and beyond the in-flight end have never been delivered. The window never spans more
than `partition_max_record_locks` offsets (Kafka's `share.partition.max.record.locks`),
so memory is bounded by the bound, not by the consumers' lag.

The states and their transitions (Kafka's RecordState ids; `RecordState`):

| from | to | when |
|---|---|---|
| AVAILABLE | ACQUIRED | `acquire` (delivery count + 1, lock deadline now + lock duration) |
| ACQUIRED | ACQUIRED | RENEW (new deadline; delivery count unchanged) |
| ACQUIRED | ACKNOWLEDGED | ACCEPT |
| ACQUIRED | ARCHIVED | REJECT, GAP; or RELEASE / lock expiry / member release at the limit |
| ACQUIRED | AVAILABLE | RELEASE, lock expiry, member release (below the delivery count limit) |
| ACQUIRED | ARCHIVING | as to ARCHIVED (not GAP), when the group has a dead-letter topic |
| ARCHIVING | ARCHIVED | `dead_lettered`: its dead letter is written (rule 10) |

ACKNOWLEDGED and ARCHIVED are final. After every change the start offset moves past
the prefix of final records and their entries are dropped.

The rules, and where they come from (Kafka 4.4's `kafka.server.share.SharePartition`
and `org.apache.kafka.server.share.fetch.InFlightState`, read to learn):

1. Acquisition is per record: the AVAILABLE records in the window, then new records
   past the in-flight end, found within the log batches the driver read from
   `fetch_offset()`. Offsets between and inside batches count as records (Kafka
   acquires offset ranges; the client answers GAP for offsets it did not get).
   Weir adds: an AVAILABLE in-flight offset that the read passed over without a
   batch holding it (released or expired instead of answered GAP) has no record and
   is finished silently, so it cannot hold `fetch_offset()` in place.
2. `max_records` bounds the records acquired. In batch-optimized mode Kafka rounds up
   to the end of the log batch holding the last one (`lastOffsetFromBatchWithRequestOffset`);
   in record-limit mode (ShareFetch v2's ShareAcquireMode 1) never more.
3. The in-flight bound. Kafka computes `min(maxFetchRecords, maxInFlightRecords -
   numInFlightRecords)` (`lastOffsetAndMaxRecordsToAcquire`), and when full only
   re-acquires inside the window; its batch rounding can overshoot the bound. Weir's
   bound is hard: new records are cut at `start + bound`, even mid-batch.
4. Delivery counts. +1 on acquisition (`DeliveryCountOps.INCREASE`); unchanged by
   acknowledgement, lock expiry and member release (`NO_OP` in
   `releaseAcquiredRecordsForCompleteBatch` and `releaseAcquisitionLockOnTimeout*`:
   a member whose share session closes does not get its deliveries back). A record
   going back to AVAILABLE with a count at the limit is ARCHIVED instead
   (`InFlightState.tryUpdateState`), with reason DELIVERY_LIMIT.
5. Throttled redelivery (Kafka 4.4's `shouldThrottleRecordsDelivery`: threshold
   `max(2, ceil(limit / 2))`, and "the offset is on last delivery attempt ... should
   be delivered alone"). Weir at record granularity: an acquisition that already holds
   records stops before a record whose count reached the threshold; one that starts
   with such a record takes only the rest of that record's log batch; a record on
   its last attempt is acquired alone. A poison record is thus isolated before it is
   archived, as in Kafka, though batch shapes can differ.
6. Acknowledgement (`acknowledge`, Kafka's `acknowledge` with
   `KafkaApis.validateAcknowledgementBatches` before it): the batches of one request
   apply all or nothing (`rollbackOrProcessStateUpdates`). INVALID_REQUEST for a bad
   request: first > last, no types, more than one type but not one per offset, an
   unknown type, batches out of order or overlapping, a batch that starts or ends
   past the in-flight end. INVALID_RECORD_STATE for a record that is not ACQUIRED,
   is held by another member, a window with nothing in flight, or RENEW when the group
   disabled it (`share.renew.acknowledge.enable`). Offsets below the start are
   skipped: they are done already.
7. Lock expiry and member release (`expire_locks`, `release_member`): the member's
   ACQUIRED records become AVAILABLE, or ARCHIVED at the limit (rule 4).
8. The log start moving (retention, DeleteRecords; `advance_start_to`): records
   below it leave the window whatever their state (Kafka archives the AVAILABLE ones
   and keeps acquired ones until they are acknowledged, which then skips them: the
   same outcome for a client). They are not dead-lettered: they are gone from the log.
9. `state()` is what `__share_group_state` must hold (`share_state`); `from_state`
   rebuilds the window with no locks: ACQUIRED records were stored as AVAILABLE with
   their counts and are delivered again. A record loaded AVAILABLE with a count at or
   over the (perhaps lowered) limit is archived at load (`archived_at_load`).
10. Dead letters (KIP-1191, Kafka 4.4's ARCHIVING state). When the group has a
   dead-letter topic (`ShareSettings.dead_letters`), a record archived by REJECT or
   the delivery limit goes to ARCHIVING, not ARCHIVED: it is not final, so the start
   offset stops at it and it is stored (state 3) until the broker has written its
   dead letter and calls `dead_lettered`. `pending_dead_letters` lists them with
   their reason (kept in memory; after a load, derived from the count as Kafka does:
   at the limit DELIVERY_LIMIT, else REJECTED). `dead_letter_mark` is stored with
   the state for the broker (`ShareState.dead_letter_mark`). ARCHIVING records below
   a moved log start leave the window like any other (rule 8).

Cost: one small slot object per in-flight offset (at most the bound), and one heap
entry per acquisition or renewal for the lock deadlines (compacted past
`DEADLINE_ENTRIES_PER_LOCK_MAX` times the bound).

`_check_invariants` states the invariants; the tests run it after every operation.
"""

from __future__ import annotations

import bisect
import enum
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from weir.format.errors import ErrorCode
from weir.sharecoord.share_state import NO_DEAD_LETTER_MARK, RecordState, ShareState, StateBatch

__all__ = [
    "PARTITION_MAX_RECORD_LOCKS_MAX",
    "AckBatch",
    "AckOutcome",
    "AcknowledgeType",
    "AcquiredRange",
    "ArchiveReason",
    "Archived",
    "LogBatch",
    "QueueDepth",
    "RecordState",
    "SharePartition",
    "ShareSettings",
]

# The largest `share.partition.max.record.locks` Weir accepts: the window's memory
# bound (one slot per offset). Kafka's own ceiling config defaults to 4,000.
PARTITION_MAX_RECORD_LOCKS_MAX = 10_000
# Lock-deadline heap entries per record lock before the heap is rebuilt from the
# window (stale entries pile up when records are acknowledged before their deadline).
DEADLINE_ENTRIES_PER_LOCK_MAX = 4
# Kafka 4.4's throttled redelivery starts at max(2, ceil(limit / 2)) deliveries.
THROTTLE_DELIVERY_COUNT_MIN = 2


class AcknowledgeType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge AcknowledgeTypes."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class ArchiveReason(enum.Enum):
    REJECTED = "rejected"
    DELIVERY_LIMIT = "delivery_limit"


@dataclass(frozen=True)
class ShareSettings:
    """A share group's settings as the partition uses them (group configs, with the
    broker's `group.share.*` defaults)."""

    record_lock_duration_ms: int = 30_000  # share.record.lock.duration.ms
    delivery_count_limit: int = 5  # share.delivery.count.limit
    partition_max_record_locks: int = 2_000  # share.partition.max.record.locks
    renew_acknowledge_enabled: bool = True  # share.renew.acknowledge.enable
    # errors.deadletterqueue.topic.name is set: archived records wait in ARCHIVING.
    dead_letters: bool = False

    def __post_init__(self) -> None:
        assert self.record_lock_duration_ms > 0, self
        assert self.delivery_count_limit >= 1, self
        assert 1 <= self.partition_max_record_locks <= PARTITION_MAX_RECORD_LOCKS_MAX, self

    @property
    def throttle_delivery_count(self) -> int:
        """Deliveries from which redelivery is throttled (rule 5)."""
        return max(THROTTLE_DELIVERY_COUNT_MIN, -(-self.delivery_count_limit // 2))


@dataclass(frozen=True)
class LogBatch:
    """A record batch the driver read from the log (offsets inclusive)."""

    base_offset: int
    last_offset: int


@dataclass(frozen=True)
class AcquiredRange:
    """ShareFetch's AcquiredRecords entry."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class Archived:
    """Records that reached ARCHIVED and may be dead-lettered."""

    first_offset: int
    last_offset: int
    delivery_count: int
    reason: ArchiveReason


@dataclass(frozen=True)
class AckBatch:
    """One AcknowledgementBatch: one type for the range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]  # AcknowledgeType values (unknown ones are refused)


@dataclass(frozen=True)
class AckOutcome:
    error: ErrorCode
    archived: tuple[Archived, ...] = ()
    message: str = ""


@dataclass(frozen=True)
class QueueDepth:
    """Records by state, for Describe and metrics. `available` counts records not yet
    fetched up to the log end the caller gives."""

    start_offset: int
    available: int
    acquired: int
    acknowledged: int
    archived: int


class _Slot:
    """One in-flight offset (internal, mutable: the hot path)."""

    __slots__ = ("delivery_count", "deadline_ms", "owner", "state")

    def __init__(self, state: RecordState, delivery_count: int) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.owner: str | None = None
        self.deadline_ms: int | None = None

    def is_gap(self) -> bool:
        """An offset with no record: skipped before new records past the in-flight
        end, or found AVAILABLE in a hole of a log read (`acquire`)."""
        return self.state is RecordState.ARCHIVED and self.delivery_count == 0


_FINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class _ArchivedRanges:
    """Archived offsets merged into ranges (contiguous, same count and reason)."""

    def __init__(self) -> None:
        self.ranges: list[Archived] = []

    def add(self, offset: int, delivery_count: int, reason: ArchiveReason) -> None:
        last = self.ranges[-1] if self.ranges else None
        if (
            last is not None
            and last.last_offset + 1 == offset
            and last.delivery_count == delivery_count
            and last.reason is reason
        ):
            self.ranges[-1] = Archived(last.first_offset, offset, delivery_count, reason)
        else:
            self.ranges.append(Archived(offset, offset, delivery_count, reason))


class _AcquiredRanges:
    def __init__(self) -> None:
        self.ranges: list[AcquiredRange] = []
        self.count = 0

    def add(self, first: int, last: int, delivery_count: int) -> None:
        self.count += last - first + 1
        prev = self.ranges[-1] if self.ranges else None
        if (
            prev is not None
            and prev.last_offset + 1 == first
            and prev.delivery_count == delivery_count
        ):
            self.ranges[-1] = AcquiredRange(prev.first_offset, last, delivery_count)
        else:
            self.ranges.append(AcquiredRange(first, last, delivery_count))


@dataclass
class SharePartition:
    """The in-flight records of one share group on one topic partition."""

    settings: ShareSettings
    start_offset: int
    state_epoch: int = 0
    leader_epoch: int = 0
    # Slot i is offset start_offset + i; the in-flight end is start + len(slots).
    _slots: list[_Slot] = field(default_factory=list)
    # (deadline_ms, first offset, last offset) per acquisition or renewal; stale
    # entries (acknowledged or renewed since) are skipped when met.
    _deadlines: list[tuple[int, int, int]] = field(default_factory=list)
    # The span of a loaded state that exceeded the bound (drains as it moves on).
    _loaded_span: int = 0
    # Records archived by `from_state` (a count at or over the limit).
    archived_at_load: tuple[Archived, ...] = ()
    # Stored with the state for the dead-letter writer (rule 10).
    dead_letter_mark: int = NO_DEAD_LETTER_MARK
    # Why each ARCHIVING offset was archived (in memory only; rule 10).
    _reasons: dict[int, ArchiveReason] = field(default_factory=dict)

    # -- construction --

    @classmethod
    def starting_at(
        cls,
        start_offset: int,
        settings: ShareSettings,
        *,
        state_epoch: int = 0,
        leader_epoch: int = 0,
    ) -> SharePartition:
        """A partition with nothing in flight, whose next record is `start_offset`
        (the share.auto.offset.reset answer, or a reset's)."""
        assert start_offset >= 0, start_offset
        return cls(settings, start_offset, state_epoch, leader_epoch)

    @classmethod
    def from_state(
        cls, state: ShareState, settings: ShareSettings, *, leader_epoch: int | None = None
    ) -> SharePartition:
        """The partition as `state` left it, with no locks (rule 9). `leader_epoch`:
        the epoch of the leader loading it (default: the one that wrote it)."""
        epoch = state.leader_epoch if leader_epoch is None else leader_epoch
        partition = cls(settings, state.start_offset, state.state_epoch, epoch)
        slots = [
            _Slot(RecordState.AVAILABLE, 0) for _ in range(state.end_offset - state.start_offset)
        ]
        for batch in state.batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                slots[offset - state.start_offset] = _Slot(batch.state, batch.delivery_count)
        partition._slots = slots
        partition._loaded_span = len(slots)
        partition.dead_letter_mark = state.dead_letter_mark
        archived = _ArchivedRanges()
        limit = settings.delivery_count_limit
        for index, slot in enumerate(slots):
            if slot.state is RecordState.AVAILABLE and slot.delivery_count >= limit:
                partition._archive(
                    state.start_offset + index, slot, ArchiveReason.DELIVERY_LIMIT, archived
                )
        partition.archived_at_load = tuple(archived.ranges)
        partition._trim_never_delivered_tail()
        partition._advance_past_final()
        return partition

    # -- reading --

    @property
    def in_flight_end(self) -> int:
        return self.start_offset + len(self._slots)

    def record_state(self, offset: int) -> tuple[RecordState, int, str | None] | None:
        """(state, delivery count, owner) of an in-flight offset; None outside the window."""
        if not self.start_offset <= offset < self.in_flight_end:
            return None
        slot = self._slots[offset - self.start_offset]
        return slot.state, slot.delivery_count, slot.owner

    def fetch_offset(self) -> int | None:
        """Where the driver reads the log from next: the first AVAILABLE in-flight
        offset, else the in-flight end; None when nothing is AVAILABLE and the window
        is full (Kafka's `canAcquireRecords` false)."""
        for index, slot in enumerate(self._slots):
            if slot.state is RecordState.AVAILABLE:
                return self.start_offset + index
        if len(self._slots) >= self._span_max():
            return None
        return self.in_flight_end

    def next_deadline_ms(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED record (stale entries dropped)."""
        while self._deadlines:
            deadline_ms, first, last = self._deadlines[0]
            if self._holds_deadline(deadline_ms, first, last):
                return deadline_ms
            heapq.heappop(self._deadlines)
        return None

    def depth(self, end_offset: int) -> QueueDepth:
        """Records by state; `end_offset` is the log's end (what the group may read)."""
        counts = dict.fromkeys(RecordState, 0)
        for slot in self._slots:
            if not slot.is_gap():
                counts[slot.state] += 1
        unfetched = max(0, end_offset - self.in_flight_end)
        return QueueDepth(
            self.start_offset,
            counts[RecordState.AVAILABLE] + unfetched,
            counts[RecordState.ACQUIRED],
            counts[RecordState.ACKNOWLEDGED],
            counts[RecordState.ARCHIVED] + counts[RecordState.ARCHIVING],
        )

    def state(self) -> ShareState:
        """What `__share_group_state` must hold (ACQUIRED stored as AVAILABLE)."""
        batches: list[StateBatch] = []
        for index, slot in enumerate(self._slots):
            stored = RecordState.AVAILABLE if slot.state is RecordState.ACQUIRED else slot.state
            if stored is RecordState.AVAILABLE and slot.delivery_count == 0:
                continue
            offset = self.start_offset + index
            prev = batches[-1] if batches else None
            if (
                prev is not None
                and prev.last_offset + 1 == offset
                and prev.state is stored
                and prev.delivery_count == slot.delivery_count
            ):
                batches[-1] = StateBatch(prev.first_offset, offset, stored, slot.delivery_count)
            else:
                batches.append(StateBatch(offset, offset, stored, slot.delivery_count))
        return ShareState(
            self.start_offset,
            self.state_epoch,
            self.leader_epoch,
            tuple(batches),
            self.dead_letter_mark,
        )

    # -- acquisition --

    def acquire(
        self,
        member_id: str,
        batches: Sequence[LogBatch],
        *,
        max_records: int,
        record_limit: bool,
        read_offset: int,
        now_ms: int,
    ) -> list[AcquiredRange]:
        """Acquire for `member_id` the records the driver read: `batches`, in log
        order, from a read of the log at `read_offset` (the `fetch_offset()` it
        used): AVAILABLE ones in the window, then new ones (rules 1-3 and 5).
        Returns AcquiredRecords, merged where counts agree.

        An AVAILABLE in-flight offset at or after `read_offset` that no batch holds
        has no record (compacted, or between batches): it is finished as a gap
        instead of being offered again, so it cannot stall `fetch_offset()`."""
        assert member_id, "a record is acquired by a member"
        _assert_batches_in_order(batches)
        if max_records <= 0 or not batches:
            return []
        first = max(min(read_offset, batches[0].base_offset), self.start_offset)
        last = batches[-1].last_offset
        if last < first:
            return []
        deadline_ms = now_ms + self.settings.record_lock_duration_ms
        acquired = _AcquiredRanges()
        plan = _Plan(batches, max_records, record_limit, read_offset)
        offset = self._reacquire(
            member_id, first, min(last, self.in_flight_end - 1), deadline_ms, acquired, plan
        )
        if offset is not None and not plan.stopped:
            new_first = max(offset, self.in_flight_end, batches[0].base_offset)
            self._acquire_new(member_id, new_first, last, deadline_ms, acquired, plan)
        if acquired.ranges:
            lowest, highest = acquired.ranges[0].first_offset, acquired.ranges[-1].last_offset
            self._push_deadline(deadline_ms, lowest, highest)
        self._advance_past_final()  # gaps finished at the head
        return acquired.ranges

    def _reacquire(
        self,
        member_id: str,
        first: int,
        last: int,
        deadline_ms: int,
        acquired: _AcquiredRanges,
        plan: _Plan,
    ) -> int | None:
        """Acquire the AVAILABLE records in `[first, last]` of the window; the offset
        to go on from (None: stop)."""
        limit = self.settings.delivery_count_limit
        throttle = self.settings.throttle_delivery_count
        offset = first
        while offset <= last:
            slot = self._slots[offset - self.start_offset]
            if slot.state is RecordState.AVAILABLE and plan.is_hole(offset):
                slot.delivery_count = 0
                _finish(slot, RecordState.ARCHIVED)  # a gap: no record to deliver
                offset += 1
                continue
            if not plan.room_at(offset, acquired.count):
                plan.stopped = True
                return None
            if slot.state is RecordState.AVAILABLE:
                last_attempt = slot.delivery_count + 1 >= limit
                throttled = slot.delivery_count >= throttle
                if acquired.count > 0 and (last_attempt or (throttled and not plan.throttled)):
                    plan.stopped = True
                    return None
                assert slot.owner is None, (offset, slot.owner)
                slot.state = RecordState.ACQUIRED
                slot.delivery_count += 1
                slot.owner = member_id
                slot.deadline_ms = deadline_ms
                acquired.add(offset, offset, slot.delivery_count)
                if last_attempt:
                    plan.stopped = True
                    return None
                if throttled and not plan.throttled:
                    plan.throttled = True
                    plan.stop_after(offset)
                plan.note_acquired(offset, acquired.count)
            offset += 1
        return offset

    def _acquire_new(
        self,
        member_id: str,
        first: int,
        last: int,
        deadline_ms: int,
        acquired: _AcquiredRanges,
        plan: _Plan,
    ) -> None:
        """Acquire never-delivered records `first..` (at most `last`) past the window."""
        end = self.in_flight_end
        if first > end and not self._slots:
            self.start_offset = first  # nothing in flight: the window jumps (Kafka too)
            end = first
        room = self._span_max() - (first - self.start_offset)
        if room <= 0 or last < first:
            return
        cut = plan.last_new_offset(first, acquired.count)
        new_last = min(last, cut, first + room - 1)
        if new_last < first:
            return
        gap = first - end  # offsets the log skipped before the first new record
        self._slots.extend(_Slot(RecordState.ARCHIVED, 0) for _ in range(gap))
        for _ in range(new_last - first + 1):
            slot = _Slot(RecordState.ACQUIRED, 1)
            slot.owner = member_id
            slot.deadline_ms = deadline_ms
            self._slots.append(slot)
        acquired.add(first, new_last, 1)

    # -- acknowledgement --

    def acknowledge(
        self,
        member_id: str,
        first_offset: int,
        last_offset: int,
        types: Sequence[AcknowledgeType | int],
        now_ms: int,
    ) -> AckOutcome:
        """One acknowledgement batch (rule 6); see `acknowledge_batches`."""
        return self.acknowledge_batches(
            member_id, [AckBatch(first_offset, last_offset, tuple(types))], now_ms
        )

    def acknowledge_batches(
        self, member_id: str, batches: Sequence[AckBatch], now_ms: int
    ) -> AckOutcome:
        """A request's acknowledgement batches for this partition, all or nothing."""
        refusal = _request_problem(batches) or self._state_problem(member_id, batches)
        if refusal is not None:
            return AckOutcome(refusal[0], (), refusal[1])
        archived = _ArchivedRanges()
        for batch in batches:
            self._apply(member_id, batch, now_ms, archived)
        self._advance_past_final()
        return AckOutcome(ErrorCode.NONE, tuple(archived.ranges))

    def _state_problem(
        self, member_id: str, batches: Sequence[AckBatch]
    ) -> tuple[ErrorCode, str] | None:
        for batch in batches:
            if batch.last_offset < self.start_offset:
                continue  # done already: skipped (Kafka too)
            if not self._slots:
                return ErrorCode.INVALID_RECORD_STATE, "no records are in flight"
            first = max(batch.first_offset, self.start_offset)
            if first >= self.in_flight_end or batch.last_offset >= self.in_flight_end:
                return ErrorCode.INVALID_REQUEST, "the batch reaches past the acquired records"
            if AcknowledgeType.RENEW in batch.types and not self.settings.renew_acknowledge_enabled:
                return ErrorCode.INVALID_RECORD_STATE, "renewing locks is not enabled for the group"
            for offset in range(first, batch.last_offset + 1):
                slot = self._slots[offset - self.start_offset]
                if slot.is_gap():
                    continue
                if slot.state is not RecordState.ACQUIRED:
                    return ErrorCode.INVALID_RECORD_STATE, f"offset {offset} is not acquired"
                if slot.owner != member_id:
                    return (
                        ErrorCode.INVALID_RECORD_STATE,
                        f"offset {offset} is held by another member",
                    )
        return None

    def _apply(
        self, member_id: str, batch: AckBatch, now_ms: int, archived: _ArchivedRanges
    ) -> None:
        first = max(batch.first_offset, self.start_offset)
        renewed_ms = now_ms + self.settings.record_lock_duration_ms
        renewed = False
        for offset in range(first, batch.last_offset + 1):
            slot = self._slots[offset - self.start_offset]
            if slot.is_gap():
                continue
            assert slot.state is RecordState.ACQUIRED and slot.owner == member_id, offset
            kind = (
                batch.types[0]
                if len(batch.types) == 1
                else batch.types[offset - batch.first_offset]
            )
            if kind == AcknowledgeType.RENEW:
                slot.deadline_ms = renewed_ms
                renewed = True
            elif kind == AcknowledgeType.ACCEPT:
                _finish(slot, RecordState.ACKNOWLEDGED)
            elif kind == AcknowledgeType.RELEASE:
                self._release(offset, slot, archived)
            elif kind == AcknowledgeType.REJECT:
                self._archive(offset, slot, ArchiveReason.REJECTED, archived)
            else:  # GAP: no record at this offset, nothing to dead-letter
                _finish(slot, RecordState.ARCHIVED)
        if renewed:
            self._push_deadline(renewed_ms, first, batch.last_offset)

    # -- release and expiry --

    def release_member(self, member_id: str, now_ms: int) -> list[Archived]:
        """The member left or closed its share session: its records go back (rule 7)."""
        del now_ms  # the delivery count is kept (Kafka 4.4's NO_OP); no time involved
        archived = _ArchivedRanges()
        for index, slot in enumerate(self._slots):
            if slot.state is RecordState.ACQUIRED and slot.owner == member_id:
                self._release(self.start_offset + index, slot, archived)
        self._advance_past_final()
        return archived.ranges

    def expire_locks(self, now_ms: int) -> list[Archived]:
        """Locks whose deadline passed: AVAILABLE again, or ARCHIVED at the limit."""
        expired: set[int] = set()  # entries with one deadline may overlap
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            deadline_ms, first, last = heapq.heappop(self._deadlines)
            for offset in range(
                max(first, self.start_offset), min(last, self.in_flight_end - 1) + 1
            ):
                slot = self._slots[offset - self.start_offset]
                if slot.state is RecordState.ACQUIRED and slot.deadline_ms == deadline_ms:
                    expired.add(offset)
        archived = _ArchivedRanges()
        for offset in sorted(expired):
            self._release(offset, self._slots[offset - self.start_offset], archived)
        self._advance_past_final()
        return archived.ranges

    def _release(self, offset: int, slot: _Slot, archived: _ArchivedRanges) -> None:
        if slot.delivery_count >= self.settings.delivery_count_limit:
            self._archive(offset, slot, ArchiveReason.DELIVERY_LIMIT, archived)
        else:
            _finish(slot, RecordState.AVAILABLE)

    def _archive(
        self, offset: int, slot: _Slot, reason: ArchiveReason, archived: _ArchivedRanges
    ) -> None:
        """REJECT or the delivery limit: ARCHIVED, or ARCHIVING until dead-lettered."""
        if self.settings.dead_letters:
            _finish(slot, RecordState.ARCHIVING)
            self._reasons[offset] = reason
        else:
            _finish(slot, RecordState.ARCHIVED)
        archived.add(offset, slot.delivery_count, reason)

    # -- dead letters (rule 10) --

    def pending_dead_letters(self) -> list[Archived]:
        """The ARCHIVING records, merged into ranges (offset order)."""
        pending = _ArchivedRanges()
        limit = self.settings.delivery_count_limit
        for index, slot in enumerate(self._slots):
            if slot.state is not RecordState.ARCHIVING:
                continue
            offset = self.start_offset + index
            reason = self._reasons.get(offset)
            if reason is None:  # loaded: derived from the count, as Kafka 4.4 does
                reason = (
                    ArchiveReason.DELIVERY_LIMIT
                    if slot.delivery_count >= limit
                    else ArchiveReason.REJECTED
                )
            pending.add(offset, slot.delivery_count, reason)
        return pending.ranges

    def dead_lettered(self, first_offset: int, last_offset: int) -> int:
        """The dead letters of the ARCHIVING records in `first..last` are written (or
        will never be): ARCHIVED. Returns how many records that finished."""
        done = 0
        for offset in range(max(first_offset, self.start_offset), last_offset + 1):
            if offset >= self.in_flight_end:
                break
            slot = self._slots[offset - self.start_offset]
            if slot.state is RecordState.ARCHIVING:
                slot.state = RecordState.ARCHIVED
                self._reasons.pop(offset, None)
                done += 1
        self._advance_past_final()
        return done

    # -- the start offset --

    def advance_start_to(self, offset: int) -> None:
        """The log start moved to `offset` (retention, DeleteRecords) or the group's
        start was altered: everything below leaves the window (rule 8)."""
        if offset <= self.start_offset:
            return
        drop = min(offset - self.start_offset, len(self._slots))
        del self._slots[:drop]
        self._reasons = {o: r for o, r in self._reasons.items() if o >= offset}
        self.start_offset = offset
        self._loaded_span = max(0, self._loaded_span - drop)
        self._advance_past_final()

    def _advance_past_final(self) -> None:
        slots = self._slots
        done = 0
        while done < len(slots) and slots[done].state in _FINAL:
            done += 1
        if done:
            del slots[:done]
            self.start_offset += done
            self._loaded_span = max(0, self._loaded_span - done)

    def _trim_never_delivered_tail(self) -> None:
        while (
            self._slots
            and self._slots[-1].state is RecordState.AVAILABLE
            and self._slots[-1].delivery_count == 0
        ):
            self._slots.pop()

    def _span_max(self) -> int:
        return max(self.settings.partition_max_record_locks, self._loaded_span)

    # -- lock deadlines --

    def _push_deadline(self, deadline_ms: int, first: int, last: int) -> None:
        heapq.heappush(self._deadlines, (deadline_ms, first, last))
        entries_max = DEADLINE_ENTRIES_PER_LOCK_MAX * self.settings.partition_max_record_locks
        if len(self._deadlines) > entries_max:
            self._rebuild_deadlines()

    def _rebuild_deadlines(self) -> None:
        """One entry per run of ACQUIRED offsets with one deadline."""
        entries: list[tuple[int, int, int]] = []
        for index, slot in enumerate(self._slots):
            if slot.state is not RecordState.ACQUIRED:
                continue
            assert slot.deadline_ms is not None
            offset = self.start_offset + index
            if entries and entries[-1][0] == slot.deadline_ms and entries[-1][2] == offset - 1:
                entries[-1] = (slot.deadline_ms, entries[-1][1], offset)
            else:
                entries.append((slot.deadline_ms, offset, offset))
        heapq.heapify(entries)
        self._deadlines = entries

    def _holds_deadline(self, deadline_ms: int, first: int, last: int) -> bool:
        for offset in range(max(first, self.start_offset), min(last, self.in_flight_end - 1) + 1):
            slot = self._slots[offset - self.start_offset]
            if slot.state is RecordState.ACQUIRED and slot.deadline_ms == deadline_ms:
                return True
        return False

    # -- invariants --

    def _check_invariants(self) -> None:
        """Assert every invariant of the window (O(window); for tests and debugging)."""
        settings = self.settings
        assert self.start_offset >= 0
        assert len(self._slots) <= self._span_max(), (len(self._slots), self._span_max())
        assert not self._slots or self._slots[0].state not in _FINAL, "start not past done records"
        covered: dict[int, list[tuple[int, int]]] = {}
        for deadline_ms, first, last in self._deadlines:
            covered.setdefault(deadline_ms, []).append((first, last))
        for index, slot in enumerate(self._slots):
            offset = self.start_offset + index
            assert slot.state in RecordState, (offset, slot.state)
            assert slot.delivery_count >= 0, (offset, slot.delivery_count)
            if slot.state is RecordState.ACQUIRED:
                assert slot.owner and slot.deadline_ms is not None, offset
                assert 1 <= slot.delivery_count <= settings.delivery_count_limit, offset
                ranges = covered.get(slot.deadline_ms, [])
                assert any(lo <= offset <= hi for lo, hi in ranges), (offset, "lock not scheduled")
            else:
                assert slot.owner is None and slot.deadline_ms is None, offset
            if slot.state is RecordState.ARCHIVING:
                assert slot.delivery_count >= 1, offset
            if slot.state is RecordState.AVAILABLE:
                assert slot.delivery_count < settings.delivery_count_limit, offset
        for offset in self._reasons:
            state = self.record_state(offset)
            assert state is not None and state[0] is RecordState.ARCHIVING, (offset, state)


@dataclass
class _Plan:
    """How far one acquisition may go (rule 2)."""

    batches: Sequence[LogBatch]
    max_records: int
    record_limit: bool
    read_offset: int
    # Batch-optimized mode: once max_records is reached, go on to this offset
    # (the end of the log batch holding the last record acquired).
    stop_offset: int | None = None
    stopped: bool = False
    # The acquisition started with a throttled record (rule 5).
    throttled: bool = False
    _bases: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._bases = [b.base_offset for b in self.batches]

    def batch_end(self, offset: int) -> int:
        """The last offset of the log batch holding `offset` (itself in a gap)."""
        index = bisect.bisect_right(self._bases, offset) - 1
        if index >= 0 and offset <= self.batches[index].last_offset:
            return self.batches[index].last_offset
        return offset

    def is_hole(self, offset: int) -> bool:
        """`offset` was read (at or after the read offset) and no batch holds it."""
        if offset < self.read_offset:
            return False
        index = bisect.bisect_right(self._bases, offset) - 1
        return index < 0 or offset > self.batches[index].last_offset

    def room_at(self, offset: int, acquired_count: int) -> bool:
        if self.stop_offset is not None and offset > self.stop_offset:
            return False
        if acquired_count < self.max_records:
            return True
        # Batch-optimized mode rounds up to the end of the batch (stop_offset).
        return not self.record_limit and self.stop_offset is not None

    def note_acquired(self, offset: int, acquired_count: int) -> None:
        if acquired_count >= self.max_records:
            end = offset if self.record_limit else self.batch_end(offset)
            self.stop_offset = end if self.stop_offset is None else min(self.stop_offset, end)

    def stop_after(self, offset: int) -> None:
        """A throttled record: this acquisition ends with its log batch."""
        end = self.batch_end(offset)
        self.stop_offset = end if self.stop_offset is None else min(self.stop_offset, end)

    def last_new_offset(self, first: int, acquired_count: int) -> int:
        """The last new record this acquisition may take, starting at `first`."""
        if acquired_count < self.max_records:
            cut = first + (self.max_records - acquired_count) - 1
            if not self.record_limit:
                cut = self.batch_end(cut)
        elif self.record_limit or self.stop_offset is None:
            return first - 1
        else:
            cut = self.stop_offset
        return cut if self.stop_offset is None else min(cut, self.stop_offset)


def _finish(slot: _Slot, state: RecordState) -> None:
    slot.state = state
    slot.owner = None
    slot.deadline_ms = None


def _assert_batches_in_order(batches: Iterable[LogBatch]) -> None:
    previous_last = -1
    for batch in batches:
        assert previous_last < batch.base_offset <= batch.last_offset, (previous_last, batch)
        previous_last = batch.last_offset


_ACK_TYPE_VALUES = frozenset(int(t) for t in AcknowledgeType)


def _request_problem(batches: Sequence[AckBatch]) -> tuple[ErrorCode, str] | None:
    """Kafka's `KafkaApis.validateAcknowledgementBatches`: INVALID_REQUEST."""
    previous_last = -1
    for batch in batches:
        if batch.first_offset < 0 or batch.last_offset < batch.first_offset:
            return ErrorCode.INVALID_REQUEST, f"batch {batch.first_offset}-{batch.last_offset}"
        if batch.first_offset <= previous_last:
            return ErrorCode.INVALID_REQUEST, "batches out of order or overlapping"
        count = batch.last_offset - batch.first_offset + 1
        if not batch.types or (len(batch.types) > 1 and len(batch.types) != count):
            return ErrorCode.INVALID_REQUEST, "one acknowledge type, or one per offset"
        if any(int(t) not in _ACK_TYPE_VALUES for t in batch.types):
            return ErrorCode.INVALID_REQUEST, "unknown acknowledge type"
        previous_last = batch.last_offset
    return None
