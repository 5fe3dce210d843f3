"""Network partitions of a real Weir cluster: each broker in a network namespace of
its own (compat_tests/netns.py), etcd and the clients in the root namespace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.cluster_harness import WeirCluster, running_cluster
from compat_tests.harness import unique_topic_name
from compat_tests.history_checker import ConcurrentReader, ProduceLoad, check_history
from compat_tests.netns import NetworkLab

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def lab() -> Iterator[NetworkLab]:
    with NetworkLab(3) as network:
        yield network


@pytest.fixture
def cluster(tmp_path: Path, lab: NetworkLab) -> Iterator[WeirCluster]:
    with running_cluster(
        tmp_path,
        etcd_host=lab.root_address,
        placement=lambda node_id: (lab.addresses[node_id - 1], lab.prefix(node_id - 1)),
    ) as weir:
        yield weir


def test_a_leader_cut_off_from_brokers_and_etcd_loses_nothing_acknowledged(
    cluster: WeirCluster, lab: NetworkLab
) -> None:
    topic = unique_topic_name("partitioned")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    victim = cluster.leader_of(topic, 0)
    with (
        ConcurrentReader(cluster.bootstrap, topic, 3) as reader,
        ProduceLoad(cluster.bootstrap, topic) as load,
    ):
        load.acked_since(200, timeout_s=30)
        lab.isolate(victim - 1)
        try:
            cluster.wait_until(
                lambda: cluster.leader_of(topic, 0) not in (victim, -1), 30, "a new leader"
            )
            load.acked_since(300, timeout_s=60)
            # The majority side shrank every ISR to the two reachable brokers.
            partitions = cluster.partitions(topic)
            assert all(victim not in p.isrs for p in partitions.values())
        finally:
            lab.heal(victim - 1)
        cluster.wait_full_isr(topic, timeout_s=60)
        load.acked_since(200, timeout_s=30)
    check_history(cluster, load, 3, reader)
    # After healing, the three replicas of each partition hold the same bytes.
    cluster.stop()
    for partition in range(3):
        copies = {
            b"".join(
                p.read_bytes() for p in sorted((b.data_dir / f"{topic}-{partition}").glob("*.log"))
            )
            for b in cluster.brokers.values()
        }
        assert len(copies) == 1, f"{topic}-{partition} replicas differ"
