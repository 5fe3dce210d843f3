"""Kafka's own command-line tools against the real `weir`.

The tools are the classes behind Kafka's bin/*.sh scripts, from Maven Central's
org.apache.kafka:kafka-tools (4.3.1, the newest it serves) and its runtime dependencies,
which `scripts/test` copies into .cache/kafka-tools/4.3.1 (compat_tests/java/kafka-tools/
pom.xml). Each test runs a tool as its script would, `java -cp 'DIR/*' MainClass ARGS`,
and checks what it prints, not just its exit code.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer

from compat_tests.harness import WeirProcess, clean_environment, unique_topic_name
from compat_tests.maven import KAFKA_TOOLS_DIR, require_maven_build
from compat_tests.test_java_client import start_group_broker
from compat_tests.wire_client import connect, round_trip
from weir.wire.api_keys import ApiKey

TOOL_TIMEOUT_S = 60
# bin/kafka-topics.sh, kafka-console-producer.sh, ... -> their main classes in Kafka 4.x.
TOPICS = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"


@dataclass(frozen=True)
class ToolRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def tools_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = start_group_broker(tmp_path_factory.mktemp("weir-tools"))
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture
def broker(request: pytest.FixtureRequest, tools_broker: WeirProcess) -> Iterator[WeirProcess]:
    """The module's broker; after each test it must have counted no request error and
    closed no connection."""
    request.node.__dict__.setdefault("_weir_processes", []).append(tools_broker)
    yield tools_broker
    assert tools_broker.connection_trouble() == {}


def run_tool(main_class: str, *args: str, stdin: str = "", check: bool = True) -> ToolRun:
    """Runs one tool to completion; with `check`, fails the test on a non-zero exit."""
    java = shutil.which("java")
    require_maven_build(KAFKA_TOOLS_DIR / f"kafka-tools-{KAFKA_TOOLS_DIR.name}.jar")
    assert java is not None, "java is not on PATH (scripts/test installs a JDK)"
    command = [
        java,
        # Quick start for short-lived tools; the tools log through slf4j-simple.
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        f"{KAFKA_TOOLS_DIR}/*",
        main_class,
        *args,
    ]
    completed = subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
        env=clean_environment(),
        check=False,
    )
    assert completed.returncode == 0 or not check, (
        f"{main_class} {' '.join(args)} exited with {completed.returncode}\n"
        f"--- stdout ---\n{completed.stdout}\n--- stderr ---\n{completed.stderr}"
    )
    return ToolRun(completed.returncode, completed.stdout, completed.stderr)


def create_topic(broker: WeirProcess, topic: str, partitions: int) -> None:
    created = run_tool(
        TOPICS,
        *("--bootstrap-server", broker.bootstrap, "--create", "--topic", topic),
        *("--partitions", str(partitions), "--replication-factor", "1"),
    )
    assert created.lines == [f"Created topic {topic}."]


def test_kafka_topics_creates_describes_grows_and_lists_topics(broker: WeirProcess) -> None:
    topic = unique_topic_name("tools-topics")
    bootstrap = ("--bootstrap-server", broker.bootstrap)
    created = run_tool(
        TOPICS,
        *bootstrap,
        *("--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1"),
        *("--config", "retention.ms=3600000", "--config", "cleanup.policy=compact"),
    )
    assert created.lines == [f"Created topic {topic}."]

    described = run_tool(TOPICS, *bootstrap, "--describe", "--topic", topic)
    summary, *partitions = described.lines
    assert re.search(rf"^Topic: {re.escape(topic)}\tTopicId: \S+\tPartitionCount: 3\t", summary)
    assert "ReplicationFactor: 1" in summary
    configs = summary.split("Configs: ", 1)[1].split(",")
    assert sorted(configs) == ["cleanup.policy=compact", "retention.ms=3600000"]
    assert [_fields(line) for line in partitions] == [
        {"Topic": topic, "Partition": str(p), "Leader": "1", "Replicas": "1", "Isr": "1"}
        for p in range(3)
    ]

    run_tool(TOPICS, *bootstrap, "--alter", "--topic", topic, "--partitions", "5")
    grown = run_tool(TOPICS, *bootstrap, "--describe", "--topic", topic)
    assert "PartitionCount: 5" in grown.lines[0]
    assert len(grown.lines) == 1 + 5

    listed = run_tool(TOPICS, *bootstrap, "--list")
    assert topic in listed.lines
    # Creating it again is an error the tool reports (TopicExistsException from the broker).
    already = run_tool(TOPICS, *bootstrap, "--create", "--topic", topic, check=False)
    assert already.returncode != 0
    assert f"Topic '{topic}' already exists" in already.stdout + already.stderr


def _fields(line: str) -> dict[str, str]:
    """`Topic: t\tPartition: 0\tLeader: 1...` -> {"Topic": "t", ...} (Elr fields dropped)."""
    pairs = (field.split(": ", 1) for field in line.strip().split("\t"))
    return {key: value for key, value in pairs if key not in ("Elr", "LastKnownElr")}


def test_console_producer_and_consumer_round_trip_keyed_records(broker: WeirProcess) -> None:
    topic = unique_topic_name("tools-console")
    create_topic(broker, topic, 1)
    records = ["k1:v1", "k2:v2", "k1:v3", "k3:v4 with spaces", "k2:"]
    run_tool(
        CONSOLE_PRODUCER,
        *("--bootstrap-server", broker.bootstrap, "--topic", topic),
        *("--reader-property", "parse.key=true", "--reader-property", "key.separator=:"),
        stdin="\n".join(records) + "\n",
    )
    consumed = run_tool(
        CONSOLE_CONSUMER,
        *("--bootstrap-server", broker.bootstrap, "--topic", topic),
        *("--from-beginning", "--max-messages", str(len(records))),
        *("--formatter-property", "print.key=true", "--formatter-property", "print.offset=true"),
    )
    # The formatter's default separator is a tab, between every field it prints.
    assert consumed.lines == [
        f"Offset:{n}\t{record.replace(':', chr(9), 1)}" for n, record in enumerate(records)
    ]
    assert f"Processed a total of {len(records)} messages" in consumed.stderr


def test_kafka_consumer_groups_lists_describes_and_resets_offsets(broker: WeirProcess) -> None:
    topic = unique_topic_name("tools-groups")
    group = unique_topic_name("tools-group")
    create_topic(broker, topic, 2)
    run_tool(
        CONSOLE_PRODUCER,
        *("--bootstrap-server", broker.bootstrap, "--topic", topic),
        *("--reader-property", "parse.key=true", "--reader-property", "key.separator=:"),
        stdin="".join(f"key{n}:value{n}\n" for n in range(10)),
    )
    # A console consumer in the group reads all 10 and commits as it exits.
    run_tool(
        CONSOLE_CONSUMER,
        *("--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", group),
        *("--from-beginning", "--max-messages", "10"),
    )
    bootstrap = ("--bootstrap-server", broker.bootstrap)
    listed = run_tool(CONSUMER_GROUPS, *bootstrap, "--list")
    assert group in listed.lines

    rows = _group_rows(run_tool(CONSUMER_GROUPS, *bootstrap, "--describe", "--group", group))
    ends = _end_offsets(broker, topic)
    assert sum(ends.values()) == 10
    assert {
        int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows
    } == {p: (str(end), str(end), "0") for p, end in ends.items()}

    reset = run_tool(
        CONSUMER_GROUPS,
        *bootstrap,
        *("--group", group, "--topic", topic, "--reset-offsets", "--to-earliest", "--execute"),
    )
    assert {(r["PARTITION"], r["NEW-OFFSET"]) for r in _group_rows(reset)} == {
        ("0", "0"),
        ("1", "0"),
    }
    rows = _group_rows(run_tool(CONSUMER_GROUPS, *bootstrap, "--describe", "--group", group))
    assert {int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LAG"]) for r in rows} == {
        p: ("0", str(end)) for p, end in ends.items()
    }

    deleted = run_tool(CONSUMER_GROUPS, *bootstrap, "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted.stdout
    assert group not in run_tool(CONSUMER_GROUPS, *bootstrap, "--list").lines


def _group_rows(run: ToolRun) -> list[dict[str, str]]:
    """The table kafka-consumer-groups prints (header row, then one row per partition)."""
    header_index = next(i for i, line in enumerate(run.lines) if line.startswith("GROUP "))
    header = run.lines[header_index].split()
    return [dict(zip(header, line.split(), strict=True)) for line in run.lines[header_index + 1 :]]


def _end_offsets(broker: WeirProcess, topic: str) -> dict[int, int]:
    """kafka-get-offsets --time -1: each partition's end offset."""
    run = run_tool(
        GET_OFFSETS, "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", "-1"
    )
    ends = {}
    for line in run.lines:
        name, partition, offset = line.rsplit(":", 2)
        assert name == topic
        ends[int(partition)] = int(offset)
    return ends


def test_producer_and_consumer_perf_tests_move_every_record(broker: WeirProcess) -> None:
    topic = unique_topic_name("tools-perf")
    create_topic(broker, topic, 2)
    records, record_bytes = 20_000, 100
    produced = run_tool(
        PRODUCER_PERF,
        *("--topic", topic, "--num-records", str(records), "--record-size", str(record_bytes)),
        *("--throughput", "-1", "--bootstrap-server", broker.bootstrap),
        *("--command-property", "acks=all", "linger.ms=5"),
    )
    summary = produced.lines[-1]
    assert re.match(rf"^{records} records sent, [\d.]+ records/sec", summary), produced.stdout
    assert sum(_end_offsets(broker, topic).values()) == records

    consumed = run_tool(
        CONSUMER_PERF,
        *("--bootstrap-server", broker.bootstrap, "--topic", topic),
        *("--num-records", str(records), "--timeout", "30000"),
    )
    header, row = consumed.lines[-2:]
    stats = dict(zip(header.split(", "), row.split(", "), strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == records
    assert float(stats["data.consumed.in.MB"]) == pytest.approx(
        records * record_bytes / 1024 / 1024, abs=0.001
    )


TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"


def test_kafka_transactions_lists_describes_finds_and_aborts_an_open_transaction(
    broker: WeirProcess,
) -> None:
    """bin/kafka-transactions.sh against a transaction confluent-kafka holds open:
    list, describe, describe-producers, find-hanging (an ongoing transaction is not
    hanging) and abort, after which read_committed reaches the high watermark."""
    topic = unique_topic_name("tools-txn")
    transactional_id = f"{topic}-tx"
    create_topic(broker, topic, 1)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open-1")
    producer.produce(topic, value=b"open-2")
    producer.flush(30)
    server = ("--bootstrap-server", broker.bootstrap)

    listed = run_tool(TRANSACTIONS, *server, "list")
    row = next(line.split() for line in listed.lines if transactional_id in line)
    assert "Ongoing" in row
    described = run_tool(TRANSACTIONS, *server, "describe", "--transactional-id", transactional_id)
    assert "Ongoing" in described.stdout and f"{topic}-0" in described.stdout
    producers = run_tool(
        TRANSACTIONS, *server, "describe-producers", "--topic", topic, "--partition", "0"
    )
    assert len(producers.lines) == 2  # the header and the producer, its transaction from 0
    assert producers.lines[1].split()[-1] == "0"
    hanging = run_tool(
        TRANSACTIONS, *server, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"
    )
    assert not [line for line in hanging.lines if topic in line], hanging.stdout
    run_tool(
        TRANSACTIONS, *server, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0"
    )
    body = {
        "replica_id": -1,
        "isolation_level": 1,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    with connect(broker) as sock:
        stable = round_trip(sock, ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions[0].offset
    assert stable == 3  # two records and the abort marker: nothing open
    del producer
