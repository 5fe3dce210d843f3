"""Kafka's client quota rules, with numbers worked out by hand (see weir/security/quotas.py)."""

from __future__ import annotations

import math

import pytest

from weir.security.quotas import (
    ABSENT,
    DEFAULT,
    ClientQuotas,
    EntityKey,
    QuotaType,
    TokenBucket,
    WindowedRate,
    java_round,
    limit_for,
    quota_levels,
    sensor_key,
    strict_mutation_quota,
)

# One quota per level, valued by the level's number in Kafka's precedence list.
ALL_LEVELS: dict[EntityKey, float] = {
    ("alice", "app"): 1,
    ("alice", DEFAULT): 2,
    ("alice", ABSENT): 3,
    (DEFAULT, "app"): 4,
    (DEFAULT, DEFAULT): 5,
    (DEFAULT, ABSENT): 6,
    (ABSENT, "app"): 7,
    (ABSENT, DEFAULT): 8,
}


def _limit(levels: dict[EntityKey, float], user: str, client_id: str) -> float | None:
    return limit_for(levels, sensor_key(levels, user, client_id))


@pytest.mark.parametrize("level", range(1, 9))
def test_the_most_specific_configured_level_wins(level: int) -> None:
    levels = {key: value for key, value in ALL_LEVELS.items() if value >= level}
    assert _limit(levels, "alice", "app") == level


def test_no_matching_level_means_unlimited() -> None:
    levels: dict[EntityKey, float] = {("bob", ABSENT): 10, (ABSENT, "other"): 20}
    assert _limit(levels, "alice", "app") is None
    assert _limit({}, "alice", "app") is None


def test_a_user_quota_is_one_sensor_for_all_the_users_client_ids() -> None:
    levels: dict[EntityKey, float] = {("alice", ABSENT): 10}
    assert sensor_key(levels, "alice", "one") == sensor_key(levels, "alice", "two") == ("alice", "")
    # A client-id default is one sensor per client id.
    levels = {(ABSENT, DEFAULT): 10}
    assert sensor_key(levels, "alice", "one") == ("", "one")
    assert sensor_key(levels, "bob", "one") == ("", "one")
    # A (user, client-id) level measures each pair on its own.
    levels = {(DEFAULT, DEFAULT): 10}
    assert sensor_key(levels, "alice", "one") == ("alice", "one")


def test_an_empty_client_id_matches_only_user_levels() -> None:
    assert _limit({(ABSENT, DEFAULT): 10}, "alice", "") is None
    assert _limit({("alice", ABSENT): 10}, "alice", "") == 10


def test_stored_quotas_become_levels_per_quota_type() -> None:
    stored = {
        (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 100.0},
        (("user", None),): {"consumer_byte_rate": 200.0, "request_percentage": 50.0},
        (("client-id", None),): {"controller_mutation_rate": 2.0},
        (("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0},
    }
    levels = quota_levels(stored)
    assert levels[QuotaType.PRODUCE] == {("alice", "app"): 100.0}
    assert levels[QuotaType.FETCH] == {(DEFAULT, ABSENT): 200.0}
    assert levels[QuotaType.REQUEST] == {(DEFAULT, ABSENT): 50.0}
    assert levels[QuotaType.CONTROLLER_MUTATION] == {(ABSENT, DEFAULT): 2.0}


def test_a_first_window_is_measured_as_ten_windows() -> None:
    rate = WindowedRate()
    rate.record(1000, now_ms=0)
    # Elapsed 0 ms, counted as (11 - 1) whole windows: 1000 / 10 s.
    assert rate.measure(0) == 100.0
    # 500 ms into it: 10.5 s.
    assert rate.measure(500) == pytest.approx(1000 / 10.5)


def test_samples_roll_and_the_oldest_expires() -> None:
    rate = WindowedRate()
    rate.record(1000, now_ms=0)
    rate.record(1000, now_ms=1000)  # a new sample
    # Oldest began at 0: 1500 ms elapsed, one whole window, so 9 more are added.
    assert rate.measure(1500) == pytest.approx(2000 / 10.5)
    for t in range(2000, 12000, 1000):
        rate.record(100, now_ms=t)
    # At 11500 the sample of 0 (last event 0) is 11 windows old: reset. The oldest
    # now began at 1000: 10.5 s elapsed, 10 whole windows; 1000 + 10 * 100 = 2000.
    assert rate.measure(11500) == pytest.approx(2000 / 10.5)
    # At 12000 the sample of 1000 goes too: 10 * 100 over the 10 s since 2000.
    assert rate.measure(12000) == pytest.approx(100.0)
    # Idle for the whole span: nothing left.
    assert rate.measure(40000) == 0.0


def test_a_byte_rate_throttle_is_the_time_back_to_the_quota() -> None:
    quotas = ClientQuotas(QuotaType.PRODUCE, {(ABSENT, "app"): 1000})
    # 5000 bytes at once: 500 B/s over the 10 s of a first window.
    assert quotas.record("alice", "app", 5000, now_ms=0) == 0
    # 15000 more: 2000 B/s; X = (2000 - 1000) / 1000 * 10 s.
    assert quotas.record("alice", "app", 15000, now_ms=0) == 10_000
    # Another client id is not limited, and has its own sensor.
    assert quotas.record("alice", "other", 10**9, now_ms=0) == 0


def test_the_throttle_rounds_as_java() -> None:
    quotas = ClientQuotas(QuotaType.FETCH, {(ABSENT, DEFAULT): 3})
    # 31 bytes: 3.1 B/s over 10 s; (3.1 - 3) / 3 * 10000 = 333.33 -> 333.
    assert quotas.record("u", "c", 31, now_ms=0) == 333
    assert java_round(2.5) == 3 and java_round(-2.5) == -2


def test_a_user_quota_counts_every_client_id_of_the_user() -> None:
    quotas = ClientQuotas(QuotaType.PRODUCE, {("alice", ABSENT): 1000})
    assert quotas.record("alice", "one", 6000, now_ms=0) == 0
    # 12000 over 10 s: 1200 B/s, 20% over: 2 s.
    assert quotas.record("alice", "two", 6000, now_ms=0) == 2000
    assert quotas.record("bob", "one", 10**9, now_ms=0) == 0


def test_an_unrecorded_fetch_leaves_the_rate_as_it_was() -> None:
    quotas = ClientQuotas(QuotaType.FETCH, {(ABSENT, "app"): 1000})
    assert quotas.record("u", "app", 20000, now_ms=0) == 10_000
    quotas.unrecord("u", "app", 20000, now_ms=0)
    assert quotas.record("u", "app", 5000, now_ms=0) == 0


def test_a_fetch_may_take_ten_windows_of_its_quota() -> None:
    quotas = ClientQuotas(QuotaType.FETCH, {(ABSENT, "app"): 1000})
    assert quotas.max_value_in_window("u", "app") == 10_000
    assert quotas.max_value_in_window("u", "other") == math.inf


def test_a_request_percentage_throttle_is_at_most_one_window() -> None:
    quotas = ClientQuotas(QuotaType.REQUEST, {(ABSENT, "app"): 10})
    # 50 ms of handling is 5 percent-seconds: 0.5 % over 10 s.
    assert quotas.record("u", "app", 5.0, now_ms=0) == 0
    # 2 s of handling: 20.5 %, X = (20.5 - 10) / 10 * 10 s = 10.5 s, capped at 1 s.
    assert quotas.record("u", "app", 200.0, now_ms=0) == 1000


def test_the_quota_can_change_under_a_live_sensor() -> None:
    quotas = ClientQuotas(QuotaType.PRODUCE, {(ABSENT, "app"): 1000})
    assert quotas.record("u", "app", 15000, now_ms=0) == 5000
    quotas.replace_levels({(ABSENT, "app"): 3000})
    assert quotas.record("u", "app", 0, now_ms=0) == 0
    quotas.replace_levels({})
    assert not quotas.enabled
    assert quotas.record("u", "app", 10**9, now_ms=0) == 0


def test_idle_sensors_expire_after_an_hour() -> None:
    quotas = ClientQuotas(QuotaType.PRODUCE, {(ABSENT, DEFAULT): 1000})
    quotas.record("u", "a", 1, now_ms=0)
    quotas.record("u", "b", 1, now_ms=3_000_000)
    assert quotas.sensor_count() == 2
    quotas.record("u", "b", 1, now_ms=3_600_000)
    assert quotas.sensor_count() == 1


def test_sensors_are_capped_least_recently_used_first() -> None:
    quotas = ClientQuotas(QuotaType.PRODUCE, {(ABSENT, DEFAULT): 1000}, sensors_max=2)
    quotas.record("u", "a", 15000, now_ms=0)
    quotas.record("u", "b", 1, now_ms=0)
    quotas.record("u", "a", 0, now_ms=0)  # "a" is used again: "b" is the oldest
    quotas.record("u", "c", 1, now_ms=0)
    assert quotas.sensor_count() == 2
    # "a" kept its bytes: still throttled.
    assert quotas.record("u", "a", 0, now_ms=0) == 5000


def test_a_token_bucket_starts_full_and_refills_at_the_quota() -> None:
    bucket = TokenBucket()
    # Burst: 2 per second over 11 windows of 1 s.
    assert bucket.measure(2, now_ms=5000) == 22
    bucket.record(30, 2, now_ms=5000)
    assert bucket.measure(2, now_ms=5000) == -8
    assert bucket.throttle_time_ms(2, now_ms=5000) == 4000
    assert bucket.throttle_time_ms(2, now_ms=6000) == 3000
    assert bucket.measure(2, now_ms=100_000) == 22


def test_a_strict_mutation_quota_refuses_once_exhausted() -> None:
    quotas = ClientQuotas(QuotaType.CONTROLLER_MUTATION, {(ABSENT, "admin"): 2})
    # The bucket (22) is not below zero: 30 partitions are accepted, overdrawing it.
    first = quotas.record_mutation("u", "admin", 30, strict=True, now_ms=0)
    assert (first.accepted, first.throttle_time_ms) == (True, 0)
    refused = quotas.record_mutation("u", "admin", 1, strict=True, now_ms=0)
    assert (refused.accepted, refused.throttle_time_ms) == (False, 4000)
    # A refused mutation takes nothing: refilled to -6 a second later.
    later = quotas.record_mutation("u", "admin", 1, strict=True, now_ms=1000)
    assert (later.accepted, later.throttle_time_ms) == (False, 3000)
    back = quotas.record_mutation("u", "admin", 1, strict=True, now_ms=4000)
    assert (back.accepted, back.throttle_time_ms) == (True, 0)


def test_a_permissive_mutation_quota_accepts_and_throttles() -> None:
    quotas = ClientQuotas(QuotaType.CONTROLLER_MUTATION, {(ABSENT, "admin"): 2})
    decision = quotas.record_mutation("u", "admin", 30, strict=False, now_ms=0)
    assert (decision.accepted, decision.throttle_time_ms) == (True, 4000)
    unlimited = quotas.record_mutation("u", "other", 10**6, strict=True, now_ms=0)
    assert (unlimited.accepted, unlimited.throttle_time_ms) == (True, 0)


def test_mutation_quotas_are_strict_from_kafkas_versions() -> None:
    assert strict_mutation_quota("CREATE_TOPICS", 6)
    assert not strict_mutation_quota("CREATE_TOPICS", 5)
    assert strict_mutation_quota("CREATE_PARTITIONS", 3)
    assert not strict_mutation_quota("CREATE_PARTITIONS", 2)
    assert strict_mutation_quota("DELETE_TOPICS", 5)
    assert not strict_mutation_quota("DELETE_TOPICS", 4)
