from __future__ import annotations

from typing import Any

import pytest

from weir.broker.push.subscription import (
    HeaderFilter,
    RetryPolicy,
    Subscription,
    SubscriptionError,
    subscription_from_request,
    subscription_from_stored,
)

SECRET = "s" * 64


def parse(**fields: Any) -> Subscription:
    doc = {"name": "hook", "topic": "orders", "url": "https://example.com/in", **fields}
    return subscription_from_request(doc, now_ms=5, secret=SECRET)


def test_defaults_and_the_share_group_named_after_the_subscription() -> None:
    sub = parse()
    assert sub.group_id == "weir-push-hook"
    assert (sub.batch_size, sub.concurrency, sub.timeout_ms) == (1, 4, 10_000)
    assert sub.retry == RetryPolicy(1_000, 60_000, 5)
    assert not sub.paused and not sub.ordered_by_key and sub.start == "latest"


def test_stored_form_round_trips_and_the_public_form_hides_the_secret() -> None:
    sub = parse(header_filters=[{"name": "type", "values": ["a", "b"]}], dead_letter_topic="dlq.x")
    assert subscription_from_stored(sub.to_stored()) == sub
    assert "secret" not in sub.to_public()
    assert sub.to_stored()["secret"] == SECRET


def test_retry_policy_becomes_the_share_groups_configs() -> None:
    sub = parse(
        retry={"min_backoff_ms": 200, "max_backoff_ms": 5000, "max_attempts": 3},
        dead_letter_topic="dlq.orders",
        start="earliest",
    )
    assert sub.group_configs() == {
        "share.auto.offset.reset": "earliest",
        "share.delivery.count.limit": "3",
        "weir.share.release.backoff.initial.ms": "200",
        "weir.share.release.backoff.max.ms": "5000",
        "errors.deadletterqueue.topic.name": "dlq.orders",
        "errors.deadletterqueue.copy.record.enable": "true",
    }


def test_ordered_subscriptions_give_records_back_without_a_release_backoff() -> None:
    configs = parse(ordered_by_key=True, retry={"min_backoff_ms": 200}).group_configs()
    assert configs["weir.share.release.backoff.initial.ms"] == "0"


def test_a_long_timeout_gets_a_lock_longer_than_it() -> None:
    assert "share.record.lock.duration.ms" not in parse(timeout_ms=20_000).group_configs()
    assert parse(timeout_ms=40_000).group_configs()["share.record.lock.duration.ms"] == "50000"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "a b"}, "name:"),
        ({"name": "x" * 101}, "name:"),
        ({"topic": "__consumer_offsets"}, "topic: internal"),
        ({"topic": None}, "topic: required"),
        ({"url": "ftp://example.com/"}, "url: the scheme"),
        ({"url": "http:///path"}, "url: a host"),
        ({"url": "http://example.com/" + "a" * 3000}, "url: longer"),
        ({"url": "http://exa mple.com/"}, "url: spaces"),
        ({"url": "http://example.com:99999/"}, "url:"),
        ({"batch_size": 0}, "batch_size: must be between 1 and 500"),
        ({"batch_size": "10"}, "batch_size: must be an integer"),
        ({"batch_size": True}, "batch_size: must be an integer"),
        ({"concurrency": 65}, "concurrency:"),
        ({"timeout_ms": 60_000}, "timeout_ms:"),
        ({"retry": {"min_backoff_ms": 10, "max_backoff_ms": 5}}, "retry.max_backoff_ms"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"retry": {"tries": 3}}, "retry: unknown field 'tries'"),
        ({"header_filters": [{"name": ""}]}, "header_filters[0].name"),
        ({"header_filters": [{"name": "h"}] * 17}, "header_filters: at most 16"),
        ({"header_filters": [{"name": "h", "values": ["v"] * 17}]}, "header_filters[0].values"),
        ({"header_filters": "h=v"}, "header_filters: must be a list"),
        ({"ordered_by_key": "yes"}, "ordered_by_key: must be true or false"),
        ({"start": "middle"}, "start:"),
        ({"group": "mine"}, "group:"),
        ({"colour": "red"}, "unknown field 'colour'"),
    ],
)
def test_invalid_fields_are_refused_naming_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(SubscriptionError) as caught:
        parse(**fields)
    assert message in str(caught.value)


def test_a_body_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(SubscriptionError):
        subscription_from_request([1, 2], now_ms=0, secret=SECRET)


def test_header_filters_all_match_and_any_value_matches() -> None:
    sub = parse(
        header_filters=[{"name": "type", "values": ["order", "refund"]}, {"name": "tenant"}]
    )
    assert sub.matches([("type", b"refund"), ("tenant", b"t1")])
    assert not sub.matches([("type", b"refund")])
    assert not sub.matches([("type", b"other"), ("tenant", b"t1")])
    assert not sub.matches([("type", None), ("tenant", b"t1")])
    assert parse().matches([])
    assert HeaderFilter("tenant").matches([("tenant", None)])


def test_backoff_doubles_from_the_minimum_to_the_maximum() -> None:
    policy = RetryPolicy(min_backoff_ms=100, max_backoff_ms=1_000, max_attempts=9)
    assert [policy.backoff_ms(n) for n in range(0, 7)] == [0, 100, 200, 400, 800, 1000, 1000]
    assert policy.backoff_ms(10_000) == 1_000
    assert RetryPolicy(0, 0, 3).backoff_ms(4) == 0
