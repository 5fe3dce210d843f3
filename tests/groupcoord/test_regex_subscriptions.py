"""KIP-848 regular-expression subscriptions (SubscribedTopicRegex): the coordinator
resolves a member's regex against the topic names the broker hands it, again when
topics are created or deleted, and a changed resolution bumps the group epoch."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.groupcoord.consumer_harness import GROUP, Client, World, all_partitions, converge
from weir.format.errors import ErrorCode
from weir.groupcoord import consumer_group_records as rec
from weir.groupcoord.consumer_coordinator import REGEX_REFRESH_INTERVAL_MS
from weir.groupcoord.consumer_group import TopicInfo
from weir.groupcoord.topic_regex import REGEX_LENGTH_MAX

ORDERS_1 = uuid.UUID(int=11)
ORDERS_2 = uuid.UUID(int=12)
ORDERS_3 = uuid.UUID(int=13)


def regex_world() -> World:
    world = World()
    world.topics.update({"orders-1": TopicInfo(ORDERS_1, 2), "orders-2": TopicInfo(ORDERS_2, 3)})
    world.coordinator.set_topic_names(world.topics)
    return world


def regex_client(world: World, member_id: str, regex: str) -> Client:
    """A client subscribed by regex only: its join sends no topic names."""
    client = Client(world, member_id, [])
    client.heartbeat(subscribed_topic_names=None, subscribed_topic_regex=regex)
    return client


def epoch(world: World) -> int:
    return world.coordinator.groups[GROUP].group_epoch


def create_topic(world: World, name: str, topic_id: uuid.UUID, partition_count: int) -> None:
    world.topics[name] = TopicInfo(topic_id, partition_count)
    world.coordinator.set_topic_names(world.topics)


def test_regex_member_is_assigned_every_partition_of_the_topics_it_matches() -> None:
    world = regex_world()
    a = regex_client(world, "a", "orders-.*")
    assert a.last is not None and a.last.error_code == ErrorCode.NONE
    assert a.partitions() == all_partitions(world, ["orders-1", "orders-2"])
    member = world.coordinator.groups[GROUP].members["a"]
    assert member.subscribed_topic_regex == "orders-.*"
    assert member.subscribed_topic_names == ()


def test_regex_matches_whole_topic_names_only() -> None:
    world = regex_world()
    world.topics["my-orders-1"] = TopicInfo(uuid.UUID(int=20), 1)
    world.topics["orders"] = TopicInfo(uuid.UUID(int=21), 1)
    world.coordinator.set_topic_names(world.topics)
    a = regex_client(world, "a", "orders-[0-9]")
    assert a.partitions() == all_partitions(world, ["orders-1", "orders-2"])


def test_topic_names_and_regex_together_subscribe_to_the_union() -> None:
    world = regex_world()
    a = Client(world, "a", ["t1"])
    a.heartbeat(subscribed_topic_regex="orders-2")
    assert a.partitions() == all_partitions(world, ["t1", "orders-2"])


def test_a_topic_created_later_is_picked_up_with_one_epoch_bump() -> None:
    world = regex_world()
    a = regex_client(world, "a", "orders-.*")
    before = epoch(world)
    create_topic(world, "orders-3", ORDERS_3, 2)
    world.now_ms += REGEX_REFRESH_INTERVAL_MS
    converge(world, [a], rounds=2)
    assert epoch(world) == before + 1
    assert a.partitions() == all_partitions(world, ["orders-1", "orders-2", "orders-3"])


def test_new_topics_are_resolved_at_most_every_refresh_interval() -> None:
    world = regex_world()
    a = regex_client(world, "a", "orders-.*")
    create_topic(world, "orders-3", ORDERS_3, 2)
    world.now_ms += REGEX_REFRESH_INTERVAL_MS - 1
    a.heartbeat()
    assert (ORDERS_3, 0) not in a.partitions()
    world.now_ms += 1
    converge(world, [a], rounds=2)
    assert (ORDERS_3, 0) in a.partitions()


def test_a_deleted_topic_leaves_the_assignment_and_bumps_the_epoch() -> None:
    world = regex_world()
    a = regex_client(world, "a", "orders-.*")
    before = epoch(world)
    del world.topics["orders-2"]
    world.coordinator.set_topic_names(world.topics)
    world.now_ms += REGEX_REFRESH_INTERVAL_MS
    converge(world, [a], rounds=2)
    assert epoch(world) == before + 1
    assert a.partitions() == all_partitions(world, ["orders-1"])
    assert world.coordinator.groups[GROUP].resolved_regexes == {"orders-.*": {"orders-1"}}


def test_an_unmatched_topic_created_later_changes_nothing() -> None:
    world = regex_world()
    a = regex_client(world, "a", "orders-.*")
    before = epoch(world)
    records_before = len(world.records)
    create_topic(world, "payments", uuid.UUID(int=30), 1)
    world.now_ms += REGEX_REFRESH_INTERVAL_MS
    a.heartbeat()
    assert epoch(world) == before
    assert len(world.records) == records_before


def test_two_members_share_the_topics_of_one_regex() -> None:
    world = regex_world()
    a = regex_client(world, "a", "orders-.*")
    b = regex_client(world, "b", "orders-.*")
    converge(world, [a, b])
    assert a.partitions() | b.partitions() == all_partitions(world, ["orders-1", "orders-2"])
    assert a.partitions() and b.partitions()


def test_changing_the_regex_moves_the_subscription_and_empty_string_clears_it() -> None:
    world = regex_world()
    a = Client(world, "a", ["t1"])
    a.heartbeat(subscribed_topic_regex="orders-1")
    assert a.partitions() == all_partitions(world, ["t1", "orders-1"])
    a.heartbeat(subscribed_topic_regex="orders-2")
    converge(world, [a], rounds=3)
    assert a.partitions() == all_partitions(world, ["t1", "orders-2"])
    a.heartbeat(subscribed_topic_regex="")
    converge(world, [a], rounds=3)
    assert a.partitions() == all_partitions(world, ["t1"])
    group = world.coordinator.groups[GROUP]
    assert group.members["a"].subscribed_topic_regex is None
    assert group.resolved_regexes == {}


def test_empty_regex_with_names_is_a_name_subscription() -> None:
    # What librdkafka sends with a name-only subscription.
    world = regex_world()
    result = Client(world, "b", ["t1"]).heartbeat(subscribed_topic_regex="")
    assert result.error_code == ErrorCode.NONE
    assert world.coordinator.groups[GROUP].members["b"].subscribed_topic_regex is None


def test_regex_is_described_and_stored_in_the_member_record() -> None:
    world = regex_world()
    regex_client(world, "a", "orders-.*")
    (described,) = world.coordinator.describe([GROUP], lambda topic_id: None)
    assert described["members"][0]["subscribed_topic_regex"] == "orders-.*"
    stored = [
        rec.decode_member_metadata(r.value)
        for r in world.records
        if r.value is not None and rec.decode_key(r.key) == (rec.MEMBER_METADATA, (GROUP, "a"))
    ]
    assert stored[-1].subscribed_topic_regex == "orders-.*"


def test_a_loaded_group_resolves_its_regex_without_a_rebalance() -> None:
    world = regex_world()
    a = regex_client(world, "a", "orders-.*")
    before = epoch(world)
    restarted = World()
    restarted.topics = world.topics
    restarted.coordinator.set_topic_names(world.topics)
    for r in world.records:
        assert restarted.coordinator.replay(r.key, r.value)
    restarted.coordinator.finish_loading(restarted.now_ms)
    a.world = restarted
    result = a.heartbeat()
    assert result.error_code == ErrorCode.NONE
    assert restarted.coordinator.groups[GROUP].group_epoch == before
    assert restarted.coordinator.groups[GROUP].resolved_regexes == {
        "orders-.*": {"orders-1", "orders-2"}
    }


@pytest.mark.parametrize(
    "regex",
    [
        "orders-(",  # does not parse
        "[a-",
        r"(a)\1",  # backreference: RE2 has none
        "(?=orders)orders-1",  # lookahead
        "(?<!x)orders",  # lookbehind
        "a++",  # possessive
        "x" * (REGEX_LENGTH_MAX + 1),
        "((((a{1,100}){1,100}){1,100}){1,100})",  # a program larger than allowed
    ],
)
def test_invalid_regex_is_refused_and_changes_nothing(regex: str) -> None:
    world = regex_world()
    result = Client(world, "a", []).heartbeat(
        subscribed_topic_names=None, subscribed_topic_regex=regex
    )
    assert result.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert result.error_message and "SubscribedTopicRegex" in result.error_message
    assert result.records == []
    assert not world.coordinator.has_group(GROUP)


def test_invalid_regex_from_a_member_leaves_its_subscription_as_it_was() -> None:
    world = regex_world()
    a = regex_client(world, "a", "orders-.*")
    result = a.heartbeat(subscribed_topic_regex="orders-(")
    assert result.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert world.coordinator.groups[GROUP].members["a"].subscribed_topic_regex == "orders-.*"


def test_hostile_pattern_resolves_in_linear_time() -> None:
    # Catastrophic backtracking for Python's `re` (seconds at 30 characters,
    # years at 200); RE2 matches in time linear in the name.
    world = regex_world()
    names = {f"{'a' * 200}{i}": TopicInfo(uuid.UUID(int=100 + i), 1) for i in range(200)}
    world.topics.update(names)
    world.coordinator.set_topic_names(world.topics)
    started = time.monotonic()
    a = regex_client(world, "a", "(a+)+b")
    elapsed_s = time.monotonic() - started
    assert a.last is not None and a.last.error_code == ErrorCode.NONE
    assert a.partitions() == set()
    assert elapsed_s < 1.0
