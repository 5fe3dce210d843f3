"""Operating a real three-broker cluster: preferred-leader election, moving a
partition's replicas while it is written to, decommissioning a broker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic

from compat_tests.cluster_harness import WeirCluster, running_cluster, shared_or_own_cluster
from compat_tests.harness import run_cli, unique_topic_name
from compat_tests.history_checker import ProduceLoad, check_history
from compat_tests.wire_client import connect, round_trip
from weir.format.errors import ErrorCode
from weir.wire.api_keys import ApiKey

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def _module_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirCluster]:
    with running_cluster(tmp_path_factory.mktemp("operations")) as weir:
        yield weir


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WeirCluster]:
    """The module's cluster; a test that leaves brokers dead or stops it has its own."""
    yield from shared_or_own_cluster(request, "_module_cluster", tmp_path)


def cli(cluster: WeirCluster, *args: str) -> dict[str, object]:
    bootstrap = next(b.bootstrap for b in cluster.running())
    result = run_cli("--bootstrap", bootstrap, "--format", "json", *args)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def test_preferred_leader_election_returns_leadership_to_the_first_replica(
    cluster: WeirCluster,
) -> None:
    topic = unique_topic_name("preferred")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    preferred = cluster.partitions(topic)[0].replicas[0]
    cluster.brokers[preferred].stop()
    cluster.wait_until(lambda: cluster.leader_of(topic, 0) not in (preferred, -1), 20, "failover")
    cluster.brokers[preferred].start()
    cluster.wait_full_isr(topic)
    assert cluster.leader_of(topic, 0) != preferred
    elections = cli(cluster, "cluster", "elect-leaders", "--topic", topic)["elections"]
    assert isinstance(elections, list)
    results = {e["partition"]: e["error"] for e in elections}
    assert results[0] is None
    assert cluster.leader_of(topic, 0) == preferred
    # Kafka's own answer when nothing needs to move, through confluent-kafka's admin.
    admin = cluster.admin()
    answer = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(10)
    error = answer[TopicPartition(topic, 0)]
    assert error is not None and error.name() == "ELECTION_NOT_NEEDED"


def test_moving_a_partitions_replicas_while_producing_loses_nothing(cluster: WeirCluster) -> None:
    topic = unique_topic_name("moved")
    cluster.create_topic(topic, 1, 2)
    cluster.wait_full_isr(topic)
    before = list(cluster.partitions(topic)[0].replicas)
    outsider = next(n for n in (1, 2, 3) if n not in before)
    target = [outsider, before[1]]  # the leader's replica moves to the third broker
    with ProduceLoad(cluster.bootstrap, topic) as load:
        load.acked_since(300, timeout_s=30)
        submitted = cli(cluster, "cluster", "reassign", "--topic", topic, "--partition", "0",
                        "--replicas", ",".join(map(str, target)))  # fmt: skip
        assert submitted["reassignments"] == [
            {"topic": topic, "partition": 0, "replicas": target, "error": None, "message": None}
        ]

        def moved() -> bool:
            described = cluster.partitions(topic)[0]
            return list(described.replicas) == target and sorted(described.isrs) == sorted(target)

        cluster.wait_until(moved, 60, f"{topic}-0 on {target}")
        assert cli(cluster, "cluster", "reassignments")["reassignments"] == []
        assert cluster.leader_of(topic, 0) in target
        load.acked_since(300, timeout_s=30)
    check_history(cluster, load, 1)
    removed = cluster.brokers[before[0]].data_dir / f"{topic}-0"
    cluster.wait_until(lambda: not removed.exists(), 20, f"{removed} deleted")


@pytest.mark.own_cluster
def test_decommission_moves_every_replica_off_a_broker(cluster: WeirCluster) -> None:
    topic = unique_topic_name("decommission")
    cluster.create_topic(topic, 3, 2)
    cluster.wait_full_isr(topic)
    plan = cli(cluster, "broker", "decommission", "3", "--dry-run")
    assert plan["submitted"] is False and plan["plan"]
    done = cli(cluster, "broker", "decommission", "3")
    assert done["submitted"] is True

    def off_broker_3() -> bool:
        partitions = cluster.partitions(topic)
        return all(3 not in p.replicas and len(p.isrs) == 2 for p in partitions.values())

    cluster.wait_until(off_broker_3, 60, "no replica left on broker 3")
    status = cli(cluster, "cluster", "brokers")["brokers"]
    assert isinstance(status, list)
    assert next(b for b in status if b["node_id"] == 3)["replicas"] == 0


def test_topic_admin_spreads_replicas_and_reaches_every_broker(cluster: WeirCluster) -> None:
    admin = cluster.admin()
    explicit = unique_topic_name("explicit")
    futures = admin.create_topics(
        [NewTopic(explicit, num_partitions=2, replica_assignment=[[3, 1], [1, 2]])],
        operation_timeout=10,
    )
    futures[explicit].result(timeout=20)
    cluster.wait_full_isr(explicit)
    assert [list(p.replicas) for _, p in sorted(cluster.partitions(explicit).items())] == [
        [3, 1], [1, 2],
    ]  # fmt: skip
    grown = unique_topic_name("grown")
    cluster.create_topic(grown, 1, 2)
    admin.create_partitions([NewPartitions(grown, 4)])[grown].result(timeout=20)
    cluster.wait_until(lambda: len(cluster.partitions(grown)) == 4, 20, "4 partitions")
    cluster.wait_full_isr(grown)
    leaders = {p.leader for p in cluster.partitions(grown).values()}
    assert len(leaders) >= 2, "new partitions are led by more than one broker"
    replicas = {i: sorted(p.replicas) for i, p in cluster.partitions(grown).items()}

    def held_by_their_replicas() -> bool:
        # A new partition starts with its full ISR; a follower creates its log when
        # its watch delivers the change, moments later.
        return all(
            sorted(n for n, b in cluster.brokers.items() if (b.data_dir / f"{grown}-{i}").exists())
            == replicas[i]
            for i in range(4)
        )

    cluster.wait_until(held_by_their_replicas, 20, "each partition's log on its replicas only")
    admin.delete_topics([grown], operation_timeout=10)[grown].result(timeout=20)

    def gone_everywhere() -> bool:
        return not any(
            (b.data_dir / f"{grown}-{i}").exists()
            for b in cluster.brokers.values()
            for i in range(4)
        )

    cluster.wait_until(gone_everywhere, 20, f"{grown}'s directories deleted on every broker")


@pytest.mark.own_cluster
def test_cluster_metrics_and_readiness(cluster: WeirCluster) -> None:
    topic = unique_topic_name("metrics")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)

    def total(name: str) -> float:
        return sum(sum(b.metric_samples(name).values()) for b in cluster.running())

    assert total("weir_active_controller") == 1
    first = cluster.brokers[1]
    leaders = first.metric_samples("weir_partition_leaders")
    assert sum(leaders.values()) >= 3
    status, body = first.http_get("/health/ready")
    assert status == 200 and json.loads(body)["replicas_catching_up"] == 0
    leader = cluster.brokers[cluster.leader_of(topic, 0)]
    lag = leader.metric_samples("weir_follower_lag_messages")
    followers = [labels for labels in lag if f'partition="0",topic="{topic}"' in labels]
    assert len(followers) == 2, lag
    assert len(leader.metric_samples("weir_follower_lag_seconds")) == len(lag)
    cluster.brokers[3].kill()
    cluster.wait_until(
        lambda: sum(first.metric_samples("weir_under_replicated_partitions").values()) >= 3,
        20,
        "three under-replicated partitions in broker 1's metrics",
    )


@pytest.mark.own_cluster
def test_unclean_election_is_off_unless_the_topic_opts_in(cluster: WeirCluster) -> None:
    """Both topics on brokers 1 and 2: broker 2 dies (leaves the ISR), records are
    written to broker 1 alone, broker 1 dies, broker 2 returns. The default topic
    stays offline (broker 2 lacks acknowledged records); the opted-in one elects
    broker 2 and loses them."""
    clean, unclean = unique_topic_name("clean"), unique_topic_name("unclean")
    admin = cluster.admin()
    futures = admin.create_topics([
        NewTopic(clean, num_partitions=1, replica_assignment=[[1, 2]]),
        NewTopic(unclean, num_partitions=1, replica_assignment=[[1, 2]],
                 config={"unclean.leader.election.enable": "true"}),
    ])  # fmt: skip
    for future in futures.values():
        future.result(timeout=20)
    cluster.wait_full_isr(clean)
    cluster.wait_full_isr(unclean)
    cluster.brokers[2].kill()
    cluster.wait_until(
        lambda: all(list(cluster.partitions(t)[0].isrs) == [1] for t in (clean, unclean)),
        20,
        "ISRs down to broker 1",
    )
    producer = Producer({"bootstrap.servers": cluster.brokers[1].bootstrap, "acks": "all"})
    for topic in (clean, unclean):
        producer.produce(topic, b"only on broker 1")
    assert producer.flush(20) == 0
    cluster.brokers[1].kill()
    cluster.brokers[2].start()
    cluster.wait_until(lambda: cluster.leader_of(unclean, 0) == 2, 20, "unclean election of 2")
    assert cluster.leader_of(clean, 0) == -1
    offline = cli(cluster, "cluster", "partitions", "--offline")["partitions"]
    assert isinstance(offline, list)
    assert [(row["topic"], row["isr"]) for row in offline if row["topic"] == clean] == [
        (clean, [1])
    ]


def test_producer_ids_are_unique_across_brokers(cluster: WeirCluster) -> None:
    """Each broker reserves its blocks of producer ids by compare-and-swap on the
    metadata in etcd: ids handed out by different brokers never collide."""
    issued: list[int] = []
    for _ in range(2):
        for broker in cluster.brokers.values():
            with connect(broker) as sock:
                answer = round_trip(
                    sock, ApiKey.INIT_PRODUCER_ID, 4,
                    {"transactional_id": None, "transaction_timeout_ms": 60000,
                     "producer_id": -1, "producer_epoch": -1},
                )  # fmt: skip
            assert answer.error_code == ErrorCode.NONE
            issued.append(answer.producer_id)
    assert len(set(issued)) == len(issued) == 6, issued
