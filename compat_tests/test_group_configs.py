"""Group configs (KIP-848's GROUP config resource, type 32) against the real broker:
IncrementalAlterConfigs/AlterConfigs and DescribeConfigs on the wire and through
confluent-kafka's admin client, validated against the broker's bounds as Kafka
does, kept across a restart, and used by the KIP-848 coordinator for that group:
the heartbeat interval it tells members and the session timeout that fences them."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests.harness import WeirProcess, create_topic, unique_topic_name
from compat_tests.wire_client import connect, round_trip

GROUP_RESOURCE = 32
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
NONE, INVALID_REQUEST, INVALID_CONFIG = 0, 42, 40
DYNAMIC_GROUP_CONFIG, DEFAULT_CONFIG = 8, 5
BOOLEAN_TYPE, STRING_TYPE, INT_TYPE = 1, 2, 3
SET, DELETE = 0, 1
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
TIMEOUT_S = 20.0


def new_group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def alter(broker: WeirProcess, group: str, *ops: tuple[str, str | None, int], **kw: Any) -> Any:
    body = {
        "resources": [
            {
                "resource_type": GROUP_RESOURCE,
                "resource_name": group,
                "configs": [
                    {"name": name, "config_operation": op, "value": value}
                    for name, value, op in ops
                ],
            }
        ],
        "validate_only": kw.get("validate_only", False),
    }
    with connect(broker) as sock:
        [answer] = round_trip(sock, INCREMENTAL_ALTER_CONFIGS, 1, body).responses
    return answer


def describe(broker: WeirProcess, group: str) -> dict[str, Any]:
    body = {
        "resources": [{"resource_type": GROUP_RESOURCE, "resource_name": group}],
        "include_synonyms": True,
        "include_documentation": True,
    }
    with connect(broker) as sock:
        [result] = round_trip(sock, DESCRIBE_CONFIGS, 4, body).results
    assert (result.error_code, result.resource_type) == (NONE, GROUP_RESOURCE)
    return {c.name: c for c in result.configs}


def values(
    broker: WeirProcess, group: str, names: tuple[str, ...] = (SESSION, HEARTBEAT)
) -> dict[str, tuple[str, int]]:
    """The value and source of each of `names` (the KIP-848 ones unless told)."""
    described = describe(broker, group)
    return {name: (described[name].value, described[name].config_source) for name in names}


def heartbeat(broker: WeirProcess, group: str, topic: str) -> Any:
    """A new KIP-848 member joins `group` (epoch 0)."""
    body = {
        "group_id": group,
        "member_id": str(uuid.uuid4()),
        "member_epoch": 0,
        "rebalance_timeout_ms": 30_000,
        "subscribed_topic_names": [topic],
        "topic_partitions": [],
    }
    with connect(broker) as sock:
        answer = round_trip(sock, CONSUMER_GROUP_HEARTBEAT, 0, body)
    assert answer.error_code == NONE, answer.error_message
    return answer


def members(broker: WeirProcess, group: str) -> int:
    with connect(broker) as sock:
        [described] = round_trip(sock, CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group]}).groups
    return len(described.members)


def test_describe_reports_the_brokers_defaults_for_an_unconfigured_group(
    broker: WeirProcess,
) -> None:
    configs = describe(broker, new_group())
    assert {n: (c.value, c.config_source, c.config_type) for n, c in configs.items()} == {
        SESSION: ("45000", DEFAULT_CONFIG, INT_TYPE),
        HEARTBEAT: ("5000", DEFAULT_CONFIG, INT_TYPE),
        # Kafka 4.4's share group configs and their defaults (kafka-configs --describe --all).
        "share.session.timeout.ms": ("45000", DEFAULT_CONFIG, INT_TYPE),
        "share.heartbeat.interval.ms": ("5000", DEFAULT_CONFIG, INT_TYPE),
        "share.record.lock.duration.ms": ("30000", DEFAULT_CONFIG, INT_TYPE),
        "share.delivery.count.limit": ("5", DEFAULT_CONFIG, INT_TYPE),
        "share.partition.max.record.locks": ("2000", DEFAULT_CONFIG, INT_TYPE),
        "share.auto.offset.reset": ("latest", DEFAULT_CONFIG, STRING_TYPE),
        "share.isolation.level": ("read_uncommitted", DEFAULT_CONFIG, STRING_TYPE),
        "share.renew.acknowledge.enable": ("true", DEFAULT_CONFIG, BOOLEAN_TYPE),
        "share.assignment.interval.ms": ("1000", DEFAULT_CONFIG, INT_TYPE),
        "errors.deadletterqueue.topic.name": ("", DEFAULT_CONFIG, STRING_TYPE),
        "errors.deadletterqueue.copy.record.enable": ("false", DEFAULT_CONFIG, BOOLEAN_TYPE),
        # Weir's own (delays, expiry, key ordering; docs/queues.md): off by default.
        "weir.share.record.headers.enable": ("false", DEFAULT_CONFIG, BOOLEAN_TYPE),
        "weir.share.record.ttl.ms": ("0", DEFAULT_CONFIG, INT_TYPE),
        "weir.share.release.backoff.initial.ms": ("0", DEFAULT_CONFIG, INT_TYPE),
        "weir.share.release.backoff.max.ms": ("60000", DEFAULT_CONFIG, INT_TYPE),
        "weir.share.key.ordering.enable": ("false", DEFAULT_CONFIG, BOOLEAN_TYPE),
    }
    assert all(c.documentation for c in configs.values())
    [synonym] = configs["share.record.lock.duration.ms"].synonyms
    assert (synonym.name, synonym.value, synonym.source) == (
        "group.share.record.lock.duration.ms", "30000", DEFAULT_CONFIG,
    )  # fmt: skip


def test_set_and_delete_change_what_describe_reports(broker: WeirProcess) -> None:
    group = new_group()
    answer = alter(broker, group, (SESSION, "50000", SET), (HEARTBEAT, "7000", SET))
    assert (answer.error_code, answer.resource_type, answer.resource_name) == (
        NONE, GROUP_RESOURCE, group,
    )  # fmt: skip
    assert values(broker, group) == {
        SESSION: ("50000", DYNAMIC_GROUP_CONFIG),
        HEARTBEAT: ("7000", DYNAMIC_GROUP_CONFIG),
    }
    # As Kafka lists them: the group's override, then the broker setting's default.
    assert [(s.name, s.value, s.source) for s in describe(broker, group)[SESSION].synonyms] == [
        (SESSION, "50000", DYNAMIC_GROUP_CONFIG),
        ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG),
    ]
    assert alter(broker, group, (HEARTBEAT, None, DELETE)).error_code == NONE
    assert values(broker, group) == {
        SESSION: ("50000", DYNAMIC_GROUP_CONFIG),
        HEARTBEAT: ("5000", DEFAULT_CONFIG),
    }


@pytest.mark.parametrize(
    ("name", "value", "error", "reason"),
    [
        (SESSION, "44999", INVALID_CONFIG,
         "must be greater than or equal to group.consumer.min.session.timeout.ms"),
        (SESSION, "60001", INVALID_CONFIG,
         "must be less than or equal to group.consumer.max.session.timeout.ms"),
        (HEARTBEAT, "15001", INVALID_CONFIG,
         "must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
        (HEARTBEAT, "1", INVALID_CONFIG,
         "must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
        ("consumer.assignor", "range", INVALID_CONFIG, "Unknown group config name"),
    ],
)  # fmt: skip
def test_values_outside_the_brokers_bounds_are_refused_and_not_stored(
    broker: WeirProcess, name: str, value: str, error: int, reason: str
) -> None:
    group = new_group()
    answer = alter(broker, group, (name, value, SET))
    assert answer.error_code == error
    assert reason in answer.error_message
    assert {v[1] for v in values(broker, group).values()} == {DEFAULT_CONFIG}


def test_validate_only_and_an_unnamed_group_change_nothing(broker: WeirProcess) -> None:
    group = new_group()
    assert alter(broker, group, (HEARTBEAT, "6000", SET), validate_only=True).error_code == NONE
    assert values(broker, group)[HEARTBEAT] == ("5000", DEFAULT_CONFIG)
    assert alter(broker, "", (HEARTBEAT, "6000", SET)).error_code == INVALID_REQUEST


def test_legacy_alter_configs_replaces_the_groups_overrides(broker: WeirProcess) -> None:
    group = new_group()
    alter(broker, group, (SESSION, "50000", SET))
    body = {
        "resources": [
            {
                "resource_type": GROUP_RESOURCE,
                "resource_name": group,
                "configs": [{"name": HEARTBEAT, "value": "6000"}],
            }
        ],
        "validate_only": False,
    }
    with connect(broker) as sock:
        [answer] = round_trip(sock, ALTER_CONFIGS, 2, body).responses
    assert answer.error_code == NONE
    assert values(broker, group) == {
        SESSION: ("45000", DEFAULT_CONFIG),
        HEARTBEAT: ("6000", DYNAMIC_GROUP_CONFIG),
    }


def test_confluent_admin_alters_and_describes_group_configs(broker: WeirProcess) -> None:
    group = new_group()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(HEARTBEAT, "8000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_S)
    [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    entries = future.result(timeout=TIMEOUT_S)
    assert (entries[HEARTBEAT].value, int(entries[HEARTBEAT].source)) == (
        "8000",
        DYNAMIC_GROUP_CONFIG,
    )
    assert (entries[SESSION].value, int(entries[SESSION].source)) == ("45000", DEFAULT_CONFIG)

    bad = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(SESSION, "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException, match="min.session.timeout.ms"):
        admin.incremental_alter_configs([bad])[bad].result(timeout=TIMEOUT_S)
    assert broker.connection_trouble() == {}


def test_confluent_admin_alters_and_describes_share_group_configs(broker: WeirProcess) -> None:
    """Share group configs (KIP-932) through confluent-kafka's AdminClient: typed
    values set and described, and what Kafka 4.4 refuses refused with its words."""
    group = new_group()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    share_configs = {
        "share.record.lock.duration.ms": "20000",
        "share.delivery.count.limit": "3",
        "share.auto.offset.reset": "by_duration:PT1H",
        "share.isolation.level": "read_committed",
        "share.renew.acknowledge.enable": "false",
        "errors.deadletterqueue.topic.name": "dlq.orders",
        "errors.deadletterqueue.copy.record.enable": "true",
    }
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in share_configs.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_S)
    [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    entries = future.result(timeout=TIMEOUT_S)
    for name, value in share_configs.items():
        assert (entries[name].value, int(entries[name].source)) == (value, DYNAMIC_GROUP_CONFIG)
    session = entries["share.session.timeout.ms"]
    assert (session.value, int(session.source)) == ("45000", DEFAULT_CONFIG)

    for name, value, reason in [
        ("share.delivery.count.limit", "1",
         "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
        ("share.record.lock.duration.ms", "60001",
         "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
        ("share.auto.offset.reset", "by_duration:P1D!",
         "The value must be either 'earliest', 'latest' or of the format "
         "'by_duration:<PnDTnHnMn.nS>'."),
        ("share.isolation.level", "foo",
         "String must be one of: read_committed, read_uncommitted"),
    ]:  # fmt: skip
        bad = ConfigResource(
            ResourceType.GROUP,
            group,
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            ],
        )
        with pytest.raises(KafkaException) as refused:
            admin.incremental_alter_configs([bad])[bad].result(timeout=TIMEOUT_S)
        error = refused.value.args[0]
        assert error.code() == INVALID_CONFIG
        assert reason in error.str()
    assert values(broker, group, ("share.delivery.count.limit",)) == {
        "share.delivery.count.limit": ("3", DYNAMIC_GROUP_CONFIG)
    }
    assert broker.connection_trouble() == {}


@pytest.fixture
def fast_groups_broker(tmp_path: Path) -> Any:
    """A broker whose bounds allow short KIP-848 session timeouts (its own default
    stays Kafka's 45 s)."""
    proc = WeirProcess.configured(
        tmp_path,
        "group_consumer_min_session_timeout_ms = 1000\n"
        "group_consumer_min_heartbeat_interval_ms = 500\n"
        "offsets_topic_partition_count = 3\n",
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


@pytest.mark.timeout(120)
def test_the_coordinator_uses_a_groups_configs_and_they_survive_a_restart(
    fast_groups_broker: WeirProcess,
) -> None:
    broker = fast_groups_broker
    topic = unique_topic_name("group-configs")
    create_topic(broker.bootstrap, topic)
    configured, control = new_group(), new_group()
    alter(broker, configured, (SESSION, "2000", SET), (HEARTBEAT, "700", SET))
    assert heartbeat(broker, configured, topic).heartbeat_interval_ms == 700
    assert heartbeat(broker, control, topic).heartbeat_interval_ms == 5000

    broker.restart()
    assert values(broker, configured) == {
        SESSION: ("2000", DYNAMIC_GROUP_CONFIG),
        HEARTBEAT: ("700", DYNAMIC_GROUP_CONFIG),
    }
    joined_s = time.monotonic()
    assert heartbeat(broker, configured, topic).heartbeat_interval_ms == 700
    heartbeat(broker, control, topic)
    # The configured group's silent members are fenced after its 2 s session
    # timeout; the control group's (45 s, the broker's default) are not.
    while members(broker, configured) > 0:
        assert time.monotonic() - joined_s < 20, "the configured session timeout never fenced"
        time.sleep(0.2)
    assert time.monotonic() - joined_s >= 1.9
    assert members(broker, control) == 2
    assert broker.connection_trouble() == {}
