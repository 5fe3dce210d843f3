"""Share-group administration against the real `weir`, with Kafka's own tool and
confluent-kafka's AdminClient.

Kafka's `kafka-share-groups.sh` is `ShareGroupCommand` from kafka-tools 4.4.0 (it drives
the Java Admin client: ListGroups with the share type, ShareGroupDescribe,
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets and
DeleteGroups). Each group here has been consumed by a confluent-kafka ShareConsumer
that accepted offsets 0-2 of both partitions, released offset 3 and rejected offset 4
(five records a partition), so its share state says: start offset 3, one record past
it complete (the rejected one), lag 5 - 3 - 1 = 1. The same consumer against Kafka 4.4
gives the same lag; Kafka's start offset can stay lower (it counts the completed records
above it instead).

confluent-kafka 2.16.1 has no share-group admin calls; its `list_consumer_groups` leaves
share groups out (as against Kafka 4.4), and `delete_consumer_groups` deletes one.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    AcknowledgeType,
    KafkaError,
    KafkaException,
    Producer,
    ShareConsumer,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat_tests.harness import WeirProcess, clean_environment, unique_topic_name
from compat_tests.maven import KAFKA_CONFIG_TOOLS_DIR, require_maven_build

pytestmark = pytest.mark.timeout(240)

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
TOOLS_DIR = KAFKA_CONFIG_TOOLS_DIR  # kafka-tools 4.4.0
TOOL_TIMEOUT_S = 60
CONSUME_DEADLINE_S = 40
RECORDS_PER_PARTITION = 5
SETTINGS_TOML = (
    "offsets_topic_partition_count = 5\n"
    "group_share_min_record_lock_duration_ms = 1000\n"
    "group_share_min_session_timeout_ms = 6000\n"
    "group_share_min_heartbeat_interval_ms = 500\n"
    "group_share_session_timeout_ms = 6000\n"
    "group_share_heartbeat_interval_ms = 500\n"
)
# What the consumer does with each offset (both partitions).
ACCEPTED = (0, 1, 2)
RELEASED = 3
REJECTED = 4


@pytest.fixture(scope="module")
def admin_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("weir-share-admin"), SETTINGS_TOML)
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture
def broker(request: pytest.FixtureRequest, admin_broker: WeirProcess) -> WeirProcess:
    request.node.__dict__.setdefault("_weir_processes", []).append(admin_broker)
    return admin_broker


def run_share_groups(broker: WeirProcess, *args: str) -> list[str]:
    """kafka-share-groups.sh ARGS: its non-blank output lines (it exits 0 on errors too,
    printing them)."""
    java = shutil.which("java")
    require_maven_build(TOOLS_DIR / "kafka-tools-4.4.0.jar")
    assert java is not None, "java is not on PATH (scripts/test installs a JDK)"
    command = [
        java,
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        f"{TOOLS_DIR}/*",
        SHARE_GROUPS,
        "--bootstrap-server",
        broker.bootstrap,
        *args,
    ]
    completed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        env=clean_environment(),
        check=False,
    )
    output = completed.stdout + completed.stderr
    return [" ".join(line.split()) for line in output.splitlines() if line.strip()]


def admin(broker: WeirProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def consumed_group(broker: WeirProcess, name: str) -> tuple[str, str]:
    """A topic (2 partitions, 5 records each) and an empty share group that consumed it
    (see the module's docstring). Returns (topic, group)."""
    topic, group = unique_topic_name(f"{name}-t"), unique_topic_name(f"{name}-g")
    client = admin(broker)
    for future in client.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition in (0, 1):
        for offset in range(RECORDS_PER_PARTITION):
            producer.produce(topic, value=f"{partition}-{offset}".encode(), partition=partition)
    assert producer.flush(30) == 0
    configs = {
        "share.auto.offset.reset": "earliest",
        # Offset 3 is released on each sighting: it must not reach the limit meanwhile.
        "share.delivery.count.limit": "10",
    }
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    consume(broker, topic, group)
    return topic, group


def share_consumer(
    broker: WeirProcess, group: str, topic: str, mode: str = "explicit"
) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": mode,
        }
    )
    consumer.subscribe([topic])
    return consumer


def consume(broker: WeirProcess, topic: str, group: str) -> None:
    """Accept, release and reject as the module says, until every offset was handled."""
    consumer = share_consumer(broker, group, topic)
    handled: set[tuple[int, int]] = set()
    wanted = {(p, o) for p in (0, 1) for o in range(RECORDS_PER_PARTITION)}
    deadline = time.monotonic() + CONSUME_DEADLINE_S
    try:
        while handled != wanted:
            assert time.monotonic() < deadline, f"handled only {sorted(handled)}"
            messages = [m for m in consumer.poll(1.0) if m.error() is None]
            for message in messages:
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                if offset == RELEASED:
                    kind = AcknowledgeType.RELEASE
                elif offset == REJECTED:
                    kind = AcknowledgeType.REJECT
                else:
                    kind = AcknowledgeType.ACCEPT
                consumer.acknowledge(message, kind)
                handled.add((partition, offset))
            if messages:
                consumer.commit_sync(10.0)
    finally:
        consumer.close()


def offsets_table(lines: list[str], group: str) -> list[str]:
    return [line for line in lines if line.startswith(f"{group} ")]


def test_kafka_share_groups_lists_and_describes_a_consumed_group(broker: WeirProcess) -> None:
    topic, group = consumed_group(broker, "describe")
    assert group in run_share_groups(broker, "--list")
    assert f"{group} Empty" in run_share_groups(broker, "--list", "--state")
    described = run_share_groups(broker, "--describe", "--group", group)
    assert "GROUP TOPIC PARTITION START-OFFSET LAG" in described
    assert offsets_table(described, group) == [f"{group} {topic} 0 3 1", f"{group} {topic} 1 3 1"]
    verbose = run_share_groups(broker, "--describe", "--group", group, "--offsets", "--verbose")
    assert offsets_table(verbose, group) == [
        f"{group} {topic} 0 0 3 1",
        f"{group} {topic} 1 0 3 1",
    ]
    state = run_share_groups(broker, "--describe", "--group", group, "--state")
    assert f"Share group '{group}' has no active members." in state
    assert offsets_table(state, group) == [f"{group} {broker.bootstrap} (1) Empty 0"]
    members = run_share_groups(broker, "--describe", "--group", group, "--members")
    assert members == [f"Share group '{group}' has no active members."]


def test_reset_offsets_to_earliest_redelivers_the_topic(broker: WeirProcess) -> None:
    topic, group = consumed_group(broker, "reset")
    reset = run_share_groups(
        broker, "--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic
    )
    assert sorted(offsets_table(reset, group)) == [f"{group} {topic} 0 0", f"{group} {topic} 1 0"]
    described = run_share_groups(broker, "--describe", "--group", group)
    assert offsets_table(described, group) == [f"{group} {topic} 0 0 5", f"{group} {topic} 1 0 5"]
    # The next consumer of the group is delivered every record again, each a first time.
    consumer = share_consumer(broker, group, topic)
    seen: dict[tuple[int, int], int] = {}
    deadline = time.monotonic() + CONSUME_DEADLINE_S
    try:
        while len(seen) < 2 * RECORDS_PER_PARTITION and time.monotonic() < deadline:
            messages = [m for m in consumer.poll(1.0) if m.error() is None]
            for message in messages:
                seen[(message.partition() or 0, message.offset() or 0)] = message.delivery_count()
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            if messages:
                consumer.commit_sync(10.0)
    finally:
        consumer.close()
    assert sorted(seen) == [(p, o) for p in (0, 1) for o in range(RECORDS_PER_PARTITION)]
    assert set(seen.values()) == {1}


def test_delete_offsets_and_delete_group(broker: WeirProcess) -> None:
    topic, group = consumed_group(broker, "delete")
    deleted = run_share_groups(broker, "--delete-offsets", "--group", group, "--topic", topic)
    assert deleted[-2:] == ["TOPIC STATUS", f"{topic} Successful"]
    again = run_share_groups(broker, "--delete-offsets", "--group", group, "--topic", topic)
    assert again[-1] == f"{topic} Error: There is no offset information to delete."
    assert offsets_table(run_share_groups(broker, "--describe", "--group", group), group) == []
    assert run_share_groups(broker, "--delete", "--group", group) == [
        f"Deletion of requested share groups ('{group}') was successful."
    ]
    assert group not in run_share_groups(broker, "--list")
    gone = run_share_groups(broker, "--describe", "--group", group)
    assert f"Group {group} not found." in " ".join(gone)


def test_a_share_group_with_a_member_is_neither_reset_nor_deleted(broker: WeirProcess) -> None:
    topic, group = consumed_group(broker, "busy")
    consumer = share_consumer(broker, group, topic, mode="implicit")
    try:
        deadline = time.monotonic() + CONSUME_DEADLINE_S
        while f"{group} Stable" not in run_share_groups(broker, "--list", "--state"):
            assert time.monotonic() < deadline, "the consumer never joined"
            consumer.poll(0.5)
        client = admin(broker)  # kept: a collected client never completes its futures
        futures = client.delete_consumer_groups([group], request_timeout=30)
        with pytest.raises(KafkaException) as refused:
            futures[group].result(timeout=30)
        assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
        reset = run_share_groups(
            broker, "--reset-offsets", "--to-latest", "--execute", "--group", group, "--all-topics"
        )
        assert f"Share group '{group}' is not empty." in reset
        described = run_share_groups(broker, "--describe", "--group", group, "--members")
        assert any(line.startswith(group) and f"{topic}:0,1" in line for line in described)
    finally:
        consumer.close()


def test_confluent_admin_deletes_an_empty_share_group_and_lists_no_share_groups(
    broker: WeirProcess,
) -> None:
    _, group = consumed_group(broker, "confluent")
    client = admin(broker)  # kept: a collected client never completes its futures
    listed = client.list_consumer_groups(request_timeout=30).result(timeout=30)
    assert group not in {g.group_id for g in listed.valid}  # as against Kafka 4.4
    futures = client.delete_consumer_groups([group], request_timeout=30)
    assert futures[group].result(timeout=30) is None
    assert group not in run_share_groups(broker, "--list")
