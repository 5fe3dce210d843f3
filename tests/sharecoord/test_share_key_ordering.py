"""Per-key ordering on a share partition (rule 11 of weir/sharecoord/share_partition.py,
`weir.share.key.ordering.enable`) and the keys the driver reads
(weir/sharecoord/record_keys.py). Time is a plain argument.

The seeded random histories at the end hold the partition, after every step, to what
per-key ordering promises: no two acquisitions hold records of one key at once, and an
acquisition takes the records of a key lowest first, each only when every lower record
of that key is finished or taken by the same acquisition. Any failure replays from its
seed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from weir.broker.coordinators.share_partitions import partition_settings
from weir.format.compression import Codec
from weir.format.errors import ErrorCode
from weir.format.record_batch import build_batch
from weir.groupcoord.group_configs import share_group_config_of, validate_group_configs
from weir.groupcoord.settings import GroupSettings
from weir.sharecoord.record_keys import record_keys
from weir.sharecoord.share_partition import (
    AckBatch,
    AcknowledgeType,
    AcquiredRange,
    Acquisition,
    LogBatch,
    RecordState,
    RecordTimes,
    SharePartition,
    ShareSettings,
)

A, B, C = "member-a", "member-b", "member-c"
LOCK_MS = 30_000
ORDERED = ShareSettings(record_lock_duration_ms=LOCK_MS, delivery_count_limit=5, key_ordering=True)
ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT
T0 = 1_700_000_000_000
K1, K2, K3 = 101, 202, 303  # key hashes


def log_of(keys: list[int | None], batch_size: int = 1) -> tuple[list[LogBatch], dict[int, int]]:
    """A log of one record per entry of `keys` (None: a null key), in batches."""
    batches = [
        LogBatch(base, min(base + batch_size, len(keys)) - 1)
        for base in range(0, len(keys), batch_size)
    ]
    return batches, {offset: key for offset, key in enumerate(keys) if key is not None}


def fetch(
    partition: SharePartition,
    log: list[LogBatch],
    keys: Mapping[int, int] | None,
    *,
    member: str = A,
    now_ms: int = T0,
    max_records: int = 100,
    batches_max: int = 1_000,
    times: Mapping[int, RecordTimes] | None = None,
) -> Acquisition:
    """What the driver does: read from `fetch_offset` (at most `batches_max` batches),
    hand the read's batches and keys to `acquire_records`."""
    start = partition.fetch_offset(now_ms)
    if start is None:
        return Acquisition([])
    read = [b for b in log if b.last_offset >= start][:batches_max]
    if not read:
        return Acquisition([])
    acquisition = partition.acquire_records(
        member,
        read,
        max_records=max_records,
        record_limit=True,
        read_offset=start,
        now_ms=now_ms,
        times=times,
        keys=keys,
    )
    partition._check_invariants()
    return acquisition


def offsets(ranges: list[AcquiredRange]) -> list[int]:
    return [o for r in ranges for o in range(r.first_offset, r.last_offset + 1)]


def ack(partition: SharePartition, member: str, offset: int, kind: AcknowledgeType) -> None:
    outcome = partition.acknowledge(member, offset, offset, [kind], T0)
    assert outcome.error == ErrorCode.NONE, outcome
    partition._check_invariants()


# -- the rule -----------------------------------------------------------------------


def test_a_key_waits_for_its_acquired_record_while_other_keys_go_on() -> None:
    log, keys = log_of([K1, K1, K2, K1, K3])
    partition = SharePartition.starting_at(0, ORDERED)
    assert offsets(fetch(partition, log, keys, member=A, max_records=1).acquired) == [0]
    second = fetch(partition, log, keys, member=B)
    assert offsets(second.acquired) == [2, 4]  # 1 and 3 (K1) held behind 0
    assert second.held == 2
    assert offsets(fetch(partition, log, keys, member=C).acquired) == []
    ack(partition, A, 0, ACCEPT)
    assert offsets(fetch(partition, log, keys, member=C).acquired) == [1, 3]


def test_one_acquisition_takes_several_records_of_a_key_in_offset_order() -> None:
    log, keys = log_of([K1, K2, K1, K1, K2], batch_size=5)
    partition = SharePartition.starting_at(0, ORDERED)
    assert offsets(fetch(partition, log, keys).acquired) == [0, 1, 2, 3, 4]
    assert offsets(fetch(partition, log, keys, member=B).acquired) == []


def test_a_released_record_is_the_next_of_its_key_delivered() -> None:
    log, keys = log_of([K1, K1, K1])
    partition = SharePartition.starting_at(0, ORDERED)
    assert offsets(fetch(partition, log, keys, max_records=1).acquired) == [0]
    ack(partition, A, 0, RELEASE)
    again = fetch(partition, log, keys, member=B, max_records=2).acquired
    assert again == [AcquiredRange(0, 0, 2), AcquiredRange(1, 1, 1)]


def test_an_expired_lock_makes_its_record_the_next_of_its_key() -> None:
    log, keys = log_of([K1, K1, K2])
    partition = SharePartition.starting_at(0, ORDERED)
    assert offsets(fetch(partition, log, keys, max_records=1).acquired) == [0]
    assert offsets(fetch(partition, log, keys, member=B).acquired) == [2]
    partition.pass_time(T0 + LOCK_MS)
    later = T0 + LOCK_MS + 1
    assert fetch(partition, log, keys, member=C, max_records=1, now_ms=later).acquired == [
        AcquiredRange(0, 0, 2)
    ]


def test_a_record_of_a_key_waits_while_a_later_one_of_that_key_is_still_acquired() -> None:
    """A and B of one key in one acquisition, A released, B still held: A is not
    delivered to anyone until B is finished (one acquisition of a key at a time)."""
    log, keys = log_of([K1, K1])
    partition = SharePartition.starting_at(0, ORDERED)
    assert offsets(fetch(partition, log, keys).acquired) == [0, 1]
    ack(partition, A, 0, RELEASE)
    assert fetch(partition, log, keys, member=B).acquired == []
    ack(partition, A, 1, ACCEPT)
    assert fetch(partition, log, keys, member=B).acquired == [AcquiredRange(0, 0, 2)]


def test_null_keys_are_not_ordered() -> None:
    log, keys = log_of([None, None, K1, None])
    partition = SharePartition.starting_at(0, ORDERED)
    assert offsets(fetch(partition, log, keys, member=A, max_records=1).acquired) == [0]
    assert offsets(fetch(partition, log, keys, member=B, max_records=1).acquired) == [1]
    assert offsets(fetch(partition, log, keys, member=C).acquired) == [2, 3]


def test_rejected_and_archived_records_finish_their_turn() -> None:
    log, keys = log_of([K1, K1, K1])
    settings = ShareSettings(
        record_lock_duration_ms=LOCK_MS, delivery_count_limit=2, key_ordering=True
    )
    partition = SharePartition.starting_at(0, settings)
    assert offsets(fetch(partition, log, keys, max_records=1).acquired) == [0]
    ack(partition, A, 0, REJECT)
    assert offsets(fetch(partition, log, keys, max_records=1).acquired) == [1]
    ack(partition, A, 1, RELEASE)
    assert fetch(partition, log, keys, max_records=1).acquired == [AcquiredRange(1, 1, 2)]
    ack(partition, A, 1, RELEASE)  # the delivery limit: archived
    assert offsets(fetch(partition, log, keys, max_records=1).acquired) == [2]


def test_dead_letter_pending_records_do_not_hold_their_key() -> None:
    settings = ShareSettings(record_lock_duration_ms=LOCK_MS, key_ordering=True, dead_letters=True)
    log, keys = log_of([K1, K1])
    partition = SharePartition.starting_at(0, settings)
    assert offsets(fetch(partition, log, keys, max_records=1).acquired) == [0]
    ack(partition, A, 0, REJECT)
    assert partition.record_state(0) == (RecordState.ARCHIVING, 1, None)
    assert offsets(fetch(partition, log, keys, member=B).acquired) == [1]


def test_a_delayed_record_holds_the_later_records_of_its_key() -> None:
    log, keys = log_of([K1, K1, K2])
    times = {0: RecordTimes(visible_ms=T0 + 5_000)}
    partition = SharePartition.starting_at(0, ORDERED)
    first = fetch(partition, log, keys, times=times)
    assert (offsets(first.acquired), first.delayed, first.held) == ([2], 1, 1)
    partition.pass_time(T0 + 5_000)
    later = fetch(partition, log, keys, member=B, times=times, now_ms=T0 + 5_000)
    assert offsets(later.acquired) == [0, 1]


def test_held_new_records_join_the_window_and_later_reads_start_past_them() -> None:
    log, keys = log_of([K1, K1, K1, K2, K2, K3])
    partition = SharePartition.starting_at(0, ORDERED)
    assert offsets(fetch(partition, log, keys, max_records=1).acquired) == [0]
    # one batch a read: 1 and 2 are seen and held (AVAILABLE, never delivered)
    assert offsets(fetch(partition, log, keys, member=B, batches_max=3).acquired) == [3]
    assert partition.record_state(1) == (RecordState.AVAILABLE, 0, None)
    assert partition.fetch_offset(T0) == 4  # 1, 2 (K1) and 3 (acquired) passed over
    assert offsets(fetch(partition, log, keys, member=C).acquired) == [5]  # 4: K2 is held
    stored = [(b.first_offset, b.last_offset) for b in partition.state().batches]
    assert stored == [(0, 0), (3, 3), (5, 5)]  # the held ones (never delivered): not stored


def test_equal_hashes_are_ordered_together() -> None:
    """Two keys with one hash (a collision) are ordered as one key: held, never mixed."""
    log, keys = log_of([K1, K1])  # think of them as two keys whose hashes collide
    partition = SharePartition.starting_at(0, ORDERED)
    assert offsets(fetch(partition, log, keys, max_records=1).acquired) == [0]
    assert offsets(fetch(partition, log, keys, member=B).acquired) == []


def test_without_the_setting_keys_do_not_matter() -> None:
    log, keys = log_of([K1, K1, K1])
    partition = SharePartition.starting_at(0, ShareSettings(record_lock_duration_ms=LOCK_MS))
    assert offsets(fetch(partition, log, keys, max_records=1).acquired) == [0]
    assert offsets(fetch(partition, log, keys, member=B).acquired) == [1, 2]


# -- keys unknown: a new leader, or the setting turned on ----------------------------


def test_after_a_failover_the_read_starts_at_the_first_unfinished_record_to_learn_keys() -> None:
    """The stored state has no keys. A record released with a backoff is known delayed,
    so without keys the read would start past it and could deliver a later record of
    its key first; with key ordering the new leader reads from it, learns its key and
    holds the later one."""
    settings = ShareSettings(
        record_lock_duration_ms=LOCK_MS,
        key_ordering=True,
        release_backoff_initial_ms=10_000,
        release_backoff_max_ms=10_000,
    )
    log, keys = log_of([K1, K2, K1])
    partition = SharePartition.starting_at(0, settings)
    assert offsets(fetch(partition, log, keys, max_records=2).acquired) == [0, 1]
    partition.acknowledge_batches(A, [AckBatch(0, 1, (RELEASE, ACCEPT))], T0)
    assert partition.record_state(0) == (RecordState.AVAILABLE, 1, None)

    moved = SharePartition.from_state(partition.state(), settings)
    assert moved.fetch_offset(T0 + 1) == 0  # delayed, but its key is unknown: read from it
    later = fetch(moved, log, keys, member=B, now_ms=T0 + 1)
    assert later.acquired == [] and later.delayed == 1 and later.held == 1  # 2 waits for 0
    assert moved.fetch_offset(T0 + 1) == 3  # keys known now: nothing to read before the end
    after_backoff = T0 + 10_000
    moved.pass_time(after_backoff)
    back = fetch(moved, log, keys, member=C, now_ms=after_backoff)
    assert back.acquired == [AcquiredRange(0, 0, 2), AcquiredRange(2, 2, 1)]


def test_turning_the_setting_on_orders_records_already_in_flight() -> None:
    log, keys = log_of([K1, K1])
    unordered = ShareSettings(record_lock_duration_ms=LOCK_MS)
    partition = SharePartition.starting_at(0, unordered)
    assert offsets(fetch(partition, log, keys, max_records=1).acquired) == [0]
    partition.settings = ORDERED  # the group's config changed (keys never read before)
    assert partition.fetch_offset(T0) == 0  # acquired, key unknown: read again to learn it
    assert fetch(partition, log, keys, member=B).acquired == []
    ack(partition, A, 0, ACCEPT)
    assert offsets(fetch(partition, log, keys, member=B).acquired) == [1]


def test_without_keys_an_acquisition_keeps_strict_order() -> None:
    """`keys=None` (the read could not be parsed): every record may be of any key, so
    an acquisition takes records only while nothing before them is held."""
    log, _keys = log_of([K1, K2, K3])
    partition = SharePartition.starting_at(0, ORDERED)
    assert offsets(fetch(partition, log, None, max_records=1).acquired) == [0]
    assert fetch(partition, log, None, member=B).acquired == []
    ack(partition, A, 0, ACCEPT)
    assert offsets(fetch(partition, log, None, member=B).acquired) == [1, 2]


# -- the setting and the driver's keys ----------------------------------------------


def test_the_group_config_turns_key_ordering_on() -> None:
    settings = GroupSettings()
    default, _ = share_group_config_of("g", {}, settings)
    assert not default.key_ordering and not partition_settings(default).key_ordering
    overrides = {"weir.share.key.ordering.enable": "TRUE"}
    validate_group_configs(overrides, settings)
    config, warnings = share_group_config_of("g", overrides, settings)
    assert warnings == [] and partition_settings(config).key_ordering


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP])
def test_record_keys_hashes_each_key_and_leaves_null_keys_out(codec: Codec) -> None:
    first = build_batch([(b"a", b"1", []), (None, b"2", []), (b"b", b"3", [])], compression=codec)
    second = build_batch([(b"a", b"4", [])], base_offset=3, compression=codec)
    keys = record_keys(first + second, uncompressed_bytes_max=1 << 20)
    assert keys == {0: hash(b"a"), 2: hash(b"b"), 3: hash(b"a")}


def test_record_keys_leaves_out_a_batch_that_does_not_decode() -> None:
    good = build_batch([(b"a", b"1", [])])
    bad = bytearray(build_batch([(b"b", b"2", [])], base_offset=1))
    bad[-1] ^= 0xFF  # its CRC fails
    assert record_keys(good + bytes(bad), uncompressed_bytes_max=1 << 20) == {0: hash(b"a")}


# -- seeded random histories ---------------------------------------------------------

KEYS = (K1, K2, K3, 404, None)
MEMBERS = (A, B, C)
STEPS = 500
RANDOM_SETTINGS = ShareSettings(
    record_lock_duration_ms=100,
    delivery_count_limit=4,
    partition_max_record_locks=24,
    key_ordering=True,
    release_backoff_initial_ms=30,  # a released record is delayed: reads may start past it
    release_backoff_max_ms=100,
)


@dataclass
class History:
    """A random history on one share partition, checked after every step."""

    rng: random.Random
    ordered_consumers: bool
    settings: ShareSettings = RANDOM_SETTINGS
    log: list[LogBatch] = field(default_factory=list)
    key_of: dict[int, int | None] = field(default_factory=dict)
    times: dict[int, RecordTimes] = field(default_factory=dict)
    now_ms: int = T0
    # offset -> the acquisition that holds it (cleared when it is not ACQUIRED)
    holder: dict[int, int] = field(default_factory=dict)
    passes: int = 0
    accepted: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        offset = 0
        while offset < 150:
            offset += self.rng.choice((0, 0, 0, 0, 2))  # sometimes a hole (compaction)
            size = self.rng.randint(1, 5)
            self.log.append(LogBatch(offset, offset + size - 1))
            for o in range(offset, offset + size):
                self.key_of[o] = self.rng.choice(KEYS)
                if self.rng.random() < 0.05:
                    self.times[o] = RecordTimes(visible_ms=T0 + self.rng.randint(0, 2_000))
            offset += size
        self.partition = SharePartition.starting_at(0, self.settings)

    @property
    def keys(self) -> dict[int, int]:
        return {o: k for o, k in self.key_of.items() if k is not None}

    def finished(self, offset: int) -> bool:
        if offset < self.partition.start_offset:
            return True
        state = self.partition.record_state(offset)
        return state is not None and state[0] not in (RecordState.AVAILABLE, RecordState.ACQUIRED)

    def acquired_now(self) -> set[int]:
        p = self.partition
        return {
            o
            for o in range(p.start_offset, p.in_flight_end)
            if (state := p.record_state(o)) is not None and state[0] is RecordState.ACQUIRED
        }

    # -- steps --

    def fetch(self) -> None:
        p = self.partition
        start = p.fetch_offset(self.now_ms)
        if start is None:
            return
        read = [b for b in self.log if b.last_offset >= start][: self.rng.randint(1, 6)]
        if not read:
            return
        before = self.acquired_now()
        keys = None if self.rng.random() < 0.05 else self.keys
        acquisition = p.acquire_records(
            self.rng.choice(MEMBERS),
            read,
            max_records=self.rng.randint(1, 10),
            record_limit=self.rng.random() < 0.5,
            read_offset=start,
            now_ms=self.now_ms,
            times=self.times,
            keys=keys,
        )
        self.passes += 1
        taken = offsets(acquisition.acquired)
        for offset in taken:
            key = self.key_of.get(offset)
            if key is None:  # a null key, or a hole the client answers GAP for
                self.holder[offset] = self.passes
                continue
            held_elsewhere = [o for o in before if self.key_of.get(o) == key]
            assert not held_elsewhere, (offset, key, "already acquired", held_elsewhere)
            lower = [o for o in self.key_of if o < offset and self.key_of[o] == key]
            waiting = [o for o in lower if not self.finished(o) and o not in taken]
            assert not waiting, (offset, key, "lower records of its key unfinished", waiting)
            self.holder[offset] = self.passes

    def acknowledge(self) -> None:
        p = self.partition
        held = sorted(self.acquired_now())
        if not held:
            return
        owner = p.record_state(self.rng.choice(held))
        assert owner is not None and owner[2] is not None
        member = owner[2]
        mine = [o for o in held if (s := p.record_state(o)) is not None and s[2] == member]
        if self.ordered_consumers:
            self._acknowledge_in_order(member, mine)
        else:
            first = self.rng.choice(mine)
            kind = self.rng.choice((ACCEPT, ACCEPT, RELEASE, REJECT, AcknowledgeType.RENEW))
            if first not in self.key_of:
                kind = AcknowledgeType.GAP
            outcome = p.acknowledge(member, first, first, [kind], self.now_ms)
            assert outcome.error == ErrorCode.NONE, outcome
            if kind == ACCEPT:
                self.accepted.append(first)

    def _acknowledge_in_order(self, member: str, mine: list[int]) -> None:
        """An ordered consumer: everything it holds, in offset order; once it gives a
        record of a key back, it gives back the rest of that key too (as an SQS FIFO
        consumer stops a message group)."""
        given_back: set[int] = set()
        types = []
        for offset in mine:
            key = self.key_of.get(offset)
            if offset not in self.key_of:
                kind = AcknowledgeType.GAP
            elif key is not None and key in given_back:
                kind = RELEASE
            else:
                kind = self.rng.choice((ACCEPT, ACCEPT, ACCEPT, RELEASE, REJECT))
                if kind == RELEASE and key is not None:
                    given_back.add(key)
            types.append(kind)
        batches = [AckBatch(o, o, (t,)) for o, t in zip(mine, types, strict=True)]
        outcome = self.partition.acknowledge_batches(member, batches, self.now_ms)
        assert outcome.error == ErrorCode.NONE, outcome
        self.accepted += [o for o, t in zip(mine, types, strict=True) if t == ACCEPT]

    def pass_time(self) -> None:
        self.now_ms += self.rng.choice((1, 10, 60, 120))
        self.partition.pass_time(self.now_ms)

    def fail_over(self) -> None:
        """A new leader loads the stored state: no locks, no keys."""
        self.partition = SharePartition.from_state(self.partition.state(), self.settings)

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.45:
            self.fetch()
        elif roll < 0.8:
            self.acknowledge()
        elif roll < 0.97:
            self.pass_time()
        else:
            self.fail_over()
        self.partition._check_invariants()
        self.check()

    def check(self) -> None:
        """No two acquisitions hold records of one key."""
        acquired = self.acquired_now()
        for offset in list(self.holder):
            if offset not in acquired:
                del self.holder[offset]
        by_key: dict[int, set[int]] = {}
        for offset in acquired:
            key = self.key_of.get(offset)
            if key is not None:
                by_key.setdefault(key, set()).add(self.holder[offset])
        assert all(len(p) == 1 for p in by_key.values()), by_key


@pytest.mark.parametrize("seed", range(40))
def test_random_history_acquires_each_key_once_at_a_time_lowest_first(seed: int) -> None:
    history = History(random.Random(seed), ordered_consumers=False)
    for _ in range(STEPS):
        history.step()


@pytest.mark.parametrize("seed", range(40))
def test_random_history_of_ordered_consumers_accepts_each_key_in_offset_order(seed: int) -> None:
    history = History(random.Random(1_000 + seed), ordered_consumers=True)
    for _ in range(STEPS):
        history.step()
    for _ in range(STEPS * 4):  # drain: the consumers take everything that is left
        if history.partition.start_offset > history.log[-1].last_offset:
            break
        history.pass_time()
        history.fetch()
        history.acknowledge()
        history.partition._check_invariants()
        history.check()
    assert history.partition.start_offset > history.log[-1].last_offset, "not drained"
    for key in KEYS:
        if key is None:
            continue
        of_key = [o for o in history.accepted if history.key_of.get(o) == key]
        assert of_key == sorted(of_key), (key, of_key)
