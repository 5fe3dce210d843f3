"""The active controller's duties, and elections: the campaign for the controller
key, leader elections for partitions whose leader died or went offline, the end of
replica moves, the preferred-leader balance (auto.leader.rebalance.enable), and
ElectLeaders (which any broker answers). Each change is a compare-and-swap of a
partition's state in etcd (`swap_partition_state`); the decisions are the pure
functions of weir/controller/partition_state.py."""

from __future__ import annotations

import logging
import uuid
from typing import Protocol

import trio

from weir.broker.broker import Broker
from weir.broker.cluster.etcd_client import Compare, EtcdClient, EtcdError, Put
from weir.broker.cluster.etcd_layout import CONTROLLER_KEY, StoredState, partition_key
from weir.controller.metadata import TopicRecord
from weir.controller.partition_state import (
    NO_LEADER,
    BrokerInfo,
    PartitionLeadership,
    PartitionState,
    elect_leader,
    elect_leader_without_offline,
    elect_preferred,
    preferred_leader_rebalance,
)
from weir.format.errors import ErrorCode

log = logging.getLogger(__name__)

# How often a broker tries to become the controller while there is none.
CAMPAIGN_INTERVAL_S = 0.5


class ControllerSeat(Protocol):
    """What the controller's duties need of the cluster member (`ClusterMember`)."""

    broker: Broker
    etcd: EtcdClient
    node_id: int
    brokers: dict[int, BrokerInfo]
    states: dict[tuple[uuid.UUID, int], StoredState]
    controller_id: int
    is_controller: bool
    controller_value: bytes
    lease_id: int
    controller_elections_total: int
    preferred_leader_elections_total: int

    def fenced(self) -> bool: ...

    def partition_state(self, topic: TopicRecord, index: int) -> PartitionState: ...

    def offline_holders(self, topic_id: uuid.UUID, index: int) -> frozenset[int]: ...

    def apply_role_of(self, topic_id: uuid.UUID, index: int) -> None: ...

    def wake_housekeeping(self) -> None: ...


class ControllerDuties:
    """Run by every broker; acting only while it holds the controller key (except
    `elect`, and `swap_partition_state` when not `as_controller`)."""

    def __init__(self, member: ControllerSeat) -> None:
        self._member = member
        self._broker = member.broker
        self._etcd = member.etcd
        self._node_id = member.node_id

    async def campaign(self) -> None:
        while True:
            if self._member.controller_id == NO_LEADER and not self._member.fenced():
                result = await self._try_campaign()
                if result:
                    self._member.controller_elections_total += 1
                    self._member.is_controller = True
                    self._member.controller_id = self._node_id
                    log.info("broker %d is the active controller", self._node_id)
                    self._member.wake_housekeeping()
            await trio.sleep(CAMPAIGN_INTERVAL_S)

    async def _try_campaign(self) -> bool:
        try:
            result = await self._etcd.txn(
                [Compare.absent(CONTROLLER_KEY)],
                [
                    Put(
                        CONTROLLER_KEY,
                        self._member.controller_value,
                        lease_id=self._member.lease_id,
                    )
                ],
            )
        except EtcdError as exc:
            log.warning("controller campaign: %s", exc)
            return False
        return result.succeeded

    async def elect_leaders(self) -> None:
        alive = frozenset(self._member.brokers)
        for topic in self._broker.controller.topics():
            config = self._broker.log_config(topic)
            unclean = config.unclean_leader_election_enable
            for index in range(topic.partition_count):
                replicas = topic.replicas(index, self._node_id)
                state = self._member.partition_state(topic, index)
                offline = self._member.offline_holders(topic.topic_id, index)
                new_state = elect_leader_without_offline(
                    state,
                    replicas,
                    alive,
                    offline,
                    unclean=unclean,
                    min_isr=config.min_insync_replicas,
                )
                if new_state is not None:
                    await self.swap_partition_state(topic, index, new_state, as_controller=True)
            for index in list(topic.reassignments):
                await self._finish_reassignment(topic, index)

    async def _finish_reassignment(self, topic: TopicRecord, index: int) -> None:
        """A move is done once every target replica is in sync: the ISR keeps only
        target replicas, a leader outside the target hands over to the first target
        replica in sync (new leader epoch), then the assignment becomes the target."""
        target, _ = topic.reassignments[index]
        state = self._member.partition_state(topic, index)
        if not set(target) <= set(state.isr):
            return
        isr = [r for r in state.isr if r in target]
        leader = state.leader if state.leader in target else next(r for r in target if r in isr)
        if isr != list(state.isr) or leader != state.leader:
            moved = PartitionState(
                leader=leader,
                leader_epoch=state.leader_epoch + (leader != state.leader),
                isr=tuple(isr),
                partition_epoch=state.partition_epoch + 1,
            )
            if not await self.swap_partition_state(topic, index, moved, as_controller=True):
                return
        await self._broker.topic_changes.commit_metadata(
            lambda: self._broker.controller.stage_finish_reassignment(topic.name, index)
        )
        log.info("%s-%d: replicas moved to %s", topic.name, index, target)

    async def balance_preferred_leaders(self) -> None:
        """Kafka's auto.leader.rebalance.enable: every
        `leader_imbalance_check_interval_ms`, the active controller hands leadership
        back to the preferred replicas of imbalanced brokers (`preferred_leader_rebalance`)."""
        config = self._broker.config
        if not config.auto_leader_rebalance_enable:
            return
        while True:
            await trio.sleep(config.leader_imbalance_check_interval_ms / 1000)
            if not self._member.is_controller or self._member.fenced():
                continue
            try:
                await self._elect_preferred_leaders(config.leader_imbalance_per_broker_percentage)
            except EtcdError as exc:
                log.warning("preferred leader balance: etcd: %s", exc)
            except Exception:  # a bug here must not stop the broker: log, check again
                log.exception("preferred leader balance failed; checking again later")

    def leaderships(self) -> dict[tuple[uuid.UUID, int], PartitionLeadership]:
        """Every partition's replicas and state, as the preferred-leader balance reads them."""
        return {
            (topic.topic_id, index): PartitionLeadership(
                replicas=tuple(topic.replicas(index, self._node_id)),
                state=self._member.partition_state(topic, index),
                moving=index in topic.reassignments,
            )
            for topic in self._broker.controller.topics()
            for index in range(topic.partition_count)
        }

    async def _elect_preferred_leaders(self, imbalance_percentage: int) -> None:
        leaderships = self.leaderships()
        elections = preferred_leader_rebalance(
            leaderships, frozenset(self._member.brokers), imbalance_percentage
        )
        for (topic_id, index), new_state in elections:
            previous = leaderships[(topic_id, index)].state
            # Each swap awaits etcd: what changed since the decision (the partition's
            # state, its topic, a move begun, the controller key) waits for the next check.
            topic = self._broker.controller.topic_by_id(topic_id)
            if (
                not self._member.is_controller
                or topic is None
                or index in topic.reassignments
                or self._member.partition_state(topic, index) != previous
                or new_state.leader in self._member.offline_holders(topic_id, index)
            ):
                continue
            if await self.swap_partition_state(topic, index, new_state, as_controller=True):
                self._member.preferred_leader_elections_total += 1
                log.info("%s-%d: leadership back to preferred replica %d (from %d): "
                         "automatic leader rebalance", topic.name, index, new_state.leader,
                         previous.leader)  # fmt: skip

    async def swap_partition_state(
        self, topic: TopicRecord, index: int, new_state: PartitionState, *, as_controller: bool
    ) -> bool:
        """Compare-and-swap the partition's state; the controller's swaps also
        require that it still holds the controller key."""
        key = partition_key(topic.topic_id, index)
        stored = self._member.states.get((topic.topic_id, index))
        guard = (
            Compare.mod_revision_is(key, stored.mod_revision)
            if stored is not None
            else Compare.absent(key)
        )
        guards = [guard]
        if as_controller:
            guards.append(Compare.value_is(CONTROLLER_KEY, self._member.controller_value))
        result = await self._etcd.txn(guards, [Put(key, new_state.to_json())])
        if not result.succeeded:
            return False
        self._member.states[(topic.topic_id, index)] = StoredState(new_state, result.revision)
        log.info("%s-%d: leader %d (epoch %d), ISR %s", topic.name, index, new_state.leader,
                 new_state.leader_epoch, list(new_state.isr))  # fmt: skip
        self._member.apply_role_of(topic.topic_id, index)
        return True

    async def elect(self, topic: TopicRecord, index: int, *, unclean: bool) -> ErrorCode:
        """ElectLeaders for one partition: the preferred replica (the first), or
        with `unclean` any live replica when no in-sync one is alive."""
        replicas = topic.replicas(index, self._node_id)
        state = self._member.partition_state(topic, index)
        # A replica reported offline can lead no more than a dead broker's.
        alive = frozenset(self._member.brokers) - self._member.offline_holders(
            topic.topic_id, index
        )
        outcome: PartitionState | ErrorCode | None
        if not unclean:
            outcome = elect_preferred(state, replicas, alive)
        elif state.leader in alive:
            outcome = ErrorCode.ELECTION_NOT_NEEDED
        else:
            outcome = elect_leader(state, replicas, alive, unclean=True)
            if outcome is None or outcome.leader == NO_LEADER:
                outcome = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        if isinstance(outcome, ErrorCode):
            return outcome
        try:
            swapped = await self.swap_partition_state(topic, index, outcome, as_controller=False)
        except EtcdError as exc:
            log.warning("election of %s-%d: %s", topic.name, index, exc)
            return ErrorCode.REQUEST_TIMED_OUT
        if not swapped:
            return ErrorCode.REQUEST_TIMED_OUT  # the state changed meanwhile: ask again
        return ErrorCode.NONE
