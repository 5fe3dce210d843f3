"""Push subscriptions on a 3-broker cluster over etcd: a subscription created on one
broker is seen by every broker; each partition's deliveries are made by its leader;
a leader killed (SIGKILL) mid-delivery: its partitions' deliveries move to the new
leader, every record is still accepted by the receiver, and the duplicates are
bounded by the deliveries the killed broker had in flight (POSTs, and answers not
yet stored as acceptances)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from compat_tests.cluster_harness import WeirCluster
from compat_tests.harness import WeirProcess, unique_topic_name
from compat_tests.push_receiver import PushReceiver

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 3
RECORDS = 240
CONCURRENCY = 2
BATCH_SIZE = 2


def api(broker: WeirProcess) -> httpx.Client:
    auth = broker.http_credentials
    return httpx.Client(base_url=broker.http_url, trust_env=False, timeout=10, auth=auth)


def slow(
    receiver: PushReceiver, body: dict[str, Any], headers: dict[str, str]
) -> tuple[int, float]:
    """Every delivery is answered 200 after 50 ms (so some are in flight at the kill)."""
    return 200, 0.05


def test_deliveries_move_to_the_new_leader_when_a_leader_is_killed_mid_delivery(
    cluster: WeirCluster,
) -> None:
    topic = unique_topic_name("push-failover")
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    cluster.wait_full_isr(topic)
    receiver = PushReceiver(behaviour=slow).start()
    victim: WeirProcess | None = None
    try:
        first = next(iter(cluster.brokers.values()))
        name = unique_topic_name("failover")
        with api(first) as client:
            response = client.post(
                "/v1/subscriptions",
                json={
                    "name": name, "topic": topic, "url": receiver.url, "start": "earliest",
                    "concurrency": CONCURRENCY, "batch_size": BATCH_SIZE, "timeout_ms": 2000,
                    "retry": {"min_backoff_ms": 100, "max_backoff_ms": 1000, "max_attempts": 10},
                },
            )  # fmt: skip
        assert response.status_code == 201, response.text
        receiver.secret = response.json()["secret"]
        for node_id, broker in cluster.brokers.items():  # the metadata reached every broker
            cluster.wait_until(lambda b=broker: _listed(b, name), 10, f"broker {node_id} sees it")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        values = [f"r{i:04d}" for i in range(RECORDS)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        cluster.wait_until(
            lambda: len(set(receiver.accepted_values())) >= RECORDS // 4, 30, "deliveries going"
        )
        victim_id = cluster.leader_of(topic, 0)
        led = [p for p in range(PARTITIONS) if cluster.leader_of(topic, p) == victim_id]
        victim = cluster.brokers[victim_id]
        victim.kill()
        at_kill = len(receiver.accepted_values())
        # What the killed broker can have delivered without storing it: per partition
        # it led, the POSTs in flight and the records answered but not yet stored as
        # accepted (each at most concurrency x batch size; docs/http-push.md).
        bound = 2 * CONCURRENCY * BATCH_SIZE * len(led)
        cluster.wait_until(
            lambda: set(receiver.accepted_values()) == set(values), 120, "every record accepted"
        )
        accepted = Counter(receiver.accepted_values())
        duplicates = sum(count - 1 for count in accepted.values())
        print(
            f"killed broker {victim_id} (leading {led}) after {at_kill} acceptances: "
            f"{duplicates} duplicates, bound {bound}"
        )
        assert duplicates <= bound
        assert all(d.verified for d in receiver.snapshot())
        new_leader = cluster.leader_of(topic, 0)
        assert new_leader != victim_id
        with api(cluster.brokers[new_leader]) as client:
            rows = client.get(f"/v1/subscriptions/{name}").json()["partitions"]
        (moved,) = [r for r in rows if r["partition"] == 0]
        assert moved["leader"] and moved["delivering"] and moved["delivered"] > 0, rows
    finally:
        receiver.stop()
        if victim is not None:
            victim.start()  # the package's cluster goes on (conftest.py)


def _listed(broker: WeirProcess, name: str) -> bool:
    with api(broker) as client:
        listed = client.get("/v1/subscriptions").json()["subscriptions"]
    return any(s["name"] == name for s in listed)
