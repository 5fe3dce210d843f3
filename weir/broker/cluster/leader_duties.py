"""A leader's duties: its ISR kept by compare-and-swap in etcd (followers that lag
or whose fetch connection closed leave it, caught-up ones join), leadership handed
to an eligible replica when no follower reaches it (`abdicate`), and the followers'
fetches and fetch connections it tracks. Each change is guarded by this broker's
own registration: a leader whose lease ended changes nothing."""

from __future__ import annotations

import logging
import uuid
from typing import Protocol

import trio

from weir.broker.broker import Broker
from weir.broker.cluster.etcd_client import Compare, EtcdClient, Put
from weir.broker.cluster.etcd_layout import StoredState, broker_key, partition_key
from weir.broker.cluster.replication import Replication, monotonic_ms
from weir.broker.partition_replica import PartitionReplica
from weir.broker.roles import ConnectionEnd
from weir.controller.partition_state import BrokerInfo, PartitionState, abdicate, change_isr

log = logging.getLogger(__name__)


class LeaderSeat(Protocol):
    """What a leader's duties need of the cluster member (`ClusterMember`)."""

    broker: Broker
    etcd: EtcdClient
    node_id: int
    brokers: dict[int, BrokerInfo]
    states: dict[tuple[uuid.UUID, int], StoredState]
    registration_revision: int
    isr_shrinks_total: int
    isr_expands_total: int
    leader_abdications_total: int

    def fenced(self) -> bool: ...

    def apply_roles(self) -> None: ...

    def wake_housekeeping(self) -> None: ...


class LeaderDuties:
    """For every partition this broker leads (`maintain_isr`, on each housekeeping pass)."""

    def __init__(self, member: LeaderSeat) -> None:
        self._member = member
        self._broker = member.broker
        self._etcd = member.etcd
        self._node_id = member.node_id
        config = member.broker.config
        self._lag_time_max_ms = config.replica_lag_time_max_ms
        self._disconnect_grace_ms = config.replica_disconnect_grace_ms
        # Per follower broker: the connection its latest replica fetch came on, and
        # when (Trio clock) that connection closed with no fetch since.
        self._follower_connections: dict[int, ConnectionEnd] = {}
        self._follower_disconnected_s: dict[int, float] = {}

    def record_follower_fetch(
        self, replica: PartitionReplica, replica_id: int, fetch_offset: int
    ) -> None:
        replication = replica.replication
        if not isinstance(replication, Replication) or replication.state.leader != self._node_id:
            return
        now_ms = monotonic_ms()
        replication.record_follower_fetch(replica_id, fetch_offset, now_ms)
        if replication.caught_up_followers(now_ms, self._lag_time_max_ms):
            self._member.wake_housekeeping()

    async def maintain_isr(self) -> None:
        if self._member.fenced():
            return
        now_ms = monotonic_ms()
        now_s = trio.current_time()
        disconnected = self._disconnected_followers(now_s)
        for replica in list(self._broker.partitions.values()):
            replication = replica.replication
            if not isinstance(replication, Replication):
                continue
            if replication.state.leader != self._node_id:
                continue
            replication.advance_high_watermark()
            # The current assignment, not the replication's view (a metadata change
            # may not have reached it): a replica a move removed never rejoins.
            replicas = replica.topic.replicas(replica.index, self._node_id)
            isr = replication.state.isr
            lagging = replication.lagging_followers(now_ms, self._lag_time_max_ms)
            lagging += [r for r in isr if r in disconnected and r not in lagging]
            joining = [
                r
                for r in replication.caught_up_followers(now_ms, self._lag_time_max_ms)
                if r in self._member.brokers and r in replicas and r not in disconnected
            ]
            # An ELR left over from a higher min.insync.replicas holds the HW back.
            stale_elr = bool(replication.state.elr) and (
                len(isr) >= replication.min_insync_replicas()
            )
            if lagging or joining or stale_elr:
                await self._change_isr(replica, replication, lagging, joining)
            elif replication.cut_off(now_s, self._lag_time_max_ms):
                await self._abdicate(replica, replication)

    async def _change_isr(
        self,
        replica: PartitionReplica,
        replication: Replication,
        lagging: list[int],
        joining: list[int],
    ) -> None:
        isr = [r for r in replication.state.isr if r not in lagging] + joining
        if not await self._swap_isr(replica, replication, isr):
            return
        name = f"{replica.topic.name}-{replica.index}"
        if lagging:
            self._member.isr_shrinks_total += 1
            log.info("%s: ISR shrinks by %s", name, lagging)
        if joining:
            self._member.isr_expands_total += 1
            log.info("%s: ISR gains %s", name, joining)
        if replication.state.elr:
            log.info("%s: eligible leader replicas %s", name, list(replication.state.elr))

    async def _swap_isr(
        self, replica: PartitionReplica, replication: Replication, isr: list[int]
    ) -> bool:
        new_state = change_isr(
            replication.state,
            isr,
            min_isr=replication.min_insync_replicas(),
            replicas=replica.topic.replicas(replica.index, self._node_id),
        )
        if not await self._swap_as_leader(replica, new_state):
            return False
        replication.become_leader(new_state, monotonic_ms())
        return True

    async def _swap_as_leader(self, replica: PartitionReplica, new_state: PartitionState) -> bool:
        """Compare-and-swap the state of a partition this broker leads, guarded by
        its own registration: a leader whose lease ended changes nothing."""
        topic = replica.topic
        stored = self._member.states.get((topic.topic_id, replica.index))
        key = partition_key(topic.topic_id, replica.index)
        guard = (
            Compare.mod_revision_is(key, stored.mod_revision)
            if stored is not None
            else Compare.absent(key)
        )
        result = await self._etcd.txn(
            [
                guard,
                Compare.create_revision_is(
                    broker_key(self._node_id), self._member.registration_revision
                ),
            ],
            [Put(key, new_state.to_json())],
        )
        if not result.succeeded:
            return False
        self._member.states[(topic.topic_id, replica.index)] = StoredState(
            new_state, result.revision
        )
        return True

    async def _abdicate(self, replica: PartitionReplica, replication: Replication) -> None:
        """No follower reached this leader for replica_lag_time_max_ms and its ISR is
        below min.insync.replicas: hand leadership to an eligible replica that is
        alive (`abdicate`), which the followers may reach, and follow it."""
        before = replication.state
        new_state = abdicate(
            before,
            replica.topic.replicas(replica.index, self._node_id),
            frozenset(self._member.brokers),
            min_isr=replication.min_insync_replicas(),
        )
        if new_state is None or not await self._swap_as_leader(replica, new_state):
            return
        self._member.leader_abdications_total += 1
        log.warning("%s-%d: no follower fetched for %d ms and ISR %s is below "
                    "min.insync.replicas: broker %d leads now (epoch %d), ELR %s",
                    replica.topic.name, replica.index, self._lag_time_max_ms,
                    list(before.isr), new_state.leader, new_state.leader_epoch,
                    list(new_state.elr))  # fmt: skip
        self._member.apply_roles()

    def follower_connected(self, replica_id: int, connection: ConnectionEnd | None) -> None:
        """A replica fetch of `replica_id` came on `connection`. When that connection
        closes (a killed follower's kernel closes it at once) and no fetch follows
        within replica_disconnect_grace_ms, the follower leaves the ISR of every
        partition this broker leads, without waiting for replica_lag_time_max_ms."""
        self._follower_disconnected_s.pop(replica_id, None)
        if connection is None or self._follower_connections.get(replica_id) is connection:
            return
        self._follower_connections[replica_id] = connection
        connection.on_close(lambda: self._follower_connection_closed(replica_id, connection))

    def _follower_connection_closed(self, replica_id: int, connection: ConnectionEnd) -> None:
        if self._follower_connections.get(replica_id) is not connection:
            return  # an older connection: the follower fetches on a newer one
        del self._follower_connections[replica_id]
        self._follower_disconnected_s[replica_id] = trio.current_time()
        self._member.wake_housekeeping()

    def _disconnected_followers(self, now_s: float) -> set[int]:
        grace_s = self._disconnect_grace_ms / 1000
        return {r for r, at_s in self._follower_disconnected_s.items() if now_s - at_s >= grace_s}
