"""Automatic preferred-leader rebalancing (Kafka's auto.leader.rebalance.enable) on a
real three-broker cluster over a real etcd: after a broker dies and returns,
leadership goes back to each partition's preferred replica without anyone running
an election, and nothing acknowledged is lost meanwhile; with the setting off it
stays where the failover put it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compat_tests.cluster_harness import TEST_CLUSTER_SETTINGS, WeirCluster, running_cluster
from compat_tests.harness import unique_topic_name
from compat_tests.history_checker import ProduceLoad, check_history

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 6
# A check every second, so that the test waits seconds, not the default 30.
CHECK_INTERVAL_SETTINGS = TEST_CLUSTER_SETTINGS + "leader_imbalance_check_interval_ms = 1000\n"
# Time for the rebalance once the returned broker is in every ISR: a few checks.
REBALANCE_WITHIN_S = 10.0


def preferred_leaders(cluster: WeirCluster, topic: str) -> dict[int, int]:
    return {index: p.replicas[0] for index, p in cluster.partitions(topic).items()}


def leaders(cluster: WeirCluster, topic: str) -> dict[int, int]:
    return {index: p.leader for index, p in cluster.partitions(topic).items()}


def fail_over_and_return(cluster: WeirCluster, topic: str, victim: int) -> None:
    """SIGKILL `victim`; once the others lead every partition, start it again and
    wait until it is back in every ISR."""
    cluster.brokers[victim].kill()
    cluster.wait_until(
        lambda: all(leader not in (victim, -1) for leader in leaders(cluster, topic).values()),
        20,
        f"brokers other than {victim} lead every partition",
    )
    cluster.brokers[victim].start(ready_timeout_s=60)
    cluster.wait_full_isr(topic, timeout_s=30)


def test_leadership_returns_to_preferred_replicas_without_an_election_request(
    tmp_path: Path,
) -> None:
    with running_cluster(tmp_path, settings=CHECK_INTERVAL_SETTINGS) as cluster:
        topic = unique_topic_name("rebalanced")
        cluster.create_topic(topic, PARTITIONS, 3)
        cluster.wait_full_isr(topic)
        preferred = preferred_leaders(cluster, topic)
        cluster.wait_until(lambda: leaders(cluster, topic) == preferred, 10, "initial leaders")
        victim = preferred[0]
        with ProduceLoad(cluster.bootstrap, topic) as load:
            load.acked_since(200, timeout_s=30)
            fail_over_and_return(cluster, topic, victim)
            in_sync_at = time.monotonic()
            cluster.wait_until(
                lambda: leaders(cluster, topic) == preferred,
                REBALANCE_WITHIN_S,
                f"every partition led by its preferred replica again ({preferred})",
            )
            print(f"leadership back {time.monotonic() - in_sync_at:.1f} s after the full ISR")
            load.acked_since(200, timeout_s=30)
        check_history(cluster, load, PARTITIONS)
        moved_back = sum(1 for leader in preferred.values() if leader == victim)
        elections = sum(
            sum(b.metric_samples("weir_preferred_leader_elections_total").values())
            for b in cluster.running()
        )
        assert elections >= moved_back
        cluster.wait_until(
            lambda: all(
                b.metric_samples("weir_preferred_replica_imbalance_partitions") == {"": 0.0}
                for b in cluster.running()
            ),
            5,
            "every broker's view: no partition led by another than its preferred replica",
        )


def test_with_automatic_rebalance_off_leadership_stays_where_the_failover_put_it(
    tmp_path: Path,
) -> None:
    settings = CHECK_INTERVAL_SETTINGS + "auto_leader_rebalance_enable = false\n"
    with running_cluster(tmp_path, settings=settings) as cluster:
        topic = unique_topic_name("unbalanced")
        cluster.create_topic(topic, PARTITIONS, 3)
        cluster.wait_full_isr(topic)
        victim = preferred_leaders(cluster, topic)[0]
        fail_over_and_return(cluster, topic, victim)
        # Proving that nothing happens takes waiting: three check intervals.
        time.sleep(3.0)
        assert victim not in leaders(cluster, topic).values()
        assert all(
            sum(b.metric_samples("weir_preferred_leader_elections_total").values()) == 0
            for b in cluster.running()
        )
