"""An unknown topic config gets one wording from every admin request that can
name one (CreateTopics, AlterConfigs, IncrementalAlterConfigs): Kafka's own,
`Unknown topic config name: NAME`, whether the client is the `weir` CLI or
confluent-kafka's AdminClient."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from compat_tests.harness import WeirProcess, create_topic, run_cli, unique_topic_name

UNKNOWN_CONFIG = "foo.bar"
WORDING = f"Unknown topic config name: {UNKNOWN_CONFIG}"
TIMEOUT_S = 20.0

# AlterConfigs (the whole-resource request) is one of the three that must agree.
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")


def broker_message(error: KafkaException) -> str:
    return str(error.args[0].str())


def test_cli_create_and_alter_config_word_an_unknown_config_alike(broker: WeirProcess) -> None:
    created = run_cli(
        "--bootstrap", broker.bootstrap,
        "topic", "create", unique_topic_name("unknown-config"),
        "--config", f"{UNKNOWN_CONFIG}=1",
    )  # fmt: skip
    existing = unique_topic_name("unknown-config")
    create_topic(broker.bootstrap, existing)
    altered = run_cli(
        "--bootstrap", broker.bootstrap,
        "topic", "alter-config", existing, "--set", f"{UNKNOWN_CONFIG}=1",
    )  # fmt: skip
    assert created.returncode != 0 and altered.returncode != 0
    assert WORDING in created.stderr, created.stderr
    assert WORDING in altered.stderr, altered.stderr


def test_admin_client_gets_one_wording_from_create_alter_and_incremental_alter(
    broker: WeirProcess,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    messages = []
    name = unique_topic_name("unknown-config")
    new_topic = NewTopic(name, num_partitions=1, replication_factor=1, config={UNKNOWN_CONFIG: "1"})
    try:
        admin.create_topics([new_topic], request_timeout=TIMEOUT_S)[name].result(TIMEOUT_S)
    except KafkaException as exc:
        messages.append(broker_message(exc))
    existing = unique_topic_name("unknown-config")
    create_topic(broker.bootstrap, existing)
    entry = ConfigEntry(UNKNOWN_CONFIG, "1", incremental_operation=AlterConfigOpType.SET)
    incremental = ConfigResource("topic", existing, incremental_configs=[entry])
    whole = ConfigResource("topic", existing, set_config={UNKNOWN_CONFIG: "1"})
    for futures in (
        admin.incremental_alter_configs([incremental], request_timeout=TIMEOUT_S),
        admin.alter_configs([whole], request_timeout=TIMEOUT_S),
    ):
        for future in futures.values():
            try:
                future.result(TIMEOUT_S)
            except KafkaException as exc:
                messages.append(broker_message(exc))
    assert messages == [WORDING] * 3
