"""A seeded random walk over the share partition, checked against a model.

Members acquire, acknowledge (every type), renew, let locks expire, leave, and the
partition restarts from its encoded state. After every step the partition's own
invariants hold, and the model checks what clients could observe: a record is held by
one member at a time, its delivery count goes up by one per delivery and never past
the limit, and in the end every record was accepted or archived exactly once (gaps,
offsets with no record, were only ever answered GAP). Any failure replays from its seed.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import pytest

from weir.format.errors import ErrorCode
from weir.sharecoord.share_partition import (
    AckBatch,
    AcknowledgeType,
    Archived,
    ArchiveReason,
    LogBatch,
    RecordState,
    SharePartition,
    ShareSettings,
)
from weir.sharecoord.share_state import (
    ShareStateKey,
    decode_share_snapshot_value,
    encode_share_snapshot,
)

SETTINGS = ShareSettings(
    record_lock_duration_ms=100, delivery_count_limit=3, partition_max_record_locks=20
)
MEMBERS = ("a", "b", "c")
STEPS = 400
DRAIN_STEPS_MAX = 2_000
KEY = ShareStateKey("g", uuid.UUID(int=1), 0)


@dataclass
class Model:
    """What clients have seen, per offset."""

    records: set[int]  # offsets holding a record (the rest are gaps)
    count: dict[int, int] = field(default_factory=dict)
    holder: dict[int, str] = field(default_factory=dict)
    deadline: dict[int, int] = field(default_factory=dict)
    accepted: set[int] = field(default_factory=set)
    archived: dict[int, ArchiveReason] = field(default_factory=dict)
    gaps_done: set[int] = field(default_factory=set)

    def finish(self, offset: int) -> None:
        assert offset not in self.accepted and offset not in self.archived, offset
        self.holder.pop(offset, None)
        self.deadline.pop(offset, None)

    def accept(self, offset: int) -> None:
        self.finish(offset)
        self.accepted.add(offset)

    def archive(self, offset: int, reason: ArchiveReason) -> None:
        self.finish(offset)
        self.archived[offset] = reason

    def give_back(self, offset: int) -> None:
        """Release / expiry / member release: archived at the limit, else available."""
        if self.count[offset] >= SETTINGS.delivery_count_limit:
            self.archive(offset, ArchiveReason.DELIVERY_LIMIT)
        else:
            self.holder.pop(offset)
            self.deadline.pop(offset)


def make_log(rng: random.Random) -> list[LogBatch]:
    log, offset = [], 0
    while offset < 150:
        offset += rng.choice((0, 0, 0, 2))  # sometimes a gap (compacted offsets)
        size = rng.randint(1, 6)
        log.append(LogBatch(offset, offset + size - 1))
        offset += size
    return log


def archived_offsets(
    ranges: list[Archived] | tuple[Archived, ...],
) -> dict[int, tuple[int, ArchiveReason]]:
    out = {}
    for entry in ranges:
        for offset in range(entry.first_offset, entry.last_offset + 1):
            assert offset not in out
            out[offset] = (entry.delivery_count, entry.reason)
    return out


class Walk:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.log = make_log(self.rng)
        self.end = self.log[-1].last_offset + 1
        records = {o for b in self.log for o in range(b.base_offset, b.last_offset + 1)}
        self.model = Model(records)
        self.p = SharePartition.starting_at(0, SETTINGS)
        self.now_ms = 0

    # -- steps --

    def fetch(self, member: str) -> None:
        start = self.p.fetch_offset()
        if start is None:
            return
        read = [b for b in self.log if b.last_offset >= start][: self.rng.randint(1, 4)]
        ranges = self.p.acquire(
            member,
            read,
            max_records=self.rng.randint(1, 12),
            record_limit=self.rng.random() < 0.5,
            read_offset=start,
            now_ms=self.now_ms,
        )
        m = self.model
        for r in ranges:
            for offset in range(r.first_offset, r.last_offset + 1):
                assert offset not in m.holder, (offset, m.holder[offset], member)
                assert offset not in m.accepted and offset not in m.archived, offset
                m.count[offset] = m.count.get(offset, 0) + 1
                assert r.delivery_count == m.count[offset] <= SETTINGS.delivery_count_limit
                m.holder[offset] = member
                m.deadline[offset] = self.now_ms + SETTINGS.record_lock_duration_ms

    def acknowledge(self, member: str) -> None:
        m = self.model
        held = sorted(o for o, h in m.holder.items() if h == member)
        if not held:
            return
        first = self.rng.choice(held)
        last = first
        while last + 1 in m.holder and m.holder[last + 1] == member and self.rng.random() < 0.8:
            last += 1
        types = [self._ack_type(o) for o in range(first, last + 1)]
        if len(set(types)) == 1 and self.rng.random() < 0.5:
            types = types[:1]
        outcome = self.p.acknowledge_batches(
            member, [AckBatch(first, last, tuple(types))], self.now_ms
        )
        assert outcome.error == ErrorCode.NONE, outcome
        expected = {}
        for offset in range(first, last + 1):
            kind = types[0] if len(types) == 1 else types[offset - first]
            if kind == AcknowledgeType.ACCEPT:
                m.accept(offset)
            elif kind == AcknowledgeType.REJECT:
                m.archive(offset, ArchiveReason.REJECTED)
                expected[offset] = (m.count[offset], ArchiveReason.REJECTED)
            elif kind == AcknowledgeType.GAP:
                m.finish(offset)
                m.gaps_done.add(offset)
            elif kind == AcknowledgeType.RELEASE:
                m.give_back(offset)
                if offset in m.archived:
                    expected[offset] = (m.count[offset], ArchiveReason.DELIVERY_LIMIT)
            else:
                m.deadline[offset] = self.now_ms + SETTINGS.record_lock_duration_ms
        assert archived_offsets(outcome.archived) == expected

    def _ack_type(self, offset: int) -> AcknowledgeType:
        if offset not in self.model.records:
            return AcknowledgeType.GAP
        return self.rng.choice(
            (
                AcknowledgeType.ACCEPT,
                AcknowledgeType.ACCEPT,
                AcknowledgeType.RELEASE,
                AcknowledgeType.REJECT,
                AcknowledgeType.RENEW,
            )
        )

    def wrong_member_acknowledges(self) -> None:
        m = self.model
        if not m.holder:
            return
        offset = self.rng.choice(sorted(m.holder))
        intruder = next(x for x in MEMBERS if x != m.holder[offset])
        outcome = self.p.acknowledge(
            intruder, offset, offset, [AcknowledgeType.ACCEPT], self.now_ms
        )
        assert outcome.error == ErrorCode.INVALID_RECORD_STATE

    def expire(self) -> None:
        m = self.model
        archived = self.p.expire_locks(self.now_ms)
        expected = {}
        for offset in sorted(o for o, d in m.deadline.items() if d <= self.now_ms):
            m.give_back(offset)
            if offset in m.archived:
                expected[offset] = (m.count[offset], ArchiveReason.DELIVERY_LIMIT)
        assert archived_offsets(archived) == expected

    def leave(self, member: str) -> None:
        m = self.model
        archived = self.p.release_member(member, self.now_ms)
        expected = {}
        for offset in sorted(o for o, h in m.holder.items() if h == member):
            m.give_back(offset)
            if offset in m.archived:
                expected[offset] = (m.count[offset], ArchiveReason.DELIVERY_LIMIT)
        assert archived_offsets(archived) == expected

    def restart(self) -> None:
        """Failover: the state goes through its record; locks are lost, counts kept."""
        state = self.p.state()
        _, value = encode_share_snapshot(KEY, state, create_timestamp_ms=0, write_timestamp_ms=0)
        assert decode_share_snapshot_value(value).state == state
        self.p = SharePartition.from_state(state, SETTINGS)
        m = self.model
        expected = {}
        for offset in sorted(m.holder):
            if m.count[offset] >= SETTINGS.delivery_count_limit:
                m.archive(offset, ArchiveReason.DELIVERY_LIMIT)
                expected[offset] = (m.count[offset], ArchiveReason.DELIVERY_LIMIT)
            else:
                m.holder.pop(offset)
                m.deadline.pop(offset)
        assert archived_offsets(self.p.archived_at_load) == expected

    # -- checks --

    def check(self) -> None:
        self.p._check_invariants()
        m = self.model
        for offset in range(self.p.start_offset, self.p.in_flight_end):
            state, count, owner = self.p.record_state(offset)
            assert owner == m.holder.get(offset), offset
            if offset in m.records and offset in m.count:
                assert count == m.count[offset], offset
        done = m.accepted | set(m.archived)
        live = (o for o in range(self.p.start_offset) if o in m.records and o in m.count)
        assert all(o in done for o in live), "start moved past a live record"

    def step(self) -> None:
        self.now_ms += self.rng.randint(0, 40)
        member = self.rng.choice(MEMBERS)
        roll = self.rng.random()
        if roll < 0.35:
            self.fetch(member)
        elif roll < 0.75:
            self.acknowledge(member)
        elif roll < 0.85:
            self.expire()
        elif roll < 0.9:
            self.leave(member)
        elif roll < 0.95:
            self.wrong_member_acknowledges()
        else:
            self.restart()
        self.check()

    def drain(self) -> None:
        """A well-behaved consumer finishes the queue."""
        for _ in range(DRAIN_STEPS_MAX):
            if self.p.start_offset >= self.end:
                return
            self.now_ms += 200
            self.expire()
            self.fetch("drainer")
            for offset in sorted(o for o, h in self.model.holder.items() if h == "drainer"):
                kind = (
                    AcknowledgeType.GAP
                    if offset not in self.model.records
                    else AcknowledgeType.ACCEPT
                )
                assert (
                    self.p.acknowledge("drainer", offset, offset, [kind], self.now_ms).error
                    == ErrorCode.NONE
                )
                if kind == AcknowledgeType.GAP:
                    self.model.finish(offset)
                    self.model.gaps_done.add(offset)
                else:
                    self.model.accept(offset)
            self.check()
        raise AssertionError("the queue did not drain")


@pytest.mark.parametrize("seed", range(24))
def test_random_walk_delivers_every_record_to_one_outcome_exactly_once(seed):
    walk = Walk(seed)
    for _ in range(STEPS):
        walk.step()
    walk.drain()
    m = walk.model
    assert walk.p.in_flight_end == walk.p.start_offset == walk.end
    assert m.accepted.isdisjoint(m.archived)
    # Every record ended accepted or archived; offsets without a record only as gaps.
    assert m.accepted | set(m.archived) == m.records
    assert m.gaps_done <= set(range(walk.end)) - m.records
    assert all(c <= SETTINGS.delivery_count_limit for c in m.count.values())
    assert all(
        m.count[o] == SETTINGS.delivery_count_limit
        for o, reason in m.archived.items()
        if reason is ArchiveReason.DELIVERY_LIMIT
    )


def test_a_restarted_partition_keeps_everything_but_locks():
    walk = Walk(99)
    for _ in range(200):
        walk.step()
    before = walk.p
    after = SharePartition.from_state(before.state(), SETTINGS)
    for offset in range(before.start_offset, before.in_flight_end):
        state, count, _ = before.record_state(offset)
        loaded = after.record_state(offset)
        if state is RecordState.ACQUIRED:
            expected_state = (
                RecordState.ARCHIVED
                if count >= SETTINGS.delivery_count_limit
                else RecordState.AVAILABLE
            )
            if loaded is not None:
                assert loaded == (expected_state, count, None)
        elif loaded is not None:
            assert loaded[:2] == (state, count)
    assert after.next_deadline_ms() is None
