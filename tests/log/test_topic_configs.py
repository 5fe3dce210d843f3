"""Topic configs: Kafka names, types, defaults and validation."""

from __future__ import annotations

import pytest

from weir.log.config import TOPIC_CONFIGS, ConfigType, InvalidConfig, LogConfig


def test_defaults_are_kafkas() -> None:
    config = LogConfig.from_overrides({})
    assert config.cleanup_policy == ("delete",)
    assert config.compression_type == "producer"
    assert config.index_interval_bytes == 4096
    assert config.max_message_bytes == 1_048_588
    assert config.message_timestamp_type == "CreateTime"
    assert config.min_insync_replicas == 1
    assert config.retention_bytes == -1
    assert config.retention_ms == 604_800_000
    assert config.segment_bytes == 1_073_741_824
    assert config.segment_ms == 604_800_000
    assert config.segment_index_bytes == 10_485_760
    assert config.unclean_leader_election_enable is False
    assert config.min_cleanable_dirty_ratio == 0.5


def test_every_catalog_entry_is_a_field_with_its_default() -> None:
    config = LogConfig()
    for name, definition in TOPIC_CONFIGS.items():
        assert config.value(name) == definition.default
        assert definition.parse(definition.format(definition.default)) == definition.default


def test_overrides_are_parsed_by_type() -> None:
    config = LogConfig.from_overrides(
        {
            "retention.ms": "-1",
            "segment.bytes": "2048",
            "cleanup.policy": "compact,delete",
            "preallocate": "TRUE",
            "min.cleanable.dirty.ratio": "0.25",
            "message.timestamp.type": "LogAppendTime",
        }
    )
    assert config.retention_ms == -1
    assert config.segment_bytes == 2048
    assert config.cleanup_policy == ("compact", "delete")
    assert config.preallocate is True
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.log_append_time
    assert config.overrides["segment.bytes"] == "2048"
    assert TOPIC_CONFIGS["cleanup.policy"].format(config.cleanup_policy) == "compact,delete"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("no.such.config", "1"),
        ("retention.ms", "soon"),
        ("retention.ms", "-2"),
        ("segment.bytes", "100"),
        ("segment.bytes", str(2**31)),
        ("max.message.bytes", "-1"),
        ("message.timestamp.type", "WallClock"),
        ("cleanup.policy", "shred"),
        ("min.insync.replicas", "0"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("preallocate", "yes"),
        ("compression.type", "brotli"),
    ],
)
def test_rejects_unknown_names_and_bad_values(name: str, value: str) -> None:
    with pytest.raises(InvalidConfig) as raised:
        LogConfig.from_overrides({name: value})
    assert raised.value.name == name
    assert raised.value.reason


def test_catalog_declares_kafka_types() -> None:
    assert TOPIC_CONFIGS["segment.bytes"].type is ConfigType.INT
    assert TOPIC_CONFIGS["retention.ms"].type is ConfigType.LONG
    assert TOPIC_CONFIGS["cleanup.policy"].type is ConfigType.LIST
    assert TOPIC_CONFIGS["preallocate"].type is ConfigType.BOOLEAN
