"""Group configs (KIP-848): per-group overrides of broker-wide consumer-group
settings, set with IncrementalAlterConfigs (or AlterConfigs) on the GROUP resource
and described with DescribeConfigs, as Kafka's `GroupConfig`.

Served: `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`, which
the KIP-848 coordinator uses for that group instead of the broker's
`group.consumer.session.timeout.ms` / `group.consumer.heartbeat.interval.ms`.
Kafka's share-group and streams-group configs (`share.*`, `streams.*`) are not:
Weir serves neither kind of group, and an unknown name is refused.

A change is validated as Kafka validates it: known names, integers of at least 1,
each within the broker's min/max (`group.consumer.min.session.timeout.ms`, ...),
and the session timeout greater than the heartbeat interval. Stored overrides are
applied as they are at load, as Kafka does, even if the broker's bounds changed
since."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from weir.groupcoord.settings import GroupSettings

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    # The broker setting (Kafka's name) that holds its default and bounds.
    broker_name: str
    doc: str


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(
            CONSUMER_SESSION_TIMEOUT_MS,
            "group.consumer.session.timeout.ms",
            "The timeout to detect client failures when using the consumer group protocol.",
        ),
        GroupConfigDef(
            CONSUMER_HEARTBEAT_INTERVAL_MS,
            "group.consumer.heartbeat.interval.ms",
            "The heartbeat interval given to the members of a consumer group.",
        ),
    )
}


class InvalidGroupConfig(ValueError):  # noqa: N818 (the contract names it)
    """An unknown group config name or a value Kafka would refuse."""


def unknown_group_config_message(name: str) -> str:
    """Kafka's wording, the one AlterConfigs and IncrementalAlterConfigs answer."""
    return f"Unknown group config name: {name}"


@dataclass(frozen=True)
class GroupConfig:
    """A group's effective settings: its overrides on top of the broker's."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int

    @classmethod
    def defaults(cls, settings: GroupSettings) -> GroupConfig:
        return cls(settings.consumer_session_timeout_ms, settings.consumer_heartbeat_interval_ms)

    def value(self, name: str) -> int:
        return int(getattr(self, name.replace(".", "_")))

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str], settings: GroupSettings) -> GroupConfig:
        """The broker's defaults with `overrides` applied, names and types checked
        (not the bounds: see `validate_group_configs`). Raises InvalidGroupConfig."""
        values = dataclasses.asdict(cls.defaults(settings))
        for name, text in overrides.items():
            if name not in GROUP_CONFIGS:
                raise InvalidGroupConfig(unknown_group_config_message(name))
            values[name.replace(".", "_")] = _parse_int(name, text)
        return cls(**values)


def validate_group_configs(overrides: Mapping[str, str], settings: GroupSettings) -> GroupConfig:
    """The config `overrides` give, checked as Kafka's GroupConfig.validate checks
    a change. Raises InvalidGroupConfig with Kafka's wording."""
    config = GroupConfig.from_overrides(overrides, settings)
    _within(
        CONSUMER_HEARTBEAT_INTERVAL_MS, config.consumer_heartbeat_interval_ms,
        settings.consumer_heartbeat_interval_min_ms, settings.consumer_heartbeat_interval_max_ms,
        "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
    )  # fmt: skip
    _within(
        CONSUMER_SESSION_TIMEOUT_MS, config.consumer_session_timeout_ms,
        settings.consumer_session_timeout_min_ms, settings.consumer_session_timeout_max_ms,
        "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
    )  # fmt: skip
    if config.consumer_session_timeout_ms <= config.consumer_heartbeat_interval_ms:
        raise InvalidGroupConfig(
            f"{CONSUMER_SESSION_TIMEOUT_MS} must be greater than {CONSUMER_HEARTBEAT_INTERVAL_MS}"
        )
    return config


def _within(name: str, value: int, low: int, high: int, low_name: str, high_name: str) -> None:
    if value < low:
        raise InvalidGroupConfig(f"{name} must be greater than or equal to {low_name}")
    if value > high:
        raise InvalidGroupConfig(f"{name} must be less than or equal to {high_name}")


def _parse_int(name: str, text: str | None) -> int:
    if text is None:
        raise InvalidGroupConfig(f"{name}: a value is required")
    try:
        value = int(text.strip(), 10)
    except ValueError:
        value = None
    if value is None or value > INT32_MAX:  # Kafka's INT: a Java int or not a number
        raise InvalidGroupConfig(
            f"Invalid value {text} for configuration {name}: Not a number of type INT"
        )
    if value < 1:
        raise InvalidGroupConfig(
            f"Invalid value {value} for configuration {name}: Value must be at least 1"
        )
    return value
