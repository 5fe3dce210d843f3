"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs against a real Broker.

Requests and responses go through the wire layer's encoders and decoders."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig, HostPort
from weir.broker.coordinators.offsets_topic import (
    OFFSETS_TOPIC_CONFIGS,
    OFFSETS_TOPIC_NAME,
    ensure_offsets_topic,
)
from weir.broker.handlers.admin_configs import (
    ConfigOperation,
    ResourceType,
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from weir.broker.handlers.broker_configs import ConfigSource, KafkaConfigType
from weir.controller.controller import TRANSACTION_STATE_TOPIC_NAME
from weir.format.errors import ErrorCode
from weir.log.config import TOPIC_CONFIGS
from weir.wire.protocol import (
    ApiKey,
)

from ..handler_calls import call

TOPIC, BROKER = ResourceType.TOPIC, ResourceType.BROKER
SET, DELETE, APPEND, SUBTRACT = (
    ConfigOperation.SET,
    ConfigOperation.DELETE,
    ConfigOperation.APPEND,
    ConfigOperation.SUBTRACT,
)


def make_broker(data_dir: Path, **settings: Any) -> Broker:
    broker = Broker(BrokerConfig(data_dir=data_dir, **settings))
    broker.open_logs()
    return broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = make_broker(tmp_path)
    yield broker
    broker.close()


def add_topic(broker: Broker, name: str, partitions: int = 1, **configs: str) -> None:
    overrides = {k.replace("_", "."): v for k, v in configs.items()}
    broker.create_topic(broker.controller.plan_topic(name, partitions, 1, configs=overrides))


def overrides_of(broker: Broker, name: str) -> dict[str, str]:
    record = broker.controller.topic(name)
    assert record is not None
    return dict(record.configs)


async def describe(
    broker: Broker,
    *resources: tuple[int, str, list[str] | None],
    version: int = 4,
    synonyms: bool = False,
    documentation: bool = False,
) -> Any:
    body = {
        "resources": [
            {"resource_type": t, "resource_name": n, "configuration_keys": k}
            for t, n, k in resources
        ],
        "include_synonyms": synonyms,
        "include_documentation": documentation,
    }
    return await call(broker, handle_describe_configs, ApiKey.DESCRIBE_CONFIGS, version, body)


async def describe_one(broker: Broker, resource_type: int, name: str, **kw: Any) -> Any:
    keys = kw.pop("keys", None)
    response = await describe(broker, (resource_type, name, keys), **kw)
    assert len(response.results) == 1
    return response.results[0]


async def alter(
    broker: Broker,
    *resources: tuple[int, str, Mapping[str, str | None]],
    version: int = 2,
    validate_only: bool = False,
) -> Any:
    body = {
        "resources": [
            {
                "resource_type": t,
                "resource_name": n,
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
            for t, n, configs in resources
        ],
        "validate_only": validate_only,
    }
    return await call(broker, handle_alter_configs, ApiKey.ALTER_CONFIGS, version, body)


async def alter_incrementally(
    broker: Broker,
    *resources: tuple[int, str, list[tuple[str, int, str | None]]],
    version: int = 1,
    validate_only: bool = False,
) -> Any:
    body = {
        "resources": [
            {
                "resource_type": t,
                "resource_name": n,
                "configs": [
                    {"name": k, "config_operation": op, "value": v} for k, op, v in changes
                ],
            }
            for t, n, changes in resources
        ],
        "validate_only": validate_only,
    }
    return await call(
        broker,
        handle_incremental_alter_configs,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        version,
        body,
    )


# -- DescribeConfigs: topics -------------------------------------------------------------


@pytest.mark.parametrize("version", range(1, 5))
async def test_describe_topic_reports_every_config_with_its_source(
    broker: Broker, version: int
) -> None:
    add_topic(broker, "t", retention_ms="1000", cleanup_policy="compact")
    result = await describe_one(broker, TOPIC, "t", version=version)
    assert result.error_code == ErrorCode.NONE
    assert result.error_message is None
    assert (result.resource_type, result.resource_name) == (TOPIC, "t")
    configs = {c.name: c for c in result.configs}
    assert set(configs) == set(TOPIC_CONFIGS)
    assert configs["retention.ms"].value == "1000"
    assert configs["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert configs["unclean.leader.election.enable"].value == "false"
    assert all(not c.read_only and not c.is_sensitive for c in result.configs)
    assert all(c.synonyms == [] for c in result.configs)
    if version >= 3:
        assert configs["retention.ms"].config_type == KafkaConfigType.LONG
        assert configs["segment.bytes"].config_type == KafkaConfigType.INT
        assert configs["cleanup.policy"].config_type == KafkaConfigType.LIST
        assert configs["preallocate"].config_type == KafkaConfigType.BOOLEAN
        assert configs["message.timestamp.type"].config_type == KafkaConfigType.STRING
        assert configs["min.cleanable.dirty.ratio"].config_type == KafkaConfigType.DOUBLE
        assert all(c.documentation is None for c in result.configs)


async def test_describe_topic_values_are_normalized(broker: Broker) -> None:
    add_topic(broker, "t", retention_ms=" 1000 ", cleanup_policy="compact , delete")
    result = await describe_one(broker, TOPIC, "t")
    configs = {c.name: c.value for c in result.configs}
    assert configs["retention.ms"] == "1000"
    assert configs["cleanup.policy"] == "compact,delete"


async def test_describe_specific_keys(broker: Broker) -> None:
    add_topic(broker, "t", retention_ms="1000")
    result = await describe_one(
        broker, TOPIC, "t", keys=["retention.ms", "segment.ms", "no.such.key"]
    )
    assert [(c.name, c.value) for c in result.configs] == [
        ("retention.ms", "1000"),
        ("segment.ms", "604800000"),
    ]


async def test_describe_empty_key_list_means_every_key(broker: Broker) -> None:
    add_topic(broker, "t")
    result = await describe_one(broker, TOPIC, "t", keys=[])
    assert {c.name for c in result.configs} == set(TOPIC_CONFIGS)


async def test_describe_with_synonyms_and_documentation(broker: Broker) -> None:
    add_topic(broker, "t", retention_ms="1000")
    result = await describe_one(broker, TOPIC, "t", synonyms=True, documentation=True)
    configs = {c.name: c for c in result.configs}
    retention = configs["retention.ms"]
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG),
    ]
    segment = configs["segment.bytes"]
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    ]
    assert configs["max.message.bytes"].synonyms[0].name == "message.max.bytes"
    # a topic config with no broker-level default has no synonym
    assert configs["leader.replication.throttled.replicas"].synonyms == []
    assert configs["leader.replication.throttled.replicas"].value == ""
    assert all(c.documentation for c in result.configs)


async def test_describe_unknown_topic_fails_only_that_resource(broker: Broker) -> None:
    add_topic(broker, "t")
    response = await describe(broker, (TOPIC, "nope", None), (TOPIC, "t", ["retention.ms"]))
    missing, found = response.results
    assert (missing.resource_name, missing.error_code) == (
        "nope",
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )
    assert missing.configs == []
    assert found.error_code == ErrorCode.NONE and len(found.configs) == 1


async def test_describe_invalid_topic_name(broker: Broker) -> None:
    result = await describe_one(broker, TOPIC, "no spaces")
    assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


# -- DescribeConfigs: broker -------------------------------------------------------------


async def test_describe_broker_reports_static_read_only_configs(tmp_path: Path) -> None:
    broker = make_broker(
        tmp_path,
        node_id=3,
        kafka_listen=HostPort("0.0.0.0", 9192),
        kafka_advertise=HostPort("kafka.example", 19092),
        default_partition_count=6,
    )
    try:
        result = await describe_one(broker, BROKER, "3", synonyms=True, documentation=True)
    finally:
        broker.close()
    assert result.error_code == ErrorCode.NONE
    configs = {c.name: c for c in result.configs}
    assert configs["node.id"].value == "3"
    assert configs["broker.id"].value == "3"
    assert configs["log.dirs"].value == str(tmp_path)
    assert configs["listeners"].value == "PLAINTEXT://0.0.0.0:9192"
    assert configs["advertised.listeners"].value == "PLAINTEXT://kafka.example:19092"
    assert configs["num.partitions"].value == "6"
    assert configs["num.partitions"].config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.value, s.source) for s in configs["num.partitions"].synonyms] == [
        ("6", ConfigSource.STATIC_BROKER_CONFIG),
        ("1", ConfigSource.DEFAULT_CONFIG),
    ]
    assert configs["node.id"].config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert configs["auto.create.topics.enable"].value == "true"
    assert configs["auto.create.topics.enable"].config_source == ConfigSource.DEFAULT_CONFIG
    assert configs["message.max.bytes"].value == "1048588"
    assert configs["log.retention.ms"].value == "604800000"
    assert configs["log.segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert configs["log.cleanup.policy"].config_type == KafkaConfigType.LIST
    assert all(c.read_only and not c.is_sensitive for c in result.configs)
    assert all(c.documentation for c in result.configs)
    assert [c.name for c in result.configs] == sorted(configs)


async def test_describe_broker_specific_keys(broker: Broker) -> None:
    result = await describe_one(broker, BROKER, "1", keys=["node.id", "log.retention.ms"])
    assert [(c.name, c.value) for c in result.configs] == [
        ("log.retention.ms", "604800000"),
        ("node.id", "1"),
    ]


async def test_describe_broker_default_resource_has_no_dynamic_defaults(broker: Broker) -> None:
    result = await describe_one(broker, BROKER, "")
    assert (result.error_code, list(result.configs)) == (ErrorCode.NONE, [])


@pytest.mark.parametrize("name", ["2", "one", " 1", "1.0"])
async def test_describe_other_broker_is_invalid(broker: Broker, name: str) -> None:
    result = await describe_one(broker, BROKER, name)
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert result.error_message
    assert result.configs == []


@pytest.mark.parametrize("resource_type", [0, 1, 8, 16, 99])
async def test_describe_unsupported_resource_types(broker: Broker, resource_type: int) -> None:
    result = await describe_one(broker, resource_type, "1")
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert result.resource_type == resource_type


# -- AlterConfigs ------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 3))
async def test_alter_configs_replaces_the_override_set(broker: Broker, version: int) -> None:
    add_topic(broker, "t", retention_ms="1000", segment_ms="5000")
    response = await alter(
        broker, (TOPIC, "t", {"retention.bytes": "4096", "cleanup.policy": "delete"}),
        version=version,
    )  # fmt: skip
    result = response.responses[0]
    assert (result.resource_type, result.resource_name) == (TOPIC, "t")
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
    assert overrides_of(broker, "t") == {"retention.bytes": "4096", "cleanup.policy": "delete"}
    replica = broker.partition("t", 0)
    assert replica is not None
    assert replica.log.config.retention_bytes == 4096
    assert replica.log.config.retention_ms == 604_800_000
    described = await describe_one(broker, TOPIC, "t", keys=["retention.bytes", "retention.ms"])
    assert [(c.name, c.value, c.config_source) for c in described.configs] == [
        ("retention.bytes", "4096", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG),
    ]


async def test_alter_configs_applies_to_every_partition_and_persists(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    add_topic(broker, "t", partitions=3)
    response = await alter(broker, (TOPIC, "t", {"max.message.bytes": "2048"}))
    assert response.responses[0].error_code == ErrorCode.NONE
    for index in range(3):
        replica = broker.partition("t", index)
        assert replica is not None and replica.log.config.max_message_bytes == 2048
    broker.close()
    again = make_broker(tmp_path)
    try:
        assert overrides_of(again, "t") == {"max.message.bytes": "2048"}
        replica = again.partition("t", 2)
        assert replica is not None and replica.log.config.max_message_bytes == 2048
    finally:
        again.close()


async def test_alter_configs_with_no_configs_clears_the_overrides(broker: Broker) -> None:
    add_topic(broker, "t", retention_ms="1000")
    response = await alter(broker, (TOPIC, "t", {}))
    assert response.responses[0].error_code == ErrorCode.NONE
    assert overrides_of(broker, "t") == {}


async def test_alter_configs_validate_only_changes_nothing(broker: Broker) -> None:
    add_topic(broker, "t", retention_ms="1000")
    response = await alter(broker, (TOPIC, "t", {"retention.ms": "5"}), validate_only=True)
    assert response.responses[0].error_code == ErrorCode.NONE
    assert overrides_of(broker, "t") == {"retention.ms": "1000"}
    bad = await alter(broker, (TOPIC, "t", {"retention.ms": "x"}), validate_only=True)
    assert bad.responses[0].error_code == ErrorCode.INVALID_CONFIG


@pytest.mark.parametrize(
    ("configs", "error"),
    [
        ({"retention.ms": "soon"}, ErrorCode.INVALID_CONFIG),
        ({"retention.ms": "-7"}, ErrorCode.INVALID_CONFIG),
        ({"segment.bytes": "10"}, ErrorCode.INVALID_CONFIG),
        ({"no.such.config": "1"}, ErrorCode.INVALID_CONFIG),
        ({"retention.ms": "5", "cleanup.policy": "archive"}, ErrorCode.INVALID_CONFIG),
        ({"retention.ms": None}, ErrorCode.INVALID_REQUEST),
    ],
)
async def test_alter_configs_refuses_bad_configs_whole(
    broker: Broker, configs: dict[str, str | None], error: ErrorCode
) -> None:
    add_topic(broker, "t", retention_ms="1000")
    response = await alter(broker, (TOPIC, "t", configs))
    assert response.responses[0].error_code == error
    assert response.responses[0].error_message
    assert overrides_of(broker, "t") == {"retention.ms": "1000"}


@pytest.mark.parametrize("validate_only", [False, True])
async def test_internal_topic_configs_cannot_be_altered(
    broker: Broker, validate_only: bool
) -> None:
    ensure_offsets_topic(broker, partition_count=1)
    client_configs = {"cleanup.policy": "delete", "retention.ms": "3000"}
    legacy = await alter(
        broker,
        (TOPIC, OFFSETS_TOPIC_NAME, client_configs),
        (TOPIC, OFFSETS_TOPIC_NAME + "-not", {}),
        (TOPIC, TRANSACTION_STATE_TOPIC_NAME, client_configs),
        validate_only=validate_only,
    )
    incremental = await alter_incrementally(
        broker,
        (
            TOPIC,
            OFFSETS_TOPIC_NAME,
            [("retention.ms", SET, "3000"), ("cleanup.policy", DELETE, None)],
        ),
        (TOPIC, TRANSACTION_STATE_TOPIC_NAME, [("retention.ms", SET, "3000")]),
        validate_only=validate_only,
    )
    assert [(r.resource_name, r.error_code) for r in legacy.responses] == [
        (OFFSETS_TOPIC_NAME, ErrorCode.INVALID_REQUEST),
        (OFFSETS_TOPIC_NAME + "-not", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TRANSACTION_STATE_TOPIC_NAME, ErrorCode.INVALID_REQUEST),
    ]
    assert [r.error_code for r in incremental.responses] == [ErrorCode.INVALID_REQUEST] * 2
    assert "internal topic" in incremental.responses[0].error_message
    assert overrides_of(broker, OFFSETS_TOPIC_NAME) == OFFSETS_TOPIC_CONFIGS
    replica = broker.partition(OFFSETS_TOPIC_NAME, 0)
    assert replica is not None and not replica.log.config.deletes_by_retention


async def test_alter_configs_unknown_topic(broker: Broker) -> None:
    response = await alter(broker, (TOPIC, "nope", {"retention.ms": "1"}))
    assert response.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_alter_configs_duplicate_resources_and_keys(broker: Broker) -> None:
    add_topic(broker, "t")
    add_topic(broker, "u")
    response = await alter(
        broker,
        (TOPIC, "t", {"retention.ms": "1"}),
        (TOPIC, "u", {"retention.ms": "2"}),
        (TOPIC, "t", {"retention.ms": "3"}),
    )
    assert [r.error_code for r in response.responses] == [
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
    ]
    assert overrides_of(broker, "t") == {}
    assert overrides_of(broker, "u") == {"retention.ms": "2"}
    body = {
        "resources": [
            {
                "resource_type": TOPIC,
                "resource_name": "t",
                "configs": [
                    {"name": "retention.ms", "value": "1"},
                    {"name": "retention.ms", "value": "2"},
                ],
            }
        ],
        "validate_only": False,
    }
    dup_keys = await call(broker, handle_alter_configs, ApiKey.ALTER_CONFIGS, 1, body)
    assert dup_keys.responses[0].error_code == ErrorCode.INVALID_REQUEST
    assert overrides_of(broker, "t") == {}


async def test_broker_configs_are_static(broker: Broker) -> None:
    response = await alter(
        broker, (BROKER, "1", {"num.partitions": "3"}), (BROKER, "", {"log.retention.ms": "1"})
    )
    for result in response.responses:
        assert result.error_code == ErrorCode.INVALID_REQUEST
        assert "static" in result.error_message
    nothing = await alter(broker, (BROKER, "1", {}))
    assert nothing.responses[0].error_code == ErrorCode.NONE
    other = await alter(broker, (BROKER, "7", {}))
    assert other.responses[0].error_code == ErrorCode.INVALID_REQUEST
    assert "expected 1" in other.responses[0].error_message


async def test_alter_configs_unsupported_resource_type(broker: Broker) -> None:
    response = await alter(broker, (8, "1", {"root": "DEBUG"}))
    assert response.responses[0].error_code == ErrorCode.INVALID_REQUEST


# -- IncrementalAlterConfigs -------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
async def test_incremental_set_and_delete(broker: Broker, version: int) -> None:
    add_topic(broker, "t", retention_ms="1000", segment_ms="5000")
    response = await alter_incrementally(
        broker,
        (TOPIC, "t", [("retention.bytes", SET, "4096"), ("segment.ms", DELETE, None)]),
        version=version,
    )
    result = response.responses[0]
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
    assert (result.resource_type, result.resource_name) == (TOPIC, "t")
    assert overrides_of(broker, "t") == {"retention.ms": "1000", "retention.bytes": "4096"}
    replica = broker.partition("t", 0)
    assert replica is not None
    assert replica.log.config.retention_bytes == 4096
    assert replica.log.config.segment_ms == 604_800_000


async def test_incremental_delete_of_an_absent_override_is_a_no_op(broker: Broker) -> None:
    add_topic(broker, "t")
    response = await alter_incrementally(broker, (TOPIC, "t", [("retention.ms", DELETE, "x")]))
    assert response.responses[0].error_code == ErrorCode.NONE
    assert overrides_of(broker, "t") == {}


async def test_incremental_append_and_subtract_list_configs(broker: Broker) -> None:
    add_topic(broker, "t")
    appended = await alter_incrementally(
        broker, (TOPIC, "t", [("cleanup.policy", APPEND, "compact")])
    )
    assert appended.responses[0].error_code == ErrorCode.NONE
    assert overrides_of(broker, "t") == {"cleanup.policy": "delete,compact"}
    replica = broker.partition("t", 0)
    assert replica is not None and replica.log.config.cleanup_policy == ("delete", "compact")
    again = await alter_incrementally(broker, (TOPIC, "t", [("cleanup.policy", APPEND, "compact")]))
    assert again.responses[0].error_code == ErrorCode.NONE
    assert overrides_of(broker, "t") == {"cleanup.policy": "delete,compact"}
    subtracted = await alter_incrementally(
        broker, (TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")])
    )
    assert subtracted.responses[0].error_code == ErrorCode.NONE
    assert overrides_of(broker, "t") == {"cleanup.policy": "compact"}
    result = await describe_one(broker, TOPIC, "t", keys=["cleanup.policy"])
    assert [(c.value, c.config_source) for c in result.configs] == [
        ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    ]


async def test_incremental_append_to_an_empty_default_list(broker: Broker) -> None:
    add_topic(broker, "t")
    response = await alter_incrementally(
        broker, (TOPIC, "t", [("leader.replication.throttled.replicas", APPEND, "0:1,1:1")])
    )
    assert response.responses[0].error_code == ErrorCode.NONE
    assert overrides_of(broker, "t") == {"leader.replication.throttled.replicas": "0:1,1:1"}


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ([("retention.ms", APPEND, "5")], ErrorCode.INVALID_CONFIG),
        ([("retention.ms", SUBTRACT, "5")], ErrorCode.INVALID_CONFIG),
        ([("retention.ms", SET, "soon")], ErrorCode.INVALID_CONFIG),
        ([("no.such.config", SET, "1")], ErrorCode.INVALID_CONFIG),
        ([("no.such.config", DELETE, None)], ErrorCode.INVALID_CONFIG),
        ([("cleanup.policy", APPEND, "shred")], ErrorCode.INVALID_CONFIG),
        ([("retention.ms", SET, None)], ErrorCode.INVALID_REQUEST),
        ([("retention.ms", 7, "1")], ErrorCode.INVALID_REQUEST),
        ([("retention.ms", SET, "1"), ("retention.ms", DELETE, None)], ErrorCode.INVALID_REQUEST),
        ([("segment.ms", SET, "1"), ("retention.ms", SET, "-9")], ErrorCode.INVALID_CONFIG),
    ],
)
async def test_incremental_refuses_bad_changes_whole(
    broker: Broker, changes: list[tuple[str, int, str | None]], error: ErrorCode
) -> None:
    add_topic(broker, "t", retention_ms="1000")
    response = await alter_incrementally(broker, (TOPIC, "t", changes))
    assert response.responses[0].error_code == error
    assert response.responses[0].error_message
    assert overrides_of(broker, "t") == {"retention.ms": "1000"}


async def test_incremental_validate_only_changes_nothing(broker: Broker) -> None:
    add_topic(broker, "t", retention_ms="1000")
    response = await alter_incrementally(
        broker,
        (TOPIC, "t", [("retention.ms", DELETE, None), ("segment.ms", SET, "10")]),
        validate_only=True,
    )
    assert response.responses[0].error_code == ErrorCode.NONE
    assert overrides_of(broker, "t") == {"retention.ms": "1000"}


async def test_incremental_resources_fail_independently(broker: Broker) -> None:
    add_topic(broker, "t")
    response = await alter_incrementally(
        broker,
        (TOPIC, "nope", [("retention.ms", SET, "1")]),
        (TOPIC, "t", [("retention.ms", SET, "2")]),
        (BROKER, "1", [("log.retention.ms", SET, "1")]),
        (BROKER, "1", []),
    )
    assert [r.error_code for r in response.responses] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
    ]
    assert overrides_of(broker, "t") == {"retention.ms": "2"}


async def test_incremental_broker_changes_are_refused_as_static(broker: Broker) -> None:
    response = await alter_incrementally(broker, (BROKER, "1", [("num.partitions", SET, "3")]))
    assert response.responses[0].error_code == ErrorCode.INVALID_REQUEST
    assert "static" in response.responses[0].error_message
    nothing = await alter_incrementally(broker, (BROKER, "", []))
    assert nothing.responses[0].error_code == ErrorCode.NONE
