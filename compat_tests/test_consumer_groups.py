"""Consumer groups with member processes: KIP-848 (`group.protocol=consumer`) and the
classic protocol (eager `range` and `cooperative-sticky` assignors).

Each member is a separate confluent-kafka process (group_member.py) that commits
every message before recording it. The broker runs with a 6 s member session
timeout (and classic members ask for 6 s) so a killed member's partitions move
within the test's time.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from compat_tests.harness import WeirProcess, create_topic

MEMBER = Path(__file__).with_name("group_member.py")
SESSION_TIMEOUT_MS = 6000
WAIT_S = 45.0
# librdkafka's KIP-848 protocol, and the classic one with an eager and a cooperative assignor.
PROTOCOLS = ["consumer", "classic-eager", "classic-cooperative"]


@pytest.fixture
def group_broker(tmp_path: Path) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(
        tmp_path,
        f"group_consumer_session_timeout_ms = {SESSION_TIMEOUT_MS}\n"
        "group_consumer_heartbeat_interval_ms = 500\n"
        f"group_consumer_min_session_timeout_ms = {SESSION_TIMEOUT_MS}\n"
        "group_consumer_min_heartbeat_interval_ms = 500\n"
        "offsets_topic_partition_count = 5\n"
        "group_initial_rebalance_delay_ms = 500\n",
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(20) == 0


def start_member(
    broker: WeirProcess,
    topic: str,
    group: str,
    out: Path,
    protocol: str,
    delay_ms: int = 0,
    instance_id: str | None = None,
) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(MEMBER), broker.bootstrap, topic, group, protocol, str(out)]
    command.append(str(delay_ms))
    if instance_id is not None:
        command.append(instance_id)
    return subprocess.Popen(command, stdin=subprocess.DEVNULL)


def consumed(out: Path) -> list[tuple[int, int, str]]:
    if not out.exists():
        return []
    rows = []
    for line in out.read_text().splitlines():
        partition, offset, value = line.split(" ", 2)
        rows.append((int(partition), int(offset), value))
    return rows


def wait_for(condition: object, what: str, timeout_s: float = WAIT_S) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)  # polling other processes' output


def stop(*members: subprocess.Popen[bytes]) -> None:
    for member in members:
        if member.poll() is None:
            member.send_signal(signal.SIGKILL)
        member.wait()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_members_split_the_partitions_and_consume_everything(
    group_broker: WeirProcess, topic: str, tmp_path: Path, protocol: str
) -> None:
    create_topic(group_broker.bootstrap, topic, partitions=4)
    produce(group_broker.bootstrap, topic, 400, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    outs = [tmp_path / "a.txt", tmp_path / "b.txt"]
    members = [start_member(group_broker, topic, group, out, protocol, 5) for out in outs]
    try:
        wait_for(lambda: sum(len(consumed(o)) for o in outs) >= 400, "all 400 messages")
    finally:
        stop(*members)
    rows = [row for out in outs for row in consumed(out)]
    # Each message is committed before the next poll and partitions are revoked before
    # they are assigned elsewhere: every message exactly once, although partitions
    # move from the first member to the second as it joins.
    assert sorted(value for _, _, value in rows) == sorted(f"v{i}" for i in range(400))
    assert all(consumed(out) for out in outs), "a member never got a partition"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_killed_member_partitions_move_and_only_uncommitted_messages_repeat(
    group_broker: WeirProcess, topic: str, tmp_path: Path, protocol: str
) -> None:
    create_topic(group_broker.bootstrap, topic, partitions=4)
    produce(group_broker.bootstrap, topic, 400, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    out_a, out_b = tmp_path / "a.txt", tmp_path / "b.txt"
    member_a = start_member(group_broker, topic, group, out_a, protocol, 20)
    member_b = start_member(group_broker, topic, group, out_b, protocol, 20)
    try:
        wait_for(lambda: consumed(out_a) and consumed(out_b), "both members consuming")
        member_b.send_signal(signal.SIGKILL)
        member_b.wait()
        wait_for(
            lambda: (
                {v for _, _, v in consumed(out_a) + consumed(out_b)}
                == {f"v{i}" for i in range(400)}
            ),
            "the survivor to consume the rest",
            timeout_s=WAIT_S + SESSION_TIMEOUT_MS / 1000,
        )
    finally:
        stop(member_a, member_b)
    rows = consumed(out_a) + consumed(out_b)
    repeats = [v for v, n in Counter(v for _, _, v in rows).items() if n > 1]
    # B records before it commits, so at most one message per partition it held repeats.
    assert len(repeats) <= 4, f"more repeats than uncommitted messages: {repeats}"


def test_kafka_python_group_consumer_resumes_from_its_commit(
    group_broker: WeirProcess, topic: str
) -> None:
    from kafka import KafkaConsumer

    create_topic(group_broker.bootstrap, topic, partitions=3)
    produce(group_broker.bootstrap, topic, 90, 3)
    group = f"g-{uuid.uuid4().hex[:8]}"

    def consume(count: int) -> list[str]:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=group_broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=8000,
        )
        values = []
        try:
            for message in consumer:
                values.append(message.value.decode())
                if len(values) == count:
                    break
            consumer.commit()
        finally:
            consumer.close()
        return values

    first = consume(60)
    produce(group_broker.bootstrap, topic, 30, 3)  # v0..v29 again, after the commit
    rest = consume(60)
    assert len(first) == 60 and len(rest) == 60
    assert sorted(first + rest) == sorted(
        [f"v{i}" for i in range(90)] + [f"v{i}" for i in range(30)]
    )


def test_aiokafka_group_consumer_consumes_and_commits(
    group_broker: WeirProcess, topic: str
) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer

    create_topic(group_broker.bootstrap, topic, partitions=2)
    produce(group_broker.bootstrap, topic, 40, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"

    async def run() -> tuple[list[str], int]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=group_broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        values: list[str] = []
        try:
            async with asyncio.timeout(30):
                async for message in consumer:
                    values.append(message.value.decode())
                    if len(values) == 40:
                        break
            await consumer.commit()
            committed = sum([await consumer.committed(tp) or 0 for tp in consumer.assignment()])
        finally:
            await consumer.stop()
        return values, committed

    values, committed = asyncio.run(run())
    assert sorted(values) == sorted(f"v{i}" for i in range(40))
    assert committed == 40


def test_http_group_views_match_what_the_members_committed(
    group_broker: WeirProcess, topic: str, tmp_path: Path
) -> None:
    import json

    create_topic(group_broker.bootstrap, topic, partitions=2)
    produce(group_broker.bootstrap, topic, 100, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "a.txt"
    member = start_member(group_broker, topic, group, out, "classic-eager")
    try:
        wait_for(lambda: len(consumed(out)) >= 100, "the member to consume everything")
        status, body = group_broker.http_get(f"/v1/groups/{group}")
        assert status == 200
        detail = json.loads(body)
        assert (detail["type"], detail["state"], len(detail["members"])) == (
            "classic",
            "Stable",
            1,
        )
        assigned = {
            (a["topic"], p) for a in detail["members"][0]["assignment"] for p in a["partitions"]
        }
        assert assigned == {(topic, 0), (topic, 1)}
        offsets = {(o["partition"], o["committed_offset"], o["lag"]) for o in detail["offsets"]}
        assert offsets == {(0, 50, 0), (1, 50, 0)}
        status, body = group_broker.http_get("/v1/groups")
        assert group in {g["group_id"] for g in json.loads(body)["groups"]}
        metrics = group_broker.http_get("/metrics")[1].decode()
        assert f'weir_group_lag{{group="{group}"}} 0.0' in metrics
        assert 'weir_groups{state="Stable",type="classic"} 1.0' in metrics
    finally:
        stop(member)
    status, _ = group_broker.http_get("/v1/groups/no-such-group")
    assert status == 404


@pytest.mark.parametrize("protocol", ["consumer", "classic-eager"])
def test_group_resumes_where_it_committed_after_a_broker_restart(
    group_broker: WeirProcess, topic: str, tmp_path: Path, protocol: str
) -> None:
    create_topic(group_broker.bootstrap, topic, partitions=2)
    produce(group_broker.bootstrap, topic, 100, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    member = start_member(group_broker, topic, group, first, protocol)
    try:
        wait_for(lambda: len(consumed(first)) >= 100, "the first 100 messages")
        time.sleep(1)  # the last record's commit follows its line in the file
    finally:
        stop(member)
    group_broker.stop()
    group_broker.restart()
    produce(group_broker.bootstrap, topic, 50, 2)  # v0..v49 again, at offsets 50..74
    member = start_member(group_broker, topic, group, second, protocol)
    try:
        wait_for(lambda: len(consumed(second)) >= 50, "the 50 new messages")
        time.sleep(1)  # anything re-read from before the restart would show up by now
    finally:
        stop(member)
    again = consumed(second)
    assert sorted(offset for _, offset, _ in again) == sorted(list(range(50, 75)) * 2)


def test_static_member_restarting_within_its_session_keeps_the_generation(
    group_broker: WeirProcess, topic: str, tmp_path: Path
) -> None:
    import json

    create_topic(group_broker.bootstrap, topic, partitions=2)
    produce(group_broker.bootstrap, topic, 40, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    out_a, out_b = tmp_path / "a.txt", tmp_path / "b.txt"

    def generation() -> tuple[int, str]:
        detail = json.loads(group_broker.http_get(f"/v1/groups/{group}")[1])
        return int(detail["generation"]), str(detail["state"])

    member_a = start_member(group_broker, topic, group, out_a, "classic-eager", 0, "static-a")
    member_b = start_member(group_broker, topic, group, out_b, "classic-eager", 0, "static-b")
    restarted = member_a
    try:
        wait_for(lambda: len(consumed(out_a)) + len(consumed(out_b)) >= 40, "the first 40")
        wait_for(lambda: generation()[1] == "Stable", "a stable group")
        before = generation()
        member_a.send_signal(signal.SIGKILL)
        member_a.wait()
        restarted = start_member(group_broker, topic, group, out_a, "classic-eager", 0, "static-a")
        produce(group_broker.bootstrap, topic, 40, 2)
        wait_for(lambda: len(consumed(out_a)) + len(consumed(out_b)) >= 80, "the next 40")
        assert generation() == before  # the static member came back: no rebalance
    finally:
        stop(restarted, member_b)


@pytest.mark.timeout(90)
def test_librdkafka_regex_subscription_is_resolved_by_the_broker_including_new_topics(
    group_broker: WeirProcess,
) -> None:
    """librdkafka in a KIP-848 group sends a `^...` subscription to the broker as
    SubscribedTopicRegex (its debug log: `subscribed topic regex "(^...)"`): the
    broker resolves it against its topics, again when a matching topic is created
    (at most every 10 s), and never hands out a topic it does not match."""
    prefix = f"regex-{uuid.uuid4().hex[:8]}"
    create_topic(group_broker.bootstrap, f"{prefix}-orders-a", partitions=2)
    create_topic(group_broker.bootstrap, f"{prefix}-payments")
    produce(group_broker.bootstrap, f"{prefix}-orders-a", 2, 2)
    produce(group_broker.bootstrap, f"{prefix}-payments", 1, 1)
    consumer = Consumer(
        {
            "bootstrap.servers": group_broker.bootstrap,
            "group.id": prefix,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    seen: Counter[str] = Counter()

    def poll_until(topic: str, count: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while seen[topic] < count:
            assert time.monotonic() < deadline, f"read {dict(seen)}, want {count} of {topic}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            seen[message.topic() or ""] += 1

    try:
        consumer.subscribe([f"^{prefix}-orders-.*"])
        poll_until(f"{prefix}-orders-a", 2)
        create_topic(group_broker.bootstrap, f"{prefix}-orders-b")
        produce(group_broker.bootstrap, f"{prefix}-orders-b", 3, 1)
        poll_until(f"{prefix}-orders-b", 3)
        assert f"{prefix}-payments" not in seen
        assignment = {tp.topic for tp in consumer.assignment()}
        assert assignment == {f"{prefix}-orders-a", f"{prefix}-orders-b"}
    finally:
        consumer.close()
    assert group_broker.connection_trouble() == {}
