"""A cluster member applies a partition state it watches to that partition alone:
a failover changes thousands of states one etcd event at a time, and passing over
every local replica for each made it quadratic in the partitions."""

from __future__ import annotations

from pathlib import Path

from weir.broker.broker import Broker
from weir.broker.cluster.cluster_member import ClusterMember
from weir.broker.cluster.etcd_client import EtcdClient, KeyValue
from weir.broker.cluster.etcd_layout import partition_key
from weir.broker.cluster.replication import Replication
from weir.broker.config import BrokerConfig
from weir.controller.metadata import TopicRecord
from weir.controller.partition_state import PartitionState

PARTITIONS = 40


def watched_put(topic: TopicRecord, index: int, state: PartitionState, revision: int) -> KeyValue:
    return KeyValue(
        key=partition_key(topic.topic_id, index),
        value=state.to_json(),
        create_revision=revision,
        mod_revision=revision,
        version=1,
        lease_id=0,
    )


def leader_of(broker: Broker, index: int) -> int:
    """The leader the replica's replication acts on (its last applied state)."""
    replica = broker.partition("t", index)
    assert replica is not None and isinstance(replica.replication, Replication)
    return replica.replication.state.leader


async def test_a_watched_partition_state_applies_that_partition_only(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path, node_id=1))
    broker.open_logs()
    try:
        record = broker.controller.plan_topic("t", PARTITIONS, 1)
        broker.create_topic(record)
        member = ClusterMember(broker, EtcdClient(["http://127.0.0.1:9"]), 0)
        member.apply_roles()
        assert [leader_of(broker, i) for i in range(PARTITIONS)] == [1] * PARTITIONS

        asked: list[int] = []
        read_state = member.partition_state

        def counting(topic: TopicRecord, index: int) -> PartitionState:
            asked.append(index)
            return read_state(topic, index)

        member.partition_state = counting  # type: ignore[method-assign]
        moved = PartitionState(leader=2, leader_epoch=1, isr=(2,), partition_epoch=1)
        member.watch.apply_put(watched_put(record, 7, moved, revision=10), initial=False)

        assert asked == [7]
        assert [leader_of(broker, i) for i in range(PARTITIONS)] == [1] * 7 + [2] + [1] * (
            PARTITIONS - 8
        )
    finally:
        broker.close()
