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
   dead-letter topic (`ShareSettings.dead_letters`), a record archived by REJECT, the
   delivery limit or its expiry (below) goes to ARCHIVING, not ARCHIVED: it is not
   final, so the start offset stops at it and it is stored (state 3) until the broker
   has written its dead letter and calls `dead_lettered`. `pending_dead_letters` lists
   them with their reason (kept in memory; after a load, derived from the count as Kafka
   does: at the limit DELIVERY_LIMIT, else REJECTED, and, Weir's, a count of 0 EXPIRED;
   an expired record that had been delivered before is then labelled REJECTED).
   `dead_letter_mark` is stored with the state for the broker
   (`ShareState.dead_letter_mark`). ARCHIVING records below a moved log start leave the
   window like any other (rule 8).

10. Delays, backoff and expiry (Weir's, beyond Kafka; docs/queues.md "Delays and
   expiry"). An AVAILABLE record may have a *visible time* before which it is not
   acquired: from its headers (`RecordTimes`, the driver reads them) or from a
   release backoff (`ShareSettings.release_backoff_ms`: RELEASE and lock expiry,
   not a member's release). Acquisition skips it and goes on with the records
   behind it (a queue, not a partition's order), which it may take up to the
   in-flight bound: a delayed record never delivered stays in the window as
   AVAILABLE with count 0. `next_deadline_ms` includes the earliest visible time,
   and `pass_time` clears the visible times that have passed (the driver then
   wakes parked fetches). A record whose expiry (`RecordTimes.expires_ms`, or
   `LogBatch.expires_ms` for a whole batch) has passed when acquisition reaches
   it is archived instead (ARCHIVED, or ARCHIVING with dead letters), reason
   EXPIRED, whatever its count. A backoff's visible
   time is part of `state()` (a restart does not shorten it); a header's is not
   (it is read from the log again).

11. Per-key ordering (Weir's, beyond Kafka; docs/queues.md "Per-key ordering"), when
   the group asks for it (`ShareSettings.key_ordering`). The driver gives each read
   record's key (`acquire_records`' `keys`: a hash of the key bytes per offset, null
   keys absent); each slot remembers its record's key once a read covered it
   (`_Slot.key`; KEY_UNKNOWN before that: a record first seen with the setting off,
   or every record after `from_state`, which stores no keys). A record with a key is
   acquired only when no record of that key is ACQUIRED by an earlier acquisition and
   every lower in-flight record of the key is final (ARCHIVING counts: it is never
   delivered again) or acquired by this same acquisition: one acquisition may take
   several records of a key, in offset order (`_KeyGate`). A held record is skipped
   like a delayed one, and the records of other keys behind it are acquired; a new
   record held joins the window AVAILABLE with count 0, its key remembered. A released
   or expired record is thus the next of its key delivered (the lowest unfinished).
   Null-key records are not ordered. A hash collision only orders two keys together.
   An unfinished record whose key is unknown may be of any key: `fetch_offset` starts
   the read at it so its key is learnt before anything behind it is acquired, and an
   acquisition that meets one anyway (no `keys` given) acquires nothing of any key
   behind it (null keys aside) and acquires it only when nothing before is held.

Cost: one small slot object per in-flight offset (at most the bound), and one heap
entry per acquisition or renewal for the lock deadlines (compacted past
`DEADLINE_ENTRIES_PER_LOCK_MAX` times the bound).

`_check_invariants` states the invariants; the tests run it after every operation.
"""

from __future__ import annotations

import bisect
import enum
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from weir.format.errors import ErrorCode
from weir.sharecoord.share_state import NO_DEAD_LETTER_MARK, RecordState, ShareState, StateBatch

__all__ = [
    "KEY_UNKNOWN",
    "PARTITION_MAX_RECORD_LOCKS_MAX",
    "AckBatch",
    "AckOutcome",
    "AcknowledgeType",
    "AcquiredRange",
    "Acquisition",
    "ArchiveReason",
    "Archived",
    "LogBatch",
    "QueueDepth",
    "RecordState",
    "RecordTimes",
    "SharePartition",
    "ShareSettings",
    "TimeOutcome",
]

# The largest `share.partition.max.record.locks` Weir accepts: the window's memory
# bound (one slot per offset). Kafka's own ceiling config defaults to 4,000.
PARTITION_MAX_RECORD_LOCKS_MAX = 10_000
# Lock-deadline heap entries per record lock before the heap is rebuilt from the
# window (stale entries pile up when records are acknowledged before their deadline).
DEADLINE_ENTRIES_PER_LOCK_MAX = 4
# Kafka 4.4's throttled redelivery starts at max(2, ceil(limit / 2)) deliveries.
THROTTLE_DELIVERY_COUNT_MIN = 2
# A backoff doubles at most this many times (beyond, the cap has long been reached).
BACKOFF_DOUBLINGS_MAX = 40


class AcknowledgeType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge AcknowledgeTypes."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class _KeyUnknown(enum.Enum):
    UNKNOWN = "unknown"


# A slot whose record's key was not read yet (rule 11): it may be any key.
KEY_UNKNOWN: Final = _KeyUnknown.UNKNOWN
# A record's key as a slot remembers it: a hash of its bytes, None for a null key.
SlotKey = int | None | Literal[_KeyUnknown.UNKNOWN]


class ArchiveReason(enum.Enum):
    REJECTED = "rejected"
    DELIVERY_LIMIT = "delivery_limit"
    EXPIRED = "expired"  # older than its TTL when acquisition reached it (rule 10)


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
    # weir.share.release.backoff.initial.ms (0: no backoff, Kafka's behaviour) and
    # .max.ms (already capped by the broker's share_delivery_delay_max_ms).
    release_backoff_initial_ms: int = 0
    release_backoff_max_ms: int = 0
    # weir.share.key.ordering.enable: one acquisition at a time per record key (rule 11).
    key_ordering: bool = False

    def __post_init__(self) -> None:
        assert self.record_lock_duration_ms > 0, self
        assert self.delivery_count_limit >= 1, self
        assert 1 <= self.partition_max_record_locks <= PARTITION_MAX_RECORD_LOCKS_MAX, self
        assert self.release_backoff_initial_ms >= 0 and self.release_backoff_max_ms >= 0, self

    def release_backoff_ms(self, delivery_count: int) -> int:
        """How long a record released (or whose lock expired) after `delivery_count`
        deliveries stays invisible: the initial backoff, doubled per delivery after
        the first, capped at the maximum (rule 10)."""
        initial = self.release_backoff_initial_ms
        if initial <= 0 or delivery_count <= 0:
            return 0
        doublings = min(delivery_count - 1, BACKOFF_DOUBLINGS_MAX)
        return min(initial << doublings, self.release_backoff_max_ms)

    @property
    def throttle_delivery_count(self) -> int:
        """Deliveries from which redelivery is throttled (rule 5)."""
        return max(THROTTLE_DELIVERY_COUNT_MIN, -(-self.delivery_count_limit // 2))


@dataclass(frozen=True)
class LogBatch:
    """A record batch the driver read from the log (offsets inclusive).
    `expires_ms`: every record of it expires at or before this (epoch ms; rule 10)."""

    base_offset: int
    last_offset: int
    expires_ms: int | None = None


@dataclass(frozen=True)
class RecordTimes:
    """When one record may be delivered (rule 10): not before `visible_ms` (epoch ms;
    0: at once), and never from `expires_ms` on (None: never expires)."""

    visible_ms: int = 0
    expires_ms: int | None = None


@dataclass(frozen=True)
class Acquisition:
    """What `acquire_records` did: the AcquiredRecords, the records it archived as
    expired (to dead-letter), and how many records it left for later: delayed (rule
    10), or held behind an earlier record of their key (rule 11)."""

    acquired: list[AcquiredRange]
    archived: tuple[Archived, ...] = ()
    delayed: int = 0
    held: int = 0


@dataclass(frozen=True)
class TimeOutcome:
    """What `pass_time` did: records archived at the delivery limit, whether locks
    expired (the state changed: store it) and whether delayed records became
    visible (wake the parked fetches; nothing to store)."""

    archived: list[Archived]
    locks_expired: bool
    made_visible: bool


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
    fetched up to the log end the caller gives; `delayed`, AVAILABLE records known
    not to be visible yet (a delay header or a release backoff; not counted in
    `available`); `archiving`, the archived records still waiting for their dead
    letters (counted in `archived` too)."""

    start_offset: int
    available: int
    acquired: int
    acknowledged: int
    archived: int
    delayed: int = 0
    archiving: int = 0


class _Slot:
    """One in-flight offset (internal, mutable: the hot path)."""

    __slots__ = ("deadline_ms", "delivery_count", "key", "owner", "state", "visible_ms")

    def __init__(self, state: RecordState, delivery_count: int) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.owner: str | None = None
        self.deadline_ms: int | None = None
        # AVAILABLE only: not delivered before this (epoch ms); 0 once visible (rule 10).
        self.visible_ms = 0
        # The record's key, once a read under key ordering covered it (rule 11).
        self.key: SlotKey = KEY_UNKNOWN

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


class _KeyGate:
    """The keys one acquisition may not take (rule 11): those with a record ACQUIRED
    before it, or a lower unfinished record it did not acquire."""

    __slots__ = ("all_held", "held")

    def __init__(self) -> None:
        self.held: set[int] = set()
        # An unfinished record of unknown key was met: it may be of any key.
        self.all_held = False

    def hold(self, key: SlotKey) -> None:
        """A record of `key` is unfinished and not acquired by this acquisition."""
        if key is KEY_UNKNOWN:
            self.all_held = True
        elif key is not None:
            self.held.add(key)

    def allows(self, key: SlotKey) -> bool:
        if key is None:
            return True  # null keys are not ordered
        if self.all_held:
            return False
        if key is KEY_UNKNOWN:
            return not self.held
        return key not in self.held


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
    # (visible_ms, offset) per delayed AVAILABLE record (rule 10); stale entries
    # (acquired, finished, or delayed again since) are skipped when met.
    _visible: list[tuple[int, int]] = field(default_factory=list)
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
        delayed = []
        for batch in state.batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                slot = slots[offset - state.start_offset] = _Slot(batch.state, batch.delivery_count)
                if batch.visible_ms:
                    slot.visible_ms = batch.visible_ms
                    delayed.append((batch.visible_ms, offset))
        partition._slots = slots
        heapq.heapify(delayed)
        partition._visible = delayed
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

    def fetch_offset(self, now_ms: int | None = None) -> int | None:
        """Where the driver reads the log from next: the first AVAILABLE in-flight
        offset not known to be delayed at `now_ms` (rule 10; without it, until
        `pass_time` clears its visible time), else the in-flight end; None when there
        is none and the window is full (Kafka's `canAcquireRecords` false).

        Under key ordering (rule 11), records held by their key are passed over too,
        and an unfinished record whose key is unknown is returned (the read learns it)."""
        if self.settings.key_ordering:
            return self._keyed_fetch_offset(now_ms)
        for index, slot in enumerate(self._slots):
            if slot.state is RecordState.AVAILABLE and (
                not slot.visible_ms or (now_ms is not None and slot.visible_ms <= now_ms)
            ):
                return self.start_offset + index
        if len(self._slots) >= self._span_max():
            return None
        return self.in_flight_end

    def _keyed_fetch_offset(self, now_ms: int | None) -> int | None:
        gate = self._acquired_keys()
        for index, slot in enumerate(self._slots):
            state = slot.state
            if state is not RecordState.AVAILABLE and state is not RecordState.ACQUIRED:
                continue  # final, or ARCHIVING: never delivered again
            if slot.key is KEY_UNKNOWN:
                return self.start_offset + index
            if (
                state is RecordState.AVAILABLE
                and (not slot.visible_ms or (now_ms is not None and slot.visible_ms <= now_ms))
                and gate.allows(slot.key)
            ):
                return self.start_offset + index
            gate.hold(slot.key)
        if len(self._slots) >= self._span_max():
            return None
        return self.in_flight_end

    def _acquired_keys(self, below: int = 0) -> _KeyGate:
        """A gate holding the keys of the ACQUIRED records, and of the AVAILABLE records
        below offset `below` (rule 11)."""
        gate = _KeyGate()
        below_index = below - self.start_offset
        for index, slot in enumerate(self._slots):
            if slot.state is RecordState.ACQUIRED or (
                index < below_index and slot.state is RecordState.AVAILABLE
            ):
                gate.hold(slot.key)
        return gate

    def _learn_keys(self, plan: _Plan, first: int) -> None:
        """Remember the keys of the in-flight records the read covers from `first`
        (rule 11); an offset no batch holds has no record, so no key (None)."""
        keys = plan.keys
        if keys is None:
            return
        start = self.start_offset
        last = min(plan.batches[-1].last_offset, self.in_flight_end - 1)
        slots = self._slots
        for offset in range(max(first, start), last + 1):
            slots[offset - start].key = keys.get(offset)

    def next_deadline_ms(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED record or visible time of a
        delayed one (stale entries dropped): when `pass_time` has work."""
        lock_ms = None
        while self._deadlines:
            deadline_ms, first, last = self._deadlines[0]
            if self._holds_deadline(deadline_ms, first, last):
                lock_ms = deadline_ms
                break
            heapq.heappop(self._deadlines)
        visible_ms = self._next_visible_ms()
        if visible_ms is None or (lock_ms is not None and lock_ms <= visible_ms):
            return lock_ms
        return visible_ms

    def _next_visible_ms(self) -> int | None:
        while self._visible:
            visible_ms, offset = self._visible[0]
            if self._delayed_until(offset, visible_ms):
                return visible_ms
            heapq.heappop(self._visible)
        return None

    def _delayed_until(self, offset: int, visible_ms: int) -> bool:
        if not self.start_offset <= offset < self.in_flight_end:
            return False
        slot = self._slots[offset - self.start_offset]
        return slot.state is RecordState.AVAILABLE and slot.visible_ms == visible_ms

    def depth(self, end_offset: int) -> QueueDepth:
        """Records by state; `end_offset` is the log's end (what the group may read)."""
        counts = dict.fromkeys(RecordState, 0)
        delayed = 0
        for slot in self._slots:
            if slot.visible_ms:
                delayed += 1
            elif not slot.is_gap():
                counts[slot.state] += 1
        unfetched = max(0, end_offset - self.in_flight_end)
        return QueueDepth(
            self.start_offset,
            counts[RecordState.AVAILABLE] + unfetched,
            counts[RecordState.ACQUIRED],
            counts[RecordState.ACKNOWLEDGED],
            counts[RecordState.ARCHIVED] + counts[RecordState.ARCHIVING],
            delayed,
            counts[RecordState.ARCHIVING],
        )

    def delivery_counts(self, end_offset: int) -> dict[int, int]:
        """The records the group has not finished with (available, delayed or
        acquired) by delivery count; those not yet fetched, up to `end_offset`,
        count 0 deliveries."""
        histogram: dict[int, int] = {}
        for slot in self._slots:
            if slot.state in (RecordState.AVAILABLE, RecordState.ACQUIRED):
                histogram[slot.delivery_count] = histogram.get(slot.delivery_count, 0) + 1
        unfetched = max(0, end_offset - self.in_flight_end)
        if unfetched:
            histogram[0] = histogram.get(0, 0) + unfetched
        return dict(sorted(histogram.items()))

    def state(self) -> ShareState:
        """What `__share_group_state` must hold (ACQUIRED stored as AVAILABLE; a
        backoff's visible time kept, a never-delivered record's delay not: rule 10)."""
        batches: list[StateBatch] = []
        for index, slot in enumerate(self._slots):
            stored = RecordState.AVAILABLE if slot.state is RecordState.ACQUIRED else slot.state
            if stored is RecordState.AVAILABLE and slot.delivery_count == 0:
                continue
            offset = self.start_offset + index
            count, visible_ms = slot.delivery_count, slot.visible_ms
            prev = batches[-1] if batches else None
            if (
                prev is not None
                and prev.last_offset + 1 == offset
                and prev.state is stored
                and prev.delivery_count == count
                and prev.visible_ms == visible_ms
            ):
                batches[-1] = StateBatch(prev.first_offset, offset, stored, count, visible_ms)
            else:
                batches.append(StateBatch(offset, offset, stored, count, visible_ms))
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
        instead of being offered again, so it cannot stall `fetch_offset()`.

        Records known to be delayed by a release backoff are skipped (rule 10);
        `acquire_records` also takes the times read from the records."""
        return self.acquire_records(
            member_id,
            batches,
            max_records=max_records,
            record_limit=record_limit,
            read_offset=read_offset,
            now_ms=now_ms,
        ).acquired

    def acquire_records(
        self,
        member_id: str,
        batches: Sequence[LogBatch],
        *,
        max_records: int,
        record_limit: bool,
        read_offset: int,
        now_ms: int,
        times: Mapping[int, RecordTimes] | None = None,
        keys: Mapping[int, int] | None = None,
    ) -> Acquisition:
        """`acquire`, with when each record may be delivered (rule 10): `times` for
        the records that have a visible time or an expiry (the others have neither),
        and `LogBatch.expires_ms`. Delayed records are left AVAILABLE and the records
        behind them acquired; expired ones are archived (reason EXPIRED).

        `keys` (read only under key ordering, rule 11): a hash of each read record's
        key, by offset, records with a null key left out; None: the keys were not
        read (every record of the read may be of any key). Records held by their key
        are left AVAILABLE and counted in `held`."""
        assert member_id, "a record is acquired by a member"
        _assert_batches_in_order(batches)
        if max_records <= 0 or not batches:
            return Acquisition([])
        first = max(min(read_offset, batches[0].base_offset), self.start_offset)
        last = batches[-1].last_offset
        if last < first:
            return Acquisition([])
        deadline_ms = now_ms + self.settings.record_lock_duration_ms
        acquired = _AcquiredRanges()
        plan = _Plan(batches, max_records, record_limit, read_offset, now_ms, times or {})
        if self.settings.key_ordering:
            plan.keys = keys
            self._learn_keys(plan, first)
            plan.gate = self._acquired_keys(below=first)
        offset = self._reacquire(
            member_id, first, min(last, self.in_flight_end - 1), deadline_ms, acquired, plan
        )
        if offset is not None and not plan.stopped:
            new_first = max(offset, self.in_flight_end, batches[0].base_offset)
            if plan.timed or plan.gate is not None:
                self._acquire_new_timed(member_id, new_first, last, deadline_ms, acquired, plan)
            else:
                self._acquire_new(member_id, new_first, last, deadline_ms, acquired, plan)
        if acquired.ranges:
            lowest, highest = acquired.ranges[0].first_offset, acquired.ranges[-1].last_offset
            self._push_deadline(deadline_ms, lowest, highest)
        self._advance_past_final()  # gaps finished at the head
        return Acquisition(acquired.ranges, tuple(plan.archived.ranges), plan.delayed, plan.held)

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
            if slot.state is RecordState.AVAILABLE and not self._deliverable(offset, slot, plan):
                offset += 1
                continue
            if slot.state is RecordState.AVAILABLE:
                if not self._key_allows(slot, plan):
                    offset += 1
                    continue
                last_attempt = slot.delivery_count + 1 >= limit
                throttled = slot.delivery_count >= throttle
                if acquired.count > 0 and (last_attempt or (throttled and not plan.throttled)):
                    plan.stopped = True
                    return None
                assert slot.owner is None, (offset, slot.owner)
                slot.state = RecordState.ACQUIRED
                slot.visible_ms = 0
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

    def _acquire_new_timed(
        self,
        member_id: str,
        first: int,
        last: int,
        deadline_ms: int,
        acquired: _AcquiredRanges,
        plan: _Plan,
    ) -> None:
        """`_acquire_new` record by record, for a read with times (rule 10) or under
        key ordering (rule 11): a delayed or held record joins the window AVAILABLE
        (count 0) and an expired one ARCHIVED, and acquisition goes on behind them."""
        end = self.in_flight_end
        if first > end and not self._slots:
            self.start_offset = first
            end = first
        room = self._span_max() - (first - self.start_offset)
        if room <= 0 or last < first:
            return
        self._slots.extend(_Slot(RecordState.ARCHIVED, 0) for _ in range(first - end))
        for offset in range(first, min(last, first + room - 1) + 1):
            if not plan.room_at(offset, acquired.count):
                return
            slot = _Slot(RecordState.AVAILABLE, 0)
            self._slots.append(slot)
            if plan.gate is not None:
                slot.key = plan.key_of(offset)
            if not self._deliverable(offset, slot, plan) or not self._key_allows(slot, plan):
                continue
            slot.state = RecordState.ACQUIRED
            slot.delivery_count = 1
            slot.owner = member_id
            slot.deadline_ms = deadline_ms
            acquired.add(offset, offset, 1)
            plan.note_acquired(offset, acquired.count)

    def _deliverable(self, offset: int, slot: _Slot, plan: _Plan) -> bool:
        """Whether the AVAILABLE record at `offset` may be acquired now; if not, it
        is archived as expired or left delayed (rule 10)."""
        now_ms = plan.now_ms
        times = plan.times_of(offset) if plan.timed else None
        if times is not None and times.expires_ms is not None and times.expires_ms <= now_ms:
            self._archive(offset, slot, ArchiveReason.EXPIRED, plan.archived)
            return False
        visible_ms = slot.visible_ms
        if times is not None and times.visible_ms > visible_ms:
            visible_ms = times.visible_ms
        if visible_ms <= now_ms:
            return True
        if visible_ms != slot.visible_ms:
            self._delay(offset, slot, visible_ms)
        plan.delayed += 1
        if plan.gate is not None:
            plan.gate.hold(slot.key)  # the later records of its key wait for it (rule 11)
        return False

    def _key_allows(self, slot: _Slot, plan: _Plan) -> bool:
        """Whether the AVAILABLE record's key lets it be acquired by this acquisition
        (rule 11); if not, it is held, and so are the later records of its key."""
        gate = plan.gate
        if gate is None:
            return True
        if gate.allows(slot.key):
            return True
        gate.hold(slot.key)
        plan.held += 1
        return False

    def _delay(self, offset: int, slot: _Slot, visible_ms: int) -> None:
        """The AVAILABLE record at `offset` is not delivered before `visible_ms`."""
        slot.visible_ms = visible_ms
        heapq.heappush(self._visible, (visible_ms, offset))
        if len(self._visible) > DEADLINE_ENTRIES_PER_LOCK_MAX * self._span_max():
            self._visible = [
                (s.visible_ms, self.start_offset + i)
                for i, s in enumerate(self._slots)
                if s.state is RecordState.AVAILABLE and s.visible_ms
            ]
            heapq.heapify(self._visible)

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
        self,
        member_id: str,
        batches: Sequence[AckBatch],
        now_ms: int,
        *,
        renew_lock_ms: int | None = None,
    ) -> AckOutcome:
        """A request's acknowledgement batches for this partition, all or nothing.
        `renew_lock_ms`: a RENEW's lock runs this long (and RENEW is allowed whatever
        the group's setting: a Weir HTTP queue's visibility change) instead of the
        group's record lock duration."""
        refusal = _request_problem(batches) or self._state_problem(
            member_id, batches, renew_allowed=renew_lock_ms is not None
        )
        if refusal is not None:
            return AckOutcome(refusal[0], (), refusal[1])
        archived = _ArchivedRanges()
        lock_ms = self.settings.record_lock_duration_ms if renew_lock_ms is None else renew_lock_ms
        for batch in batches:
            self._apply(member_id, batch, now_ms, archived, lock_ms)
        self._advance_past_final()
        return AckOutcome(ErrorCode.NONE, tuple(archived.ranges))

    def _state_problem(
        self, member_id: str, batches: Sequence[AckBatch], *, renew_allowed: bool = False
    ) -> tuple[ErrorCode, str] | None:
        for batch in batches:
            if batch.last_offset < self.start_offset:
                continue  # done already: skipped (Kafka too)
            if not self._slots:
                return ErrorCode.INVALID_RECORD_STATE, "no records are in flight"
            first = max(batch.first_offset, self.start_offset)
            if first >= self.in_flight_end or batch.last_offset >= self.in_flight_end:
                return ErrorCode.INVALID_REQUEST, "the batch reaches past the acquired records"
            renewable = renew_allowed or self.settings.renew_acknowledge_enabled
            if AcknowledgeType.RENEW in batch.types and not renewable:
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
        self,
        member_id: str,
        batch: AckBatch,
        now_ms: int,
        archived: _ArchivedRanges,
        lock_ms: int,
    ) -> None:
        first = max(batch.first_offset, self.start_offset)
        renewed_ms = now_ms + lock_ms
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
                self._release(offset, slot, archived, backoff_from_ms=now_ms)
            elif kind == AcknowledgeType.REJECT:
                self._archive(offset, slot, ArchiveReason.REJECTED, archived)
            else:  # GAP: no record at this offset, nothing to dead-letter
                _finish(slot, RecordState.ARCHIVED)
        if renewed:
            self._push_deadline(renewed_ms, first, batch.last_offset)

    def hold_from(
        self,
        member_id: str,
        acquired: Sequence[AcquiredRange],
        now_ms: int,
        lock_ms: int | None = None,
    ) -> list[AcquiredRange]:
        """What of `acquired` a share fetch answers at `now_ms`, its state stored (which
        a moving share coordinator can hold for seconds): the parts `member_id` still
        holds at those delivery counts, their locks restarted at `now_ms` so the member
        has a whole lock (of `lock_ms`, or the group's record lock duration) from the
        answer on; the rest expired meanwhile (another member may have it) and is left
        out."""
        kept = _AcquiredRanges()
        for acquired_range in acquired:
            count = acquired_range.delivery_count
            for offset in range(acquired_range.first_offset, acquired_range.last_offset + 1):
                if self.record_state(offset) == (RecordState.ACQUIRED, count, member_id):
                    kept.add(offset, offset, count)
        deadline_ms = now_ms + (
            self.settings.record_lock_duration_ms if lock_ms is None else lock_ms
        )
        for held in kept.ranges:
            for offset in range(held.first_offset, held.last_offset + 1):
                self._slots[offset - self.start_offset].deadline_ms = deadline_ms
            self._push_deadline(deadline_ms, held.first_offset, held.last_offset)
        return kept.ranges

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
        return self.pass_time(now_ms).archived

    def pass_time(self, now_ms: int) -> TimeOutcome:
        """Time reached `now_ms`: locks whose deadline passed are released (rule 7,
        with the backoff of rule 10), and delayed records whose visible time passed
        are visible again."""
        made_visible = False
        while self._visible and self._visible[0][0] <= now_ms:
            visible_ms, offset = heapq.heappop(self._visible)
            if self._delayed_until(offset, visible_ms):
                self._slots[offset - self.start_offset].visible_ms = 0
                made_visible = True
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
            slot = self._slots[offset - self.start_offset]
            self._release(offset, slot, archived, backoff_from_ms=now_ms)
        self._advance_past_final()
        return TimeOutcome(archived.ranges, bool(expired), made_visible)

    def _release(
        self,
        offset: int,
        slot: _Slot,
        archived: _ArchivedRanges,
        *,
        backoff_from_ms: int | None = None,
    ) -> None:
        """Back to AVAILABLE (after the release backoff from `backoff_from_ms`, if
        given and the group has one), or ARCHIVED at the delivery limit."""
        if slot.delivery_count >= self.settings.delivery_count_limit:
            self._archive(offset, slot, ArchiveReason.DELIVERY_LIMIT, archived)
            return
        _finish(slot, RecordState.AVAILABLE)
        if backoff_from_ms is not None:
            backoff_ms = self.settings.release_backoff_ms(slot.delivery_count)
            if backoff_ms > 0:
                self._delay(offset, slot, backoff_from_ms + backoff_ms)

    def _archive(
        self, offset: int, slot: _Slot, reason: ArchiveReason, archived: _ArchivedRanges
    ) -> None:
        """REJECT, the delivery limit or expiry: ARCHIVED, or ARCHIVING until
        dead-lettered."""
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
            if reason is None:  # loaded: derived from the count (rule 10)
                reason = _loaded_reason(slot.delivery_count, limit)
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
        scheduled = set(self._visible)
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
            if slot.state is RecordState.AVAILABLE:
                assert slot.delivery_count < settings.delivery_count_limit, offset
                assert slot.visible_ms >= 0, offset
                if slot.visible_ms:
                    assert (slot.visible_ms, offset) in scheduled, (offset, "delay not scheduled")
            else:
                assert slot.visible_ms == 0, (offset, "a delayed record that is not AVAILABLE")
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
    now_ms: int = 0
    # The records' times (rule 10): per record, and per batch (`LogBatch.expires_ms`).
    times: Mapping[int, RecordTimes] = field(default_factory=dict)
    # Batch-optimized mode: once max_records is reached, go on to this offset
    # (the end of the log batch holding the last record acquired).
    stop_offset: int | None = None
    stopped: bool = False
    # The acquisition started with a throttled record (rule 5).
    throttled: bool = False
    # Records archived as expired, and left for later, by this acquisition.
    archived: _ArchivedRanges = field(default_factory=lambda: _ArchivedRanges())
    delayed: int = 0
    # Whether any record of the read has a time (else the untimed, faster path).
    timed: bool = False
    # Key ordering (rule 11): the read's keys (None: not read), and the keys held.
    keys: Mapping[int, int] | None = None
    gate: _KeyGate | None = None
    held: int = 0
    _batch_expiry: bool = False
    _bases: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._bases = [b.base_offset for b in self.batches]
        self._batch_expiry = any(b.expires_ms is not None for b in self.batches)
        self.timed = bool(self.times) or self._batch_expiry

    def times_of(self, offset: int) -> RecordTimes | None:
        """The record's times, its batch's expiry included."""
        found = self.times.get(offset)
        if not self._batch_expiry:
            return found
        index = bisect.bisect_right(self._bases, offset) - 1
        batch = self.batches[index] if index >= 0 else None
        if batch is None or offset > batch.last_offset or batch.expires_ms is None:
            return found
        if found is None:
            return RecordTimes(expires_ms=batch.expires_ms)
        if found.expires_ms is not None and found.expires_ms <= batch.expires_ms:
            return found
        return RecordTimes(found.visible_ms, batch.expires_ms)

    def key_of(self, offset: int) -> SlotKey:
        """A read record's key (rule 11): its hash, None for a null key."""
        if self.keys is None:
            return KEY_UNKNOWN
        return self.keys.get(offset)

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


def _loaded_reason(delivery_count: int, limit: int) -> ArchiveReason:
    """Why a loaded ARCHIVING record was archived: at the limit DELIVERY_LIMIT (as
    Kafka 4.4 derives it), never delivered EXPIRED (nothing else archives a record
    with no delivery), else REJECTED."""
    if delivery_count >= limit:
        return ArchiveReason.DELIVERY_LIMIT
    if delivery_count == 0:
        return ArchiveReason.EXPIRED
    return ArchiveReason.REJECTED


def _finish(slot: _Slot, state: RecordState) -> None:
    slot.state = state
    slot.owner = None
    slot.deadline_ms = None
    slot.visible_ms = 0


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
