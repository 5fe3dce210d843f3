"""Share partitions led here: records acquired, acknowledged and redelivered (KIP-932).

The leader of a topic partition serves every share group's view of it: a
`weir.sharecoord.share_partition.SharePartition` per (group, topic, partition),
the pure state machine, driven from here:

1. first use: its durable state is read from the share coordinator
   (`share_state_service`); with none, it starts where the group's
   `share.auto.offset.reset` says (latest: the high watermark; earliest: the log
   start; by_duration: the first record at or after now minus the duration), and
   that start is stored at once, so a restart before any acknowledgement does not
   move it;
2. acquire (ShareFetch): the log is read from the partition's `fetch_offset`, up to
   the high watermark, and the batches found are offered to `acquire`, which locks
   records for the member and counts the delivery;
3. acknowledge (ShareFetch's piggy-backed batches, ShareAcknowledge);
4. time: one task expires the locks at the earliest deadline of all partitions,
   which includes the time a delayed record becomes visible (`pass_time`);
5. every change is stored (`ShareStateService.write`, the whole state as one
   record) and the request is answered once that is durable: an acknowledgement
   that was answered is never lost, and a delivery count a consumer saw is never
   undercounted after a crash.

Records that become available again (released, lock expired, a delay or backoff
over) wake the share fetches parked on that partition, as new records do.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.coordinators.share_configs import ShareGroupConfig, share_group_config
from weir.broker.coordinators.share_state_service import (
    ShareKey,
    ShareStateFencedError,
    ShareStateService,
    ShareStateUnavailableError,
)
from weir.broker.partition_replica import PartitionReplica
from weir.format.errors import ErrorCode
from weir.sharecoord.share_partition import Archived, SharePartition, ShareSettings

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ShareLeader:
    """One share partition served here, with the fetches parked on it."""

    key: ShareKey
    replica: PartitionReplica
    partition: SharePartition
    leader_epoch: int
    # Share fetches parked until records are available again (release, expiry).
    waiters: set[trio.Event] = field(default_factory=set)

    def wake(self) -> None:
        for event in self.waiters:
            event.set()
        self.waiters.clear()


class SharePartitions:
    def __init__(self, broker: Broker, store: ShareStateService) -> None:
        self.broker = broker
        self.store = store
        self.leaders: dict[ShareKey, ShareLeader] = {}
        # Share partitions being loaded: requests for them wait on the event.
        self._loading: dict[ShareKey, trio.Event] = {}
        # Each group's share config and the overrides it was parsed from.
        self._configs: dict[str, tuple[dict[str, str], ShareGroupConfig]] = {}
        self._wakeup = trio.Event()
        # Called with the records a share partition archived (`dead_letters`).
        self.on_archived: Callable[[ShareKey, Sequence[Archived]], None] | None = None

    def config(self, group_id: str) -> ShareGroupConfig:
        """The group's share config, parsed again only when its overrides changed."""
        overrides = self.broker.controller.group_configs(group_id)
        cached = self._configs.get(group_id)
        if cached is not None and cached[0] == overrides:
            return cached[1]
        config = share_group_config(self.broker, group_id)
        self._configs[group_id] = (overrides, config)
        return config

    # -- the share partitions served here --------------------------------------

    async def leader(self, key: ShareKey, replica: PartitionReplica) -> ShareLeader:
        """The share partition, loaded or initialized on first use (once: concurrent
        requests wait for the first). Raises ShareStateUnavailableError."""
        while True:
            current = self._current(key, replica)
            if current is not None:
                return current
            loading = self._loading.get(key)
            if loading is None:
                break
            await loading.wait()
        done = self._loading[key] = trio.Event()
        try:
            return await self._load(key, replica)
        finally:
            del self._loading[key]
            done.set()

    def _current(self, key: ShareKey, replica: PartitionReplica) -> ShareLeader | None:
        existing = self.leaders.get(key)
        if existing is None or existing.replica is not replica:
            return None
        if existing.leader_epoch != replica.leader_epoch:
            return None
        self._follow_config(existing)
        return existing

    def _follow_config(self, leader: ShareLeader) -> None:
        """Apply the group's config as it is now (IncrementalAlterConfigs, or a cluster's
        metadata watch, changed it): the lock duration, RENEW, the dead-letter topic and
        key ordering at once; the delivery count limit and the in-flight bound when the share
        partition is next loaded (the records in flight were counted under the old)."""
        current = leader.partition.settings
        wanted = partition_settings(self.config(leader.key.group_id))
        if wanted == current:
            return
        leader.partition.settings = dataclasses.replace(
            wanted,
            delivery_count_limit=current.delivery_count_limit,
            partition_max_record_locks=current.partition_max_record_locks,
        )

    async def _load(self, key: ShareKey, replica: PartitionReplica) -> ShareLeader:
        await self.store.ready()
        config = self.config(key.group_id)
        settings = partition_settings(config)
        leader_epoch = max(replica.leader_epoch, 0)
        state = await self.store.read(key, leader_epoch)
        if state is None:
            start_offset = self._initial_offset(replica, config)
            partition = SharePartition.starting_at(
                start_offset, settings, leader_epoch=leader_epoch
            )
            await self.store.write(key, partition.state())
        else:
            partition = SharePartition.from_state(state, settings, leader_epoch=leader_epoch)
            partition.advance_start_to(replica.log.log_start_offset)
        leader = ShareLeader(key, replica, partition, replica.leader_epoch)
        self.leaders[key] = leader
        # Records archived at load, or still ARCHIVING (awaiting their dead letters).
        self.archived(leader, partition.archived_at_load or partition.pending_dead_letters())
        self.poke()
        return leader

    def _initial_offset(self, replica: PartitionReplica, config: ShareGroupConfig) -> int:
        reset = config.auto_offset_reset
        if reset.earliest:
            return replica.log.log_start_offset
        if reset.duration_ms is not None:
            found = replica.log.offset_for_timestamp(wall_clock_ms() - reset.duration_ms)
            return (
                replica.high_watermark if found is None else min(found[0], replica.high_watermark)
            )
        return replica.high_watermark

    def forget_not_led(self) -> None:
        """Drop the share partitions whose topic partition is no longer led here (or
        gone): their state stays in the share coordinator for the next leader."""
        for key, leader in list(self.leaders.items()):
            current = self.broker.partition(leader.replica.topic.name, key.partition)
            if current is not leader.replica or not current.is_leader:
                del self.leaders[key]
                leader.wake()

    def _forget(self, leader: ShareLeader) -> None:
        if self.leaders.get(leader.key) is leader:
            del self.leaders[leader.key]
            leader.wake()

    def forget_group(self, group_id: str) -> None:
        for key in [k for k in self.leaders if k.group_id == group_id]:
            self.leaders.pop(key).wake()

    # -- storing --------------------------------------------------------------------

    async def persist(self, leaders: Sequence[ShareLeader]) -> ErrorCode:
        """Store the state of each of `leaders` (once each) and return once durable."""
        error = ErrorCode.NONE
        seen: set[ShareKey] = set()
        for leader in leaders:
            if leader.key in seen:
                continue
            seen.add(leader.key)
            try:
                await self.store.write(leader.key, leader.partition.state())
            except ShareStateUnavailableError as exc:
                log.warning("share partition %s: state not stored: %s", leader.key, exc)
                error = exc.error_code
                if isinstance(exc, ShareStateFencedError):
                    self._forget(leader)  # loaded again by the next request, if led here
        return error

    def archived(self, leader: ShareLeader, archived: Sequence[Archived]) -> None:
        if archived and self.on_archived is not None:
            self.on_archived(leader.key, archived)

    # -- time -----------------------------------------------------------------------

    def poke(self) -> None:
        self._wakeup.set()

    def _next_deadline_ms(self) -> int | None:
        deadlines = [
            deadline
            for leader in self.leaders.values()
            if (deadline := leader.partition.next_deadline_ms()) is not None
        ]
        return min(deadlines, default=None)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Expire the locks at their deadlines, store what changed, wake fetches."""
        task_status.started()
        while True:
            self._wakeup = trio.Event()
            next_ms = self._next_deadline_ms()
            now_ms = wall_clock_ms()
            if next_ms is not None and next_ms <= now_ms:
                await self.expire(now_ms)
                continue
            wait_s = None if next_ms is None else (next_ms - now_ms) / 1000
            with trio.move_on_after(wait_s if wait_s is not None else float("inf")):
                await self._wakeup.wait()

    async def expire(self, now_ms: int) -> None:
        changed = []
        for leader in list(self.leaders.values()):
            deadline = leader.partition.next_deadline_ms()
            if deadline is None or deadline > now_ms:
                continue
            passed = leader.partition.pass_time(now_ms)
            self.archived(leader, passed.archived)
            if passed.locks_expired:
                changed.append(leader)
            elif passed.made_visible:  # nothing to store: the delay was over
                leader.wake()
        if changed:
            await self.persist(changed)
            for leader in changed:
                leader.wake()

    async def release_member(self, member_id: str, keys: Sequence[ShareKey]) -> None:
        """A member's share session closed: its records in `keys` are available again."""
        now_ms = wall_clock_ms()
        changed = []
        for key in keys:
            leader = self.leaders.get(key)
            if leader is None:
                continue
            self.archived(leader, leader.partition.release_member(member_id, now_ms))
            changed.append(leader)
        if changed:
            await self.persist(changed)
            for leader in changed:
                leader.wake()


def partition_settings(config: ShareGroupConfig) -> ShareSettings:
    """What a share partition needs of its group's config."""
    return ShareSettings(
        record_lock_duration_ms=config.record_lock_duration_ms,
        delivery_count_limit=config.delivery_count_limit,
        partition_max_record_locks=config.partition_max_record_locks,
        renew_acknowledge_enabled=config.renew_acknowledge_enable,
        dead_letters=config.dead_letter_topic is not None,
        release_backoff_initial_ms=min(
            config.release_backoff_initial_ms, config.delivery_delay_max_ms
        ),
        release_backoff_max_ms=min(config.release_backoff_max_ms, config.delivery_delay_max_ms),
        key_ordering=config.key_ordering,
    )
