"""Delayed delivery, release backoff and expiry on a share partition (rule 10 of
weir/sharecoord/share_partition.py) and the record times the driver reads
(weir/sharecoord/delivery_times.py). Time is a plain argument."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping

import pytest

from weir.broker.coordinators.share_partitions import partition_settings
from weir.format.compression import Codec
from weir.format.record_batch import build_batch
from weir.groupcoord.group_configs import (
    InvalidGroupConfig,
    share_group_config_of,
    validate_group_configs,
)
from weir.groupcoord.settings import GroupSettings
from weir.sharecoord.delivery_times import DeliveryPolicy, delivery_times, record_times
from weir.sharecoord.share_partition import (
    AcknowledgeType,
    AcquiredRange,
    Acquisition,
    Archived,
    ArchiveReason,
    LogBatch,
    RecordState,
    RecordTimes,
    SharePartition,
    ShareSettings,
)
from weir.sharecoord.share_state import (
    ShareStateKey,
    decode_share_snapshot_value,
    encode_share_snapshot,
)

A, B = "member-a", "member-b"
LOCK_MS = 30_000
SETTINGS = ShareSettings(record_lock_duration_ms=LOCK_MS, delivery_count_limit=10)
BACKOFF = ShareSettings(
    record_lock_duration_ms=LOCK_MS,
    delivery_count_limit=10,
    release_backoff_initial_ms=1_000,
    release_backoff_max_ms=5_000,
)
RELEASE, ACCEPT = AcknowledgeType.RELEASE, AcknowledgeType.ACCEPT
T0 = 1_700_000_000_000


def fetch(
    partition: SharePartition,
    log: list[LogBatch],
    now_ms: int,
    *,
    member: str = A,
    times: Mapping[int, RecordTimes] | None = None,
    max_records: int = 500,
    record_limit: bool = False,
) -> Acquisition:
    """Acquire as the driver does: read the log from fetch_offset(now_ms)."""
    start = partition.fetch_offset(now_ms)
    if start is None:
        return Acquisition([])
    got = partition.acquire_records(
        member,
        [b for b in log if b.last_offset >= start],
        max_records=max_records,
        record_limit=record_limit,
        read_offset=start,
        now_ms=now_ms,
        times=times,
    )
    partition._check_invariants()
    return got


def release(partition: SharePartition, offset: int, now_ms: int, member: str = A) -> None:
    outcome = partition.acknowledge(member, offset, offset, [RELEASE], now_ms)
    assert not outcome.error, outcome
    partition._check_invariants()


def pass_time(partition: SharePartition, now_ms: int) -> None:
    partition.pass_time(now_ms)
    partition._check_invariants()


LOG = [LogBatch(0, 4)]


# -- delayed delivery -----------------------------------------------------------------


def test_a_delayed_record_is_skipped_and_the_records_behind_it_are_delivered():
    p = SharePartition.starting_at(0, SETTINGS)
    got = fetch(p, LOG, T0, times={1: RecordTimes(visible_ms=T0 + 5_000)})
    assert got.acquired == [AcquiredRange(0, 0, 1), AcquiredRange(2, 4, 1)]
    assert got.delayed == 1
    assert p.record_state(1) == (RecordState.AVAILABLE, 0, None)
    depth = p.depth(end_offset=5)
    assert (depth.available, depth.acquired, depth.delayed) == (0, 4, 1)


def test_a_delayed_record_is_not_acquired_before_its_time_and_is_at_it():
    p = SharePartition.starting_at(0, SETTINGS)
    times = {1: RecordTimes(visible_ms=T0 + 5_000)}
    fetch(p, LOG, T0, times=times)
    assert fetch(p, LOG, T0 + 4_999, member=B, times=times).acquired == []
    assert fetch(p, LOG, T0 + 5_000, member=B, times=times).acquired == [AcquiredRange(1, 1, 1)]


def test_the_next_deadline_is_the_earliest_of_locks_and_visible_times():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, LOG, T0, times={3: RecordTimes(visible_ms=T0 + 5_000)})
    assert p.next_deadline_ms() == T0 + 5_000  # before the locks' T0 + 30 s
    p.acknowledge(A, 0, 2, [ACCEPT], T0)
    p.acknowledge(A, 4, 4, [ACCEPT], T0)
    assert p.next_deadline_ms() == T0 + 5_000
    outcome = p.pass_time(T0 + 5_000)
    p._check_invariants()
    assert (outcome.locks_expired, outcome.made_visible, outcome.archived) == (False, True, [])
    assert p.next_deadline_ms() is None
    assert p.depth(end_offset=5).delayed == 0


def test_a_known_delayed_record_is_not_read_again_until_its_time():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, LOG, T0, times={0: RecordTimes(visible_ms=T0 + 5_000)})
    assert p.fetch_offset(T0 + 4_999) == 5  # past the delayed record: nothing to re-read
    assert p.fetch_offset(T0 + 5_000) == 0
    assert p.fetch_offset() == 5  # without a time: until the time has passed
    pass_time(p, T0 + 5_000)
    assert p.fetch_offset() == 0


def test_delayed_records_fill_the_window_up_to_the_in_flight_bound():
    settings = ShareSettings(record_lock_duration_ms=LOCK_MS, partition_max_record_locks=4)
    p = SharePartition.starting_at(0, settings)
    log = [LogBatch(0, 9)]
    times = {o: RecordTimes(visible_ms=T0 + 5_000) for o in range(3)}
    got = fetch(p, log, T0, times=times)
    assert got.acquired == [AcquiredRange(3, 3, 1)]  # the fourth record: the bound
    assert p.in_flight_end == 4
    p.acknowledge(A, 3, 3, [ACCEPT], T0)
    assert p.fetch_offset() is None  # full of delayed records: nothing to read
    assert fetch(p, log, T0 + 1, times=times).acquired == []


def test_delayed_records_do_not_count_against_max_records():
    p = SharePartition.starting_at(0, SETTINGS)
    times = {0: RecordTimes(visible_ms=T0 + 1), 1: RecordTimes(visible_ms=T0 + 1)}
    got = fetch(p, LOG, T0, times=times, max_records=2, record_limit=True)
    assert got.acquired == [AcquiredRange(2, 3, 1)]


def test_a_header_delay_is_not_stored_and_is_read_again_after_a_restart():
    p = SharePartition.starting_at(0, SETTINGS)
    times = {1: RecordTimes(visible_ms=T0 + 5_000)}
    fetch(p, LOG, T0, times=times)
    state = p.state()
    assert all(b.visible_ms == 0 for b in state.batches)
    # The loaded window redelivers 0 and 2-4 (count 2) and still holds 1 back.
    reloaded = SharePartition.from_state(state, SETTINGS)
    reloaded._check_invariants()
    got = fetch(reloaded, LOG, T0 + 1, member=B, times=times)
    assert got.acquired == [AcquiredRange(0, 0, 2), AcquiredRange(2, 4, 2)]
    assert reloaded.record_state(1) == (RecordState.AVAILABLE, 0, None)


# -- release backoff -------------------------------------------------------------------


def test_backoff_is_off_by_default_a_released_record_comes_back_at_once():
    p = SharePartition.starting_at(0, SETTINGS)
    fetch(p, LOG, T0)
    release(p, 2, T0)
    assert fetch(p, LOG, T0, member=B).acquired == [AcquiredRange(2, 2, 2)]


def test_backoff_doubles_per_delivery_up_to_its_cap():
    assert [BACKOFF.release_backoff_ms(n) for n in range(1, 6)] == [
        1_000,
        2_000,
        4_000,
        5_000,
        5_000,
    ]
    p = SharePartition.starting_at(0, BACKOFF)
    now = T0
    fetch(p, [LogBatch(0, 0)], now)
    for count, backoff_ms in [(1, 1_000), (2, 2_000), (3, 4_000), (4, 5_000)]:
        release(p, 0, now)
        assert p.next_deadline_ms() == now + backoff_ms
        assert fetch(p, [LogBatch(0, 0)], now + backoff_ms - 1).acquired == []
        now += backoff_ms
        pass_time(p, now)
        assert fetch(p, [LogBatch(0, 0)], now).acquired == [AcquiredRange(0, 0, count + 1)]


def test_backoff_applies_on_lock_expiry_but_not_when_a_member_leaves():
    p = SharePartition.starting_at(0, BACKOFF)
    fetch(p, [LogBatch(0, 1)], T0)
    outcome = p.pass_time(T0 + LOCK_MS)
    p._check_invariants()
    assert outcome.locks_expired
    assert p.next_deadline_ms() == T0 + LOCK_MS + 1_000
    assert fetch(p, [LogBatch(0, 1)], T0 + LOCK_MS).acquired == []
    pass_time(p, T0 + LOCK_MS + 1_000)
    fetch(p, [LogBatch(0, 1)], T0 + LOCK_MS + 1_000)
    p.release_member(A, T0 + LOCK_MS + 1_000)
    p._check_invariants()
    assert fetch(p, [LogBatch(0, 1)], T0 + LOCK_MS + 1_000, member=B).acquired == [
        AcquiredRange(0, 1, 3)
    ]


def test_a_backoff_survives_a_restart_through_the_stored_state():
    p = SharePartition.starting_at(0, BACKOFF)
    fetch(p, LOG, T0)
    release(p, 2, T0)
    key = ShareStateKey("g", uuid.uuid4(), 0)
    _, value = encode_share_snapshot(key, p.state(), create_timestamp_ms=T0, write_timestamp_ms=T0)
    stored = decode_share_snapshot_value(value).state
    assert [b.visible_ms for b in stored.batches if b.first_offset <= 2 <= b.last_offset] == [
        T0 + 1_000
    ]
    loaded = SharePartition.from_state(stored, BACKOFF)
    loaded._check_invariants()
    assert loaded.next_deadline_ms() == T0 + 1_000
    assert loaded.depth(end_offset=5).delayed == 1
    got = fetch(loaded, LOG, T0 + 999, member=B)
    assert [r for r in got.acquired if r.first_offset <= 2 <= r.last_offset] == []
    pass_time(loaded, T0 + 1_000)
    assert fetch(loaded, LOG, T0 + 1_000, member=B).acquired == [AcquiredRange(2, 2, 2)]


def test_a_record_at_the_delivery_limit_is_archived_not_backed_off():
    settings = ShareSettings(
        record_lock_duration_ms=LOCK_MS,
        delivery_count_limit=2,
        release_backoff_initial_ms=1_000,
        release_backoff_max_ms=5_000,
    )
    p = SharePartition.starting_at(0, settings)
    fetch(p, [LogBatch(0, 0)], T0)
    release(p, 0, T0)
    pass_time(p, T0 + 1_000)
    fetch(p, [LogBatch(0, 0)], T0 + 1_000)
    outcome = p.acknowledge(A, 0, 0, [RELEASE], T0 + 1_000)
    assert outcome.archived == (Archived(0, 0, 2, ArchiveReason.DELIVERY_LIMIT),)
    assert p.next_deadline_ms() is None


# -- expiry ------------------------------------------------------------------------------


def test_an_expired_record_is_archived_with_reason_expired_instead_of_delivered():
    p = SharePartition.starting_at(0, SETTINGS)
    got = fetch(p, LOG, T0, times={1: RecordTimes(expires_ms=T0), 2: RecordTimes(expires_ms=T0)})
    assert got.acquired == [AcquiredRange(0, 0, 1), AcquiredRange(3, 4, 1)]
    assert got.archived == (Archived(1, 2, 0, ArchiveReason.EXPIRED),)
    assert p.record_state(1) == (RecordState.ARCHIVED, 0, None)


def test_a_record_not_yet_expired_is_delivered():
    p = SharePartition.starting_at(0, SETTINGS)
    got = fetch(p, LOG, T0, times={1: RecordTimes(expires_ms=T0 + 1)})
    assert got.acquired == [AcquiredRange(0, 4, 1)]


def test_a_released_record_that_expired_meanwhile_is_archived_with_its_count():
    p = SharePartition.starting_at(0, SETTINGS)
    times = {2: RecordTimes(expires_ms=T0 + 10)}
    fetch(p, LOG, T0, times=times)
    release(p, 2, T0 + 5)
    got = fetch(p, LOG, T0 + 10, member=B, times=times)
    assert got.acquired == []
    assert got.archived == (Archived(2, 2, 1, ArchiveReason.EXPIRED),)


def test_a_whole_batch_expires_by_its_batch_expiry():
    p = SharePartition.starting_at(0, SETTINGS)
    got = fetch(p, [LogBatch(0, 2, expires_ms=T0), LogBatch(3, 4)], T0)
    assert got.acquired == [AcquiredRange(3, 4, 1)]
    assert got.archived == (Archived(0, 2, 0, ArchiveReason.EXPIRED),)
    assert p.start_offset == 3  # the expired head is done


def test_an_expired_delayed_record_is_archived_not_delayed():
    p = SharePartition.starting_at(0, SETTINGS)
    times = {0: RecordTimes(visible_ms=T0 + 5_000, expires_ms=T0)}
    got = fetch(p, [LogBatch(0, 0)], T0, times=times)
    assert (got.acquired, got.delayed) == ([], 0)
    assert got.archived == (Archived(0, 0, 0, ArchiveReason.EXPIRED),)


# -- the record times the driver reads ---------------------------------------------------

HEADERS = DeliveryPolicy(headers=True, delay_max_ms=900_000)


def test_the_delay_headers_give_a_visible_time_relative_or_absolute():
    assert record_times(T0, [("weir.delay.ms", b"5000")], HEADERS) == RecordTimes(T0 + 5_000)
    assert record_times(T0, [("weir.deliver.at.ms", str(T0 + 7).encode())], HEADERS) == (
        RecordTimes(T0 + 7)
    )
    both = [("weir.delay.ms", b"5000"), ("weir.deliver.at.ms", str(T0 + 7).encode())]
    assert record_times(T0, both, HEADERS) == RecordTimes(T0 + 7)


def test_a_delay_beyond_the_brokers_maximum_is_capped():
    policy = DeliveryPolicy(headers=True, delay_max_ms=60_000)
    assert record_times(T0, [("weir.delay.ms", b"3600000")], policy) == RecordTimes(T0 + 60_000)
    assert record_times(T0, [("weir.delay.ms", b"5000")], DeliveryPolicy(headers=True)) is None


def test_headers_are_ignored_unless_the_group_enables_them_or_malformed():
    assert record_times(T0, [("weir.delay.ms", b"5000")], DeliveryPolicy(delay_max_ms=1)) is None
    for bad in (b"-5", b"5s", b"", b" 5", None, b"9" * 19):
        assert record_times(T0, [("weir.delay.ms", bad)], HEADERS) is None, bad
    assert record_times(-1, [("weir.delay.ms", b"5")], HEADERS) is None  # no timestamp


def test_the_earlier_of_the_ttl_header_and_the_group_ttl_wins():
    policy = DeliveryPolicy(headers=True, record_ttl_ms=10_000)
    assert record_times(T0, [("weir.ttl.ms", b"500")], policy) == RecordTimes(0, T0 + 500)
    assert record_times(T0, [("weir.ttl.ms", b"50000")], policy) == RecordTimes(0, T0 + 10_000)
    assert record_times(T0, [], policy) == RecordTimes(0, T0 + 10_000)


def test_a_topic_ttl_applies_when_shorter_than_the_groups_or_the_group_has_none():
    group = DeliveryPolicy(headers=True, record_ttl_ms=10_000)
    assert group.with_topic_ttl(0) == group
    assert group.with_topic_ttl(20_000) == group
    assert group.with_topic_ttl(5_000).record_ttl_ms == 5_000
    none = DeliveryPolicy()
    assert not none.active
    assert none.with_topic_ttl(5_000).active
    assert none.with_topic_ttl(5_000).record_ttl_ms == 5_000


def batch(base_offset: int, *records: tuple[int, list[tuple[str, bytes | None]]], **kw) -> bytes:
    return build_batch(
        [(b"k", b"v", headers, ts) for ts, headers in records], base_offset=base_offset, **kw
    )


def test_delivery_times_reads_headers_only_for_a_group_that_enables_them():
    log = batch(0, (T0, []), (T0, [("weir.delay.ms", b"5000")])) + batch(2, (T0, []))
    batches, times = delivery_times(log, HEADERS, T0, uncompressed_bytes_max=1 << 20)
    assert batches == [LogBatch(0, 1), LogBatch(2, 2)]
    assert times == {1: RecordTimes(T0 + 5_000)}
    off = DeliveryPolicy(record_ttl_ms=3_600_000, delay_max_ms=900_000)
    assert delivery_times(log, off, T0, uncompressed_bytes_max=1 << 20)[1] == {}


def test_delivery_times_inflates_a_compressed_batch_to_read_its_headers():
    log = batch(0, (T0, [("weir.ttl.ms", b"1")]), compression=Codec.GZIP)
    _, times = delivery_times(log, HEADERS, T0, uncompressed_bytes_max=1 << 20)
    assert times == {0: RecordTimes(0, T0 + 1)}


def test_a_group_ttl_decides_whole_batches_by_their_timestamps_and_decodes_the_boundary():
    policy = DeliveryPolicy(record_ttl_ms=1_000)
    log = (
        batch(0, (T0, []), (T0 + 100, []))  # all expired by T0 + 1100
        + batch(2, (T0 + 500, []), (T0 + 2_000, []))  # the boundary inside
        + batch(4, (T0 + 1_500, []))  # none expired
    )
    batches, times = delivery_times(log, policy, T0 + 1_600, uncompressed_bytes_max=1 << 20)
    assert batches == [LogBatch(0, 1, T0 + 1_100), LogBatch(2, 3), LogBatch(4, 4)]
    assert times == {2: RecordTimes(0, T0 + 1_500), 3: RecordTimes(0, T0 + 3_000)}


# -- invariants under random operations ------------------------------------------------


def test_random_delays_backoffs_and_expiries_keep_the_invariants_and_never_deliver_early():
    rng = random.Random(23)
    settings = ShareSettings(
        record_lock_duration_ms=1_000,
        delivery_count_limit=4,
        partition_max_record_locks=12,
        release_backoff_initial_ms=100,
        release_backoff_max_ms=400,
    )
    log = [LogBatch(b, b + 4) for b in range(0, 60, 5)]
    times = {
        o: RecordTimes(
            visible_ms=T0 + rng.choice([0, 0, 300, 2_000]),
            expires_ms=rng.choice([None, None, T0 + 1_500]),
        )
        for o in range(60)
    }
    p = SharePartition.starting_at(0, settings)
    now = T0
    seen = dict.fromkeys(("expired", "delayed", "acquired"), 0)
    for _ in range(400):
        now += rng.randrange(0, 150)
        op = rng.random()
        if op < 0.4:
            got = fetch(p, log, now, member=rng.choice([A, B]), times=times, max_records=3)
            for r in got.acquired:
                for offset in range(r.first_offset, r.last_offset + 1):
                    assert times[offset].visible_ms <= now, (offset, now)
                    expires_ms = times[offset].expires_ms
                    assert expires_ms is None or expires_ms > now, (offset, now)
            assert all(a.reason is ArchiveReason.EXPIRED for a in got.archived)
            seen["expired"] += len(got.archived)
            seen["delayed"] += got.delayed
            seen["acquired"] += len(got.acquired)
        elif op < 0.7:
            member = rng.choice([A, B])
            held = [
                o
                for o in range(p.start_offset, p.in_flight_end)
                if p.record_state(o) == (RecordState.ACQUIRED, p.record_state(o)[1], member)
            ]
            if held:
                offset = rng.choice(held)
                kind = RELEASE if rng.random() < 0.6 else ACCEPT
                assert not p.acknowledge(member, offset, offset, [kind], now).error
                p._check_invariants()
        elif op < 0.9:
            pass_time(p, now)
        elif op < 0.95:
            p.release_member(rng.choice([A, B]), now)
            p._check_invariants()
        else:
            p = SharePartition.from_state(p.state(), settings)
            p._check_invariants()
        deadline = p.next_deadline_ms()
        assert deadline is None or deadline >= T0
    assert all(seen.values()), seen  # every path was taken


# -- the group configs and the broker's maximum ----------------------------------------


def test_the_weir_group_configs_are_off_by_default_and_capped_by_the_brokers_maximum():
    default, warnings = share_group_config_of("g", {}, GroupSettings())
    assert warnings == []
    assert (default.record_headers_enabled, default.record_ttl_ms) == (False, 0)
    assert partition_settings(default).release_backoff_ms(3) == 0  # Kafka's behaviour
    overrides = {
        "weir.share.record.headers.enable": "true",
        "weir.share.record.ttl.ms": "60000",
        "weir.share.release.backoff.initial.ms": "1000",
        "weir.share.release.backoff.max.ms": "600000",
    }
    config, _ = share_group_config_of(
        "g", overrides, GroupSettings(share_delivery_delay_max_ms=10_000)
    )
    assert (config.record_headers_enabled, config.record_ttl_ms) == (True, 60_000)
    settings = partition_settings(config)
    assert [settings.release_backoff_ms(n) for n in (1, 4, 5)] == [1_000, 8_000, 10_000]
    validate_group_configs(overrides, GroupSettings())
    with pytest.raises(InvalidGroupConfig, match="at least 0"):
        validate_group_configs({"weir.share.record.ttl.ms": "-1"}, GroupSettings())
