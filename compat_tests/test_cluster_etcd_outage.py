"""A cluster whose only etcd member is down for longer than the brokers' session
timeout, then back: consumer groups are served again without restarting a broker
(issue 19: a coordinator fenced by the outage used to stop serving its groups until
a restart, claiming its offsets partition had moved when it had not)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.cluster_harness import WeirCluster, running_cluster
from compat_tests.group_load import group_consumer_config
from compat_tests.harness import unique_topic_name

pytestmark = pytest.mark.timeout(240)

# Longer than the test cluster's 3 s session timeout (the issue saw it from 5.8 s).
OUTAGE_S = 8.0
RECOVERY_TIMEOUT_S = 45.0
RECORDS_PER_ROUND = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirCluster]:
    with running_cluster(Path(tmp_path_factory.mktemp("etcd-outage"))) as weir:
        yield weir


def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for number in range(first, first + count):
        producer.produce(topic, value=str(number).encode(), partition=number % 3)
    assert producer.flush(30) == 0, "records not acknowledged"


def _consumer(bootstrap: str, group_id: str, protocol: str) -> Consumer:
    return Consumer(group_consumer_config(bootstrap, group_id, protocol))


def _consume_and_commit(consumer: Consumer, topic: str, want: set[int], timeout_s: float) -> None:
    """Poll until every value in `want` was read and a synchronous commit of the
    positions succeeded (retried: the coordinator may still be loading)."""
    deadline = time.monotonic() + timeout_s
    seen: set[int] = set()
    while time.monotonic() < deadline:
        for message in consumer.consume(100, timeout=0.5):
            if message.error() is None:
                seen.add(int(message.value()))
        if want <= seen and _committed_everything(consumer, topic):
            return
    raise AssertionError(
        f"within {timeout_s:.0f} s: read {len(want & seen)} of {len(want)} records "
        "and committed all of them"
    )


def _committed_everything(consumer: Consumer, topic: str) -> bool:
    positions = [p for p in consumer.position(consumer.assignment()) if p.offset >= 0]
    try:
        if positions:
            consumer.commit(offsets=positions, asynchronous=False)
        return _committed(consumer, topic) == _ends(consumer, topic)
    except Exception:  # noqa: BLE001 - NOT_COORDINATOR and the like: retry
        return False


def _keep_committing(consumer: Consumer, duration_s: float) -> None:
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        consumer.consume(100, timeout=0.2)
        positions = [p for p in consumer.position(consumer.assignment()) if p.offset >= 0]
        with contextlib.suppress(Exception):  # expected while the coordinator is fenced
            consumer.commit(offsets=positions, asynchronous=False)


def _committed(consumer: Consumer, topic: str) -> list[int]:
    partitions = [TopicPartition(topic, p) for p in range(3)]
    return [p.offset for p in consumer.committed(partitions, timeout=5)]


def _ends(consumer: Consumer, topic: str) -> list[int]:
    partitions = [TopicPartition(topic, p) for p in range(3)]
    return [consumer.get_watermark_offsets(p, timeout=5)[1] for p in partitions]


# Longer than the 15 s of silence after which brokers used to drop their watch
# (etcd sends progress notifications every 10 minutes unless configured otherwise;
# the test etcd runs with its defaults, as a user's does).
QUIET_S = 20.0


def _watch_restarts(cluster: WeirCluster) -> dict[int, dict[str, float]]:
    return {
        node_id: broker.metric_samples("weir_etcd_watch_restarts_total")
        for node_id, broker in cluster.brokers.items()
    }


def test_a_quiet_cluster_keeps_its_etcd_watches_without_progress_notifications(
    cluster: WeirCluster,
) -> None:
    before = _watch_restarts(cluster)
    none = {f'reason="{reason}"': 0.0 for reason in ("behind", "broken", "compacted")}
    assert all(samples == none for samples in before.values()), before
    time.sleep(QUIET_S)  # nothing changes in etcd meanwhile: that is the test
    assert _watch_restarts(cluster) == before
    # The watches still deliver: a topic created through one broker is served by all.
    topic = unique_topic_name("after-quiet")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic, timeout_s=10)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_is_served_again_after_etcd_was_down_past_the_session_timeout(
    cluster: WeirCluster, protocol: str
) -> None:
    topic = unique_topic_name(f"outage-{protocol}")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    _produce(cluster.bootstrap, topic, 0, RECORDS_PER_ROUND)
    consumer = _consumer(cluster.bootstrap, unique_topic_name("group"), protocol)
    consumer.subscribe([topic])
    try:
        _consume_and_commit(consumer, topic, set(range(RECORDS_PER_ROUND)), RECOVERY_TIMEOUT_S)
        etcd = cluster.etcd.members[0]
        etcd.kill()
        _keep_committing(consumer, OUTAGE_S)  # as a busy group does through the outage
        # Every broker says it cannot serve: fenced, and the coordinators' partitions
        # are unavailable (health and metrics).
        for broker in cluster.brokers.values():
            status, body = broker.http_get("/health/ready")
            assert status == 503 and json.loads(body)["fenced"] is True, body
            assert broker.metric_samples("weir_broker_fenced") == {"": 1.0}
        unavailable = [
            sum(b.metric_samples("weir_internal_partitions_unavailable").values())
            for b in cluster.brokers.values()
        ]
        assert sum(unavailable) > 0, unavailable
        etcd.start()
        cluster.etcd.wait_healthy()
        _produce(cluster.bootstrap, topic, RECORDS_PER_ROUND, RECORDS_PER_ROUND)
        # No broker restarted: the group's coordinator serves it again.
        second_round = set(range(RECORDS_PER_ROUND, 2 * RECORDS_PER_ROUND))
        _consume_and_commit(consumer, topic, second_round, RECOVERY_TIMEOUT_S)
    finally:
        consumer.close()
    for broker in cluster.brokers.values():
        assert "moved to another broker" not in broker.stderr_text()
        assert broker.metric_samples("weir_broker_fenced") == {"": 0.0}
        assert sum(broker.metric_samples("weir_internal_partitions_unavailable").values()) == 0
        cluster.wait_until(
            lambda b=broker: b.http_get("/health/ready")[0] == 200, 30, f"{broker} ready again"
        )
