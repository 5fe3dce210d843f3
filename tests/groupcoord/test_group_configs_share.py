"""Share group configs (KIP-932, KIP-1191's dead-letter topic): parsed and
validated as Kafka 4.4's GroupConfig (the messages are those Kafka 4.4 answered
IncrementalAlterConfigs with), and read back as a share group's effective config."""

from __future__ import annotations

import pytest

from weir.groupcoord.group_configs import (
    GROUP_CONFIGS,
    AutoOffsetReset,
    GroupConfigType,
    InvalidGroupConfig,
    ShareGroupConfig,
    dead_letter_topic_refusal,
    duration_ms,
    group_config_values,
    parse_auto_offset_reset,
    share_group_config_of,
    validate_group_configs,
)
from weir.groupcoord.settings import GroupSettings

SETTINGS = GroupSettings()
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
BAD_RESET = (
    "Invalid value {v} for configuration share.auto.offset.reset: Invalid value `{v}` for "
    "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or "
    "of the format 'by_duration:<PnDTnHnMn.nS>'."
)


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("P1D", DAY_MS),
        ("PT1H", HOUR_MS),
        ("p1d", DAY_MS),
        ("P1DT2H3M4.5S", DAY_MS + 2 * HOUR_MS + 3 * 60_000 + 4_500),
        ("PT1,5S", 1_500),
        ("PT0.0001S", 0),
        ("P0D", 0),
        ("-PT0S", 0),
        ("+P1D", DAY_MS),
        ("P-1DT25H", HOUR_MS),
        ("PT1H-30M", 30 * 60_000),
    ],
)  # fmt: skip
def test_durations_are_read_as_javas_duration_parse_reads_them(text: str, expected_ms: int) -> None:
    assert duration_ms(text) == expected_ms


@pytest.mark.parametrize(
    "text",
    ["-P1D", "-PT1S", "P-1D", "P", "PT", "P1DT", " P1D", "P1W", "P1Y", "xyz", "",
     "PT1.1234567891S"],
)  # fmt: skip
def test_negative_or_malformed_durations_are_refused(text: str) -> None:
    assert duration_ms(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("latest", AutoOffsetReset()),
        ("earliest", AutoOffsetReset(earliest=True)),
        ("by_duration:PT1H", AutoOffsetReset(duration_ms=HOUR_MS)),
        ("by_duration:PT0S", AutoOffsetReset(duration_ms=0)),
    ],
)
def test_auto_offset_reset_strategies(text: str, expected: AutoOffsetReset) -> None:
    assert parse_auto_offset_reset(text) == expected


@pytest.mark.parametrize(
    "text", ["EARLIEST", "BY_DURATION:P1D", "by_duration:", "by_duration:-P1D", "latest,earliest"]
)
def test_auto_offset_reset_refuses_what_kafka_refuses_with_its_words(text: str) -> None:
    with pytest.raises(InvalidGroupConfig) as refused:
        validate_group_configs({"share.auto.offset.reset": text}, SETTINGS)
    assert str(refused.value) == BAD_RESET.format(v=text)


# What Kafka 4.4 (broker defaults) answered for each value, word for word.
@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("share.delivery.count.limit", "1",
         "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
        ("share.delivery.count.limit", "11",
         "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
        ("share.delivery.count.limit", "x",
         "Invalid value x for configuration share.delivery.count.limit: Not a number of type INT"),
        ("share.delivery.count.limit", "",
         "Invalid value  for configuration share.delivery.count.limit: Not a number of type INT"),
        ("share.record.lock.duration.ms", "999",
         "Invalid value 999 for configuration share.record.lock.duration.ms: "
         "Value must be at least 1000"),
        ("share.record.lock.duration.ms", "14999",
         "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
        ("share.record.lock.duration.ms", "60001",
         "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
        ("share.partition.max.record.locks", "99",
         "Invalid value 99 for configuration share.partition.max.record.locks: "
         "Value must be at least 100"),
        ("share.partition.max.record.locks", "4001",
         "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
        ("share.session.timeout.ms", "44999",
         "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
        ("share.heartbeat.interval.ms", "15001",
         "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
        ("share.heartbeat.interval.ms", "0",
         "Invalid value 0 for configuration share.heartbeat.interval.ms: Value must be at least 1"),
        ("share.assignment.interval.ms", "-1",
         "Invalid value -1 for configuration share.assignment.interval.ms: "
         "Value must be at least 0"),
        ("share.assignment.interval.ms", "15001",
         "share.assignment.interval.ms must be in the range 0 to 15000 inclusive."),
        ("share.isolation.level", "foo",
         "Invalid value foo for configuration share.isolation.level: "
         "String must be one of: read_committed, read_uncommitted"),
        ("share.isolation.level", "READ_COMMITTED",
         "Invalid value READ_COMMITTED for configuration share.isolation.level: "
         "String must be one of: read_committed, read_uncommitted"),
        ("share.renew.acknowledge.enable", "yes",
         "Invalid value yes for configuration share.renew.acknowledge.enable: "
         "Expected value to be either true or false"),
        ("errors.deadletterqueue.copy.record.enable", "x",
         "Invalid value x for configuration errors.deadletterqueue.copy.record.enable: "
         "Expected value to be either true or false"),
        ("errors.deadletterqueue.topic.name", "__orders",
         "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"),
        ("streams.session.timeout.ms", "45000",
         "Unknown group config name: streams.session.timeout.ms"),
    ],
)  # fmt: skip
def test_share_values_kafka_refuses_are_refused_with_its_words(
    name: str, value: str, message: str
) -> None:
    with pytest.raises(InvalidGroupConfig) as refused:
        validate_group_configs({name: value}, SETTINGS)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("name", "value", "parsed"),
    [
        ("share.delivery.count.limit", "2", 2),
        ("share.delivery.count.limit", "10", 10),
        ("share.record.lock.duration.ms", " 20000 ", 20_000),
        ("share.assignment.interval.ms", "0", 0),
        ("share.auto.offset.reset", " earliest", "earliest"),
        ("share.auto.offset.reset", "by_duration:p1d", "by_duration:p1d"),
        ("share.isolation.level", "read_committed", "read_committed"),
        ("share.renew.acknowledge.enable", " TRUE ", True),
        ("share.renew.acknowledge.enable", "false", False),
        ("errors.deadletterqueue.topic.name", " dlq.orders ", "dlq.orders"),
        ("errors.deadletterqueue.topic.name", "orders-dead", "orders-dead"),  # no prefix needed
        ("errors.deadletterqueue.topic.name", "   ", ""),
        ("errors.deadletterqueue.copy.record.enable", "True", True),
    ],
)
def test_share_values_kafka_accepts_are_stored_trimmed_and_typed(
    name: str, value: str, parsed: object
) -> None:
    validate_group_configs({name: value}, SETTINGS)
    assert group_config_values({name: value}, SETTINGS)[name] == parsed


def test_types_are_kafkas() -> None:
    types = {name: d.type for name, d in GROUP_CONFIGS.items()}
    assert types["share.auto.offset.reset"] is GroupConfigType.STRING
    assert types["share.isolation.level"] is GroupConfigType.STRING
    assert types["errors.deadletterqueue.topic.name"] is GroupConfigType.STRING
    assert types["share.renew.acknowledge.enable"] is GroupConfigType.BOOLEAN
    assert types["errors.deadletterqueue.copy.record.enable"] is GroupConfigType.BOOLEAN
    assert types["share.delivery.count.limit"] is GroupConfigType.INT


def test_every_value_is_parsed_before_any_bound_is_checked() -> None:
    with pytest.raises(InvalidGroupConfig, match="record.lock.duration.ms: Value must be at least"):
        validate_group_configs(
            {"share.delivery.count.limit": "20", "share.record.lock.duration.ms": "10"}, SETTINGS
        )


def test_bounds_follow_the_brokers_share_settings() -> None:
    settings = GroupSettings(
        share_delivery_count_limit_max=25, share_record_lock_duration_min_ms=1_000
    )
    validate_group_configs(
        {"share.delivery.count.limit": "25", "share.record.lock.duration.ms": "1000"}, settings
    )
    with pytest.raises(InvalidGroupConfig, match="in the range 2 to 25 inclusive"):
        validate_group_configs({"share.delivery.count.limit": "26"}, settings)


def test_the_share_session_timeout_must_exceed_the_heartbeat_interval() -> None:
    settings = GroupSettings(share_session_timeout_min_ms=5_000)
    with pytest.raises(
        InvalidGroupConfig,
        match="share.session.timeout.ms must be greater than share.heartbeat.interval.ms",
    ):
        validate_group_configs({"share.session.timeout.ms": "5000"}, settings)


def test_an_unconfigured_share_group_has_the_brokers_settings() -> None:
    config, warnings = share_group_config_of("g", {}, SETTINGS)
    assert warnings == []
    assert config == ShareGroupConfig(
        record_lock_duration_ms=30_000,
        delivery_count_limit=5,
        partition_max_record_locks=2_000,
        session_timeout_ms=45_000,
        heartbeat_interval_ms=5_000,
        assignment_interval_ms=1_000,
        auto_offset_reset=AutoOffsetReset(),
        read_committed=False,
        renew_acknowledge_enable=True,
        dead_letter_topic=None,
        dead_letter_copy_record=False,
    )
    settings = GroupSettings(
        share_delivery_count_limit=3, share_auto_offset_reset="earliest",
        share_isolation_level="read_committed", share_renew_acknowledge_enable=False,
    )  # fmt: skip
    config, _ = share_group_config_of("g", {}, settings)
    assert (config.delivery_count_limit, config.auto_offset_reset) == (3, AutoOffsetReset(True))
    assert (config.read_committed, config.renew_acknowledge_enable) == (True, False)


def test_a_share_groups_overrides_replace_the_brokers_settings() -> None:
    overrides = {
        "share.record.lock.duration.ms": "20000",
        "share.delivery.count.limit": "3",
        "share.partition.max.record.locks": "500",
        "share.session.timeout.ms": "50000",
        "share.heartbeat.interval.ms": "6000",
        "share.assignment.interval.ms": "0",
        "share.auto.offset.reset": "by_duration:PT1H",
        "share.isolation.level": "read_committed",
        "share.renew.acknowledge.enable": "false",
        "errors.deadletterqueue.topic.name": "dlq.orders",
        "errors.deadletterqueue.copy.record.enable": "true",
        "consumer.session.timeout.ms": "50000",
    }
    validate_group_configs(overrides, SETTINGS)
    config, warnings = share_group_config_of("g", overrides, SETTINGS)
    assert warnings == []
    assert config == ShareGroupConfig(
        record_lock_duration_ms=20_000,
        delivery_count_limit=3,
        partition_max_record_locks=500,
        session_timeout_ms=50_000,
        heartbeat_interval_ms=6_000,
        assignment_interval_ms=0,
        auto_offset_reset=AutoOffsetReset(duration_ms=HOUR_MS),
        read_committed=True,
        renew_acknowledge_enable=False,
        dead_letter_topic="dlq.orders",
        dead_letter_copy_record=True,
    )


def test_stored_overrides_outside_new_bounds_are_capped_with_a_warning() -> None:
    """Kafka 4.4 caps a stored value to the broker's current bounds (GroupConfig.evaluate)."""
    stored = {"share.delivery.count.limit": "10", "share.record.lock.duration.ms": "15000"}
    tighter = GroupSettings(
        share_delivery_count_limit_max=6, share_record_lock_duration_min_ms=20_000
    )
    config, warnings = share_group_config_of("g", stored, tighter)
    assert (config.delivery_count_limit, config.record_lock_duration_ms) == (6, 20_000)
    assert warnings == [
        "The group config 'share.record.lock.duration.ms' for group 'g' has value 15000 which "
        "is below the broker's allowed minimum 20000. The effective value will be capped to "
        "20000.",
        "The group config 'share.delivery.count.limit' for group 'g' has value 10 which "
        "exceeds the broker's allowed maximum 6. The effective value will be capped to 6.",
    ]


def test_stored_overrides_that_no_longer_parse_fall_back_to_the_defaults_with_a_warning() -> None:
    stored = {
        "share.isolation.level": "serializable",
        "share.delivery.count.limit": "3",
        "streams.num.standby.replicas": "1",
    }
    config, warnings = share_group_config_of("g", stored, SETTINGS)
    assert (config.read_committed, config.delivery_count_limit) == (False, 3)
    assert len(warnings) == 2
    assert "String must be one of" in warnings[0] and "read_uncommitted used" in warnings[0]
    assert "streams.num.standby.replicas" in warnings[1]


@pytest.mark.parametrize(
    ("topic", "prefix", "refusal"),
    [
        ("dlq.orders", "dlq.", None),
        ("orders-dead", "", None),
        ("orders-dead", "dlq.",
         "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: "
         "g, topic: orders-dead, prefix: dlq.."),
        ("", "dlq.", "Configured DLQ topic name in share group: g is empty."),
        ("__dlq", "",
         "Configured DLQ topic name in share group: g cannot start with __, topic: __dlq."),
    ],
)  # fmt: skip
def test_a_dead_letter_topic_must_carry_the_brokers_prefix_when_written(
    topic: str, prefix: str, refusal: str | None
) -> None:
    assert dead_letter_topic_refusal("g", topic, prefix) == refusal
