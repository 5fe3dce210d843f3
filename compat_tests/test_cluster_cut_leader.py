"""A leader cut off from its followers but not from etcd (each broker in a network
namespace of its own, compat_tests/netns.py; etcd and the clients in the root
namespace reach every broker the whole time).

Cut from both followers of a min.insync.replicas=2 partition, the leader's ISR
falls to itself and its followers enter the ELR; no follower fetches, so after
replica_lag_time_max_ms it hands leadership to one of them, which the other
follower reaches: acks=all writes resume while the cut lasts. Cut from one
follower only, the ISR keeps two members (min.insync.replicas): the leader keeps
leading and writes continue. Either way, once healed, every partition returns to
its full ISR and the history checker finds nothing lost or duplicated.

Run with `-s` to see the measured time from the cut to the first acknowledged
write sent after it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from compat_tests.cluster_harness import WeirCluster, running_cluster
from compat_tests.harness import unique_topic_name
from compat_tests.history_checker import ConcurrentReader, ProduceLoad, check_history
from compat_tests.netns import NetworkLab

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 3
# The harness's replica_lag_time_max_ms (4 s), the ISR shrink and the hand-over
# (a housekeeping round each, 0.5 s), the new leader's follower catching up, the
# client's retries: 6.6-8.1 s measured; the bound leaves room for a loaded machine.
WRITES_RESUME_BOUND_S = 15.0
POLL_S = 0.01


@pytest.fixture(scope="module")
def lab() -> Iterator[NetworkLab]:
    with NetworkLab(3) as network:
        yield network


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, lab: NetworkLab) -> Iterator[WeirCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("cut-leader"),
        etcd_host=lab.root_address,
        placement=lambda node_id: (lab.addresses[node_id - 1], lab.prefix(node_id - 1)),
    ) as weir:
        yield weir


def cut_between(lab: NetworkLab, a: int, b: int) -> None:
    lab.cut(a - 1, lab.addresses[b - 1])
    lab.cut(b - 1, lab.addresses[a - 1])


def restore_between(lab: NetworkLab, a: int, b: int) -> None:
    lab.restore(a - 1, lab.addresses[b - 1])
    lab.restore(b - 1, lab.addresses[a - 1])


def seconds_to_ack_after(
    load: ProduceLoad, first_seq: int, partition: int, since_s: float, timeout_s: float
) -> float | None:
    """Seconds from `since_s` until a write numbered `first_seq` or later is
    acknowledged on `partition`; None past `timeout_s`."""
    while time.monotonic() < since_s + timeout_s:
        for value, (acked_partition, _) in load.acks.acked_snapshot().items():
            if acked_partition == partition and int(value.removeprefix("w-")) >= first_seq:
                return time.monotonic() - since_s
        time.sleep(POLL_S)
    return None


def new_topic(cluster: WeirCluster, name: str) -> tuple[str, int, list[int]]:
    """A min.insync.replicas=2, RF 3 topic: its name, partition 0's leader and followers."""
    topic = unique_topic_name(name)
    cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    cluster.wait_full_isr(topic)
    described = cluster.partitions(topic)[0]
    leader = int(described.leader)
    return topic, leader, [int(r) for r in described.replicas if r != leader]


def test_a_leader_cut_off_from_both_followers_hands_leadership_over_and_writes_resume(
    cluster: WeirCluster, lab: NetworkLab
) -> None:
    topic, leader, followers = new_topic(cluster, "cut-leader")
    with (
        ConcurrentReader(cluster.bootstrap, topic, PARTITIONS) as reader,
        ProduceLoad(cluster.bootstrap, topic) as load,
    ):
        load.acked_since(300, timeout_s=30)
        cut_at_s = time.monotonic()
        for follower in followers:
            cut_between(lab, leader, follower)
        # Writes sent while the routes were being cut may have reached a follower
        # and be committed by the two of them: count only those sent after.
        sent_after_cut = load.sent
        try:
            resumed_s = seconds_to_ack_after(
                load, sent_after_cut, 0, cut_at_s, WRITES_RESUME_BOUND_S
            )
            print(f"leader {leader} cut off from {followers}: acks=all writes on its "
                  f"partition resumed after {resumed_s and round(resumed_s, 2)} s")  # fmt: skip
            assert resumed_s is not None, (
                f"no acks=all write on partition 0 within {WRITES_RESUME_BOUND_S} s of the cut"
            )
            described = cluster.partitions(topic)[0]
            assert described.leader in followers
            assert sorted(described.isrs) == sorted(followers)
            load.acked_since(300, timeout_s=30)  # and they go on while the cut lasts
        finally:
            for follower in followers:
                restore_between(lab, leader, follower)
        cluster.wait_full_isr(topic, timeout_s=60)
        load.acked_since(200, timeout_s=30)
    check_history(cluster, load, PARTITIONS, reader)


def test_a_leader_cut_off_from_one_follower_keeps_leading_with_the_other(
    cluster: WeirCluster, lab: NetworkLab
) -> None:
    topic, leader, followers = new_topic(cluster, "cut-one")
    cut_off, reachable = followers
    with (
        ConcurrentReader(cluster.bootstrap, topic, PARTITIONS) as reader,
        ProduceLoad(cluster.bootstrap, topic) as load,
    ):
        load.acked_since(300, timeout_s=30)
        cut_between(lab, leader, cut_off)
        try:
            cluster.wait_until(
                lambda: cut_off not in cluster.partitions(topic)[0].isrs,
                20,
                f"broker {cut_off} leaves partition 0's ISR",
            )
            sent_after_shrink = load.sent
            resumed_s = seconds_to_ack_after(load, sent_after_shrink, 0, time.monotonic(), 20)
            assert resumed_s is not None, "writes did not continue with an ISR of two"
            time.sleep(6)  # past replica_lag_time_max_ms again: still no hand-over
            described = cluster.partitions(topic)[0]
            assert described.leader == leader
            assert sorted(described.isrs) == sorted([leader, reachable])
            load.acked_since(300, timeout_s=30)
        finally:
            restore_between(lab, leader, cut_off)
        cluster.wait_full_isr(topic, timeout_s=60)
        load.acked_since(200, timeout_s=30)
    check_history(cluster, load, PARTITIONS, reader)
