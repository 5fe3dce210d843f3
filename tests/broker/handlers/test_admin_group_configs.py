"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs on GROUP resources with
share group configs (KIP-932, KIP-1191), against a real Broker through the wire
layer's encoders and decoders: types, values, sources and synonyms as Kafka 4.4
describes them, refusals with its words, and the share-group code's view."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weir.broker.broker import Broker
from weir.broker.coordinators.share_configs import (
    AutoOffsetReset,
    dead_letter_refusal,
    share_broker_limits,
    share_group_config,
)
from weir.broker.handlers.admin_configs import ResourceType
from weir.broker.handlers.broker_configs import ConfigSource, KafkaConfigType
from weir.format.errors import ErrorCode

from .test_admin_configs import SET, alter, alter_incrementally, describe_one, make_broker

GROUP = ResourceType.GROUP
APPEND, DELETE = 2, 1
DYNAMIC, STATIC, DEFAULT = (
    ConfigSource.DYNAMIC_GROUP_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
    ConfigSource.DEFAULT_CONFIG,
)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = make_broker(tmp_path)
    yield broker
    broker.close()


async def configs_of(broker: Broker, group: str) -> dict[str, Any]:
    result = await describe_one(broker, GROUP, group, synonyms=True, documentation=True)
    assert result.error_code == ErrorCode.NONE
    return {c.name: c for c in result.configs}


def synonyms(config: Any) -> list[tuple[str, str, int]]:
    return [(s.name, s.value, s.source) for s in config.synonyms]


async def set_configs(broker: Broker, group: str, **configs: str) -> Any:
    changes = [(name.replace("_", "."), SET, value) for name, value in configs.items()]
    [answer] = (await alter_incrementally(broker, (GROUP, group, changes))).responses
    return answer


async def test_an_unconfigured_group_describes_every_config_typed_with_kafkas_synonyms(
    broker: Broker,
) -> None:
    configs = await configs_of(broker, "g")
    assert {n: (c.value, c.config_type) for n, c in configs.items() if n.startswith("share.")} == {
        "share.session.timeout.ms": ("45000", KafkaConfigType.INT),
        "share.heartbeat.interval.ms": ("5000", KafkaConfigType.INT),
        "share.record.lock.duration.ms": ("30000", KafkaConfigType.INT),
        "share.delivery.count.limit": ("5", KafkaConfigType.INT),
        "share.partition.max.record.locks": ("2000", KafkaConfigType.INT),
        "share.auto.offset.reset": ("latest", KafkaConfigType.STRING),
        "share.isolation.level": ("read_uncommitted", KafkaConfigType.STRING),
        "share.renew.acknowledge.enable": ("true", KafkaConfigType.BOOLEAN),
        "share.assignment.interval.ms": ("1000", KafkaConfigType.INT),
    }
    dead_letter_topic = configs["errors.deadletterqueue.topic.name"]
    assert (dead_letter_topic.value, dead_letter_topic.config_type) == ("", KafkaConfigType.STRING)
    copy_record = configs["errors.deadletterqueue.copy.record.enable"]
    assert (copy_record.value, copy_record.config_type) == ("false", KafkaConfigType.BOOLEAN)
    assert {c.config_source for c in configs.values()} == {DEFAULT}
    assert all(c.documentation and not c.read_only for c in configs.values())
    assert synonyms(configs["share.record.lock.duration.ms"]) == [
        ("group.share.record.lock.duration.ms", "30000", DEFAULT)
    ]
    assert synonyms(configs["consumer.session.timeout.ms"]) == [
        ("group.consumer.session.timeout.ms", "45000", DEFAULT)
    ]
    assert synonyms(configs["share.auto.offset.reset"]) == [
        ("share.auto.offset.reset", "latest", DEFAULT)
    ]


async def test_set_share_configs_are_described_as_the_groups_over_the_default(
    broker: Broker,
) -> None:
    answer = await set_configs(
        broker,
        "g",
        share_delivery_count_limit="4",
        share_record_lock_duration_ms=" 20000 ",
        share_auto_offset_reset=" by_duration:pt1h ",
        share_renew_acknowledge_enable=" TRUE ",
        share_isolation_level="read_committed",
        errors_deadletterqueue_topic_name="orders-dead",
    )
    assert (answer.error_code, answer.error_message) == (ErrorCode.NONE, None)
    configs = await configs_of(broker, "g")
    overridden = {n: c.value for n, c in configs.items() if c.config_source == DYNAMIC}
    assert overridden == {
        "share.delivery.count.limit": "4",
        "share.record.lock.duration.ms": "20000",
        "share.auto.offset.reset": "by_duration:pt1h",
        "share.renew.acknowledge.enable": "true",
        "share.isolation.level": "read_committed",
        "errors.deadletterqueue.topic.name": "orders-dead",
    }
    assert synonyms(configs["share.delivery.count.limit"]) == [
        ("share.delivery.count.limit", "4", DYNAMIC),
        ("group.share.delivery.count.limit", "5", DEFAULT),
    ]
    assert synonyms(configs["share.isolation.level"]) == [
        ("share.isolation.level", "read_committed", DYNAMIC),
        ("share.isolation.level", "read_uncommitted", DEFAULT),
    ]
    config = share_group_config(broker, "g")
    assert (config.delivery_count_limit, config.record_lock_duration_ms) == (4, 20_000)
    assert config.auto_offset_reset == AutoOffsetReset(duration_ms=3_600_000)
    assert (config.read_committed, config.dead_letter_topic) == (True, "orders-dead")
    # Accepted as a config, refused when a dead letter is to be written (Kafka's rule).
    assert dead_letter_refusal(broker, "g", "orders-dead") == (
        "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: "
        "g, topic: orders-dead, prefix: dlq.."
    )

    [deleted] = (
        await alter_incrementally(
            broker, (GROUP, "g", [("share.delivery.count.limit", DELETE, None)])
        )
    ).responses
    assert deleted.error_code == ErrorCode.NONE
    assert (await configs_of(broker, "g"))["share.delivery.count.limit"].config_source == DEFAULT
    assert share_group_config(broker, "g").delivery_count_limit == 5


async def test_a_static_broker_setting_is_the_default_and_a_synonym(tmp_path: Path) -> None:
    broker = make_broker(
        tmp_path,
        group_share_delivery_count_limit=3,
        share_auto_offset_reset="earliest",
        group_share_max_size=50,
    )
    try:
        configs = await configs_of(broker, "g")
        limit = configs["share.delivery.count.limit"]
        assert (limit.value, limit.config_source) == ("3", STATIC)
        assert synonyms(limit) == [
            ("group.share.delivery.count.limit", "3", STATIC),
            ("group.share.delivery.count.limit", "5", DEFAULT),
        ]
        assert synonyms(configs["share.auto.offset.reset"])[0] == (
            "share.auto.offset.reset", "earliest", STATIC,
        )  # fmt: skip
        assert share_group_config(broker, "g").auto_offset_reset == AutoOffsetReset(earliest=True)
        await set_configs(broker, "g", share_delivery_count_limit="4")
        assert synonyms((await configs_of(broker, "g"))["share.delivery.count.limit"]) == [
            ("share.delivery.count.limit", "4", DYNAMIC),
            ("group.share.delivery.count.limit", "3", STATIC),
            ("group.share.delivery.count.limit", "5", DEFAULT),
        ]
        assert share_broker_limits(broker).group_members_max == 50
    finally:
        broker.close()


@pytest.mark.parametrize(
    ("name", "value", "operation", "message"),
    [
        ("share.delivery.count.limit", "1", SET,
         "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
        ("share.delivery.count.limit", "11", SET,
         "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
        ("share.auto.offset.reset", "by_duration:P1W", SET,
         "Invalid value by_duration:P1W for configuration share.auto.offset.reset: Invalid value "
         "`by_duration:P1W` for configuration share.auto.offset.reset. The value must be either "
         "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."),
        ("share.isolation.level", "foo", SET,
         "Invalid value foo for configuration share.isolation.level: "
         "String must be one of: read_committed, read_uncommitted"),
        ("errors.deadletterqueue.topic.name", "__consumer_offsets", SET,
         "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"),
        ("share.renew.acknowledge.enable", "true", APPEND,
         "Can't APPEND to key share.renew.acknowledge.enable because its type is not LIST."),
    ],
)  # fmt: skip
async def test_share_values_kafka_refuses_are_refused_and_not_stored(
    broker: Broker, name: str, value: str, operation: int, message: str
) -> None:
    [answer] = (
        await alter_incrementally(broker, (GROUP, "g", [(name, operation, value)]))
    ).responses
    assert (answer.error_code, answer.error_message) == (ErrorCode.INVALID_CONFIG, message)
    if operation == SET:  # AlterConfigs (the whole set) checks the same
        [legacy] = (await alter(broker, (GROUP, "g", {name: value}))).responses
        assert (legacy.error_code, legacy.error_message) == (ErrorCode.INVALID_CONFIG, message)
    assert broker.controller.group_configs("g") == {}
