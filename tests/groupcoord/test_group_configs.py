"""Group configs (KIP-848 GROUP resource): validated as Kafka's GroupConfig, and
used by the KIP-848 coordinator for that group only."""

from __future__ import annotations

import pytest

from tests.groupcoord.consumer_harness import GROUP, Client, World
from weir.format.errors import ErrorCode
from weir.groupcoord.group_configs import (
    GroupConfig,
    InvalidGroupConfig,
    validate_group_configs,
)
from weir.groupcoord.settings import GroupSettings

SETTINGS = GroupSettings()


def test_overrides_replace_the_broker_defaults() -> None:
    config = validate_group_configs({"consumer.session.timeout.ms": "50000"}, SETTINGS)
    assert config == GroupConfig(50_000, SETTINGS.consumer_heartbeat_interval_ms)


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"consumer.session.timeout.ms": "44999"},
         "consumer.session.timeout.ms must be greater than or equal to "
         "group.consumer.min.session.timeout.ms"),
        ({"consumer.session.timeout.ms": "60001"},
         "consumer.session.timeout.ms must be less than or equal to "
         "group.consumer.max.session.timeout.ms"),
        ({"consumer.heartbeat.interval.ms": "4999"},
         "consumer.heartbeat.interval.ms must be greater than or equal to "
         "group.consumer.min.heartbeat.interval.ms"),
        ({"consumer.heartbeat.interval.ms": "15001"},
         "consumer.heartbeat.interval.ms must be less than or equal to "
         "group.consumer.max.heartbeat.interval.ms"),
        ({"consumer.session.timeout.ms": "0"}, "Value must be at least 1"),
        ({"consumer.session.timeout.ms": "2147483648"}, "Not a number of type INT"),
        ({"consumer.session.timeout.ms": "soon"}, "Not a number"),
        ({"streams.session.timeout.ms": "45000"}, "Unknown group config name"),
    ],
)  # fmt: skip
def test_values_outside_the_brokers_bounds_are_refused(
    overrides: dict[str, str], reason: str
) -> None:
    with pytest.raises(InvalidGroupConfig, match=reason):
        validate_group_configs(overrides, SETTINGS)


def test_the_session_timeout_must_exceed_the_heartbeat_interval() -> None:
    settings = GroupSettings(consumer_session_timeout_min_ms=1_000)
    with pytest.raises(InvalidGroupConfig, match="must be greater than consumer.heartbeat"):
        validate_group_configs(
            {"consumer.session.timeout.ms": "5000", "consumer.heartbeat.interval.ms": "5000"},
            settings,
        )


def test_the_coordinator_tells_members_the_groups_heartbeat_interval() -> None:
    world = World()
    member = Client(world, "a", ["t1"])
    assert member.heartbeat().heartbeat_interval_ms == SETTINGS.consumer_heartbeat_interval_ms
    world.coordinator.set_group_config(GROUP, GroupConfig(45_000, 9_000))
    assert member.heartbeat().heartbeat_interval_ms == 9_000
    world.coordinator.set_group_config(GROUP, None)
    assert member.heartbeat().heartbeat_interval_ms == SETTINGS.consumer_heartbeat_interval_ms


def test_a_groups_session_timeout_fences_its_silent_member() -> None:
    world = World(consumer_session_timeout_min_ms=1_000)
    world.coordinator.set_group_config(GROUP, GroupConfig(2_000, 1_000))
    member = Client(world, "a", ["t1"])
    member.heartbeat()
    world.tick(1_999)
    assert "a" in world.coordinator.groups[GROUP].members
    world.tick(2)
    assert "a" not in world.coordinator.groups[GROUP].members
    assert member.heartbeat().error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_other_groups_keep_the_broker_settings() -> None:
    world = World()
    world.coordinator.set_group_config("other", GroupConfig(60_000, 15_000))
    member = Client(world, "a", ["t1"])
    assert member.heartbeat().heartbeat_interval_ms == SETTINGS.consumer_heartbeat_interval_ms
    world.tick(SETTINGS.consumer_session_timeout_ms + 1)
    assert "a" not in world.coordinator.groups[GROUP].members
