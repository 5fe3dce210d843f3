"""The push deliveries this broker makes: one `PartitionPusher` per (subscription,
partition) the broker leads, started and stopped as subscriptions are created,
paused, resumed and deleted (the controller's push listeners; a cluster's metadata
watch brings another broker's changes) and as leadership moves (the broker's
leadership listeners), and checked again every second.

A subscription's deliveries of a partition are made by that partition's leader
only: after a failover, the new leader's share partition has the records the old
one held acquired (available again when their locks run out or at its load) and its
loop delivers them; what the old leader had in flight may be delivered twice.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio
from starlette.requests import Request

from weir.broker.broker import Broker
from weir.broker.coordinators.share_service import ShareService
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.broker.push.delivery import HttpPoster, PartitionPusher, PartitionStatus
from weir.broker.push.share_access import ShareAccess, new_member_id
from weir.broker.push.subscription import (
    Subscription,
    SubscriptionError,
    subscription_from_stored,
)

log = logging.getLogger(__name__)

RECONCILE_INTERVAL_S = 1.0

LoopKey = tuple[str, int]  # (subscription name, partition)


@dataclass
class _Running:
    subscription: Subscription
    scope: trio.CancelScope
    done: trio.Event = field(default_factory=trio.Event)


class PushService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        # The foundation's ShareDirect as the broker (set by `push_routes`).
        self.access: ShareAccess | None = None
        # A request's authorization (weir.broker.http.authentication's, set by
        # `push_routes`): None when no authorizer is on.
        self.authorize: Callable[[Broker, Request, str], RequestAuthorization | None] = (
            lambda broker, request, api: None
        )
        self.loops: dict[LoopKey, _Running] = {}
        # (subscription name, topic, partition) -> what this broker did.
        self.status: dict[tuple[str, str, int], PartitionStatus] = {}
        self._parsed: dict[str, tuple[dict[str, Any], Subscription | None]] = {}
        self._wakeup = trio.Event()
        broker.controller.push_listeners.append(self.poke)
        broker.leadership_listeners.append(self.poke)

    def poke(self) -> None:
        self._wakeup.set()

    def subscriptions(self) -> dict[str, Subscription]:
        """The cluster's subscriptions (a stored one that no longer parses is logged
        and left out)."""
        found = {}
        for name, document in self.broker.controller.push_subscriptions().items():
            cached = self._parsed.get(name)
            if cached is None or cached[0] is not document:
                try:
                    parsed: Subscription | None = subscription_from_stored(document)
                except SubscriptionError as exc:
                    log.warning("push subscription %r is damaged: %s", name, exc)
                    parsed = None
                cached = self._parsed[name] = (document, parsed)
            if cached[1] is not None:
                found[name] = cached[1]
        return found

    def partition_status(self, subscription: Subscription) -> list[dict[str, object]]:
        """This broker's status for the subscription's partitions it leads or did."""
        rows = []
        for (name, topic, partition), status in sorted(self.status.items()):
            if name != subscription.name or topic != subscription.topic:
                continue
            replica = self.broker.partition(topic, partition)
            leads = replica is not None and replica.is_leader
            rows.append(
                {
                    "partition": partition,
                    "leader": leads,
                    "delivering": (name, partition) in self.loops,
                    **status.to_json(),
                }
            )
        return rows

    def _desired(self) -> dict[LoopKey, Subscription]:
        if self.access is None or not isinstance(self.broker.shares, ShareService):
            return {}
        if not self.broker.ready:
            return {}
        desired = {}
        for subscription in self.subscriptions().values():
            if subscription.paused:
                continue
            topic = self.broker.controller.topic(subscription.topic)
            if topic is None:
                continue
            for partition in range(topic.partition_count):
                replica = self.broker.partition(subscription.topic, partition)
                if replica is not None and replica.is_leader:
                    desired[(subscription.name, partition)] = subscription
        return desired

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                self._wakeup = trio.Event()
                self._reconcile(nursery)
                with trio.move_on_after(RECONCILE_INTERVAL_S):
                    await self._wakeup.wait()

    def _reconcile(self, nursery: trio.Nursery) -> None:
        desired = self._desired()
        names = set(self.subscriptions())
        for gone in [k for k in self.status if k[0] not in names]:
            del self.status[gone]  # deleted: a new subscription of that name starts at 0
        for key, running in list(self.loops.items()):
            if desired.get(key) != running.subscription:
                running.scope.cancel()
                del self.loops[key]
        for key, subscription in desired.items():
            if key not in self.loops:
                self._start(nursery, key, subscription)

    def _start(self, nursery: trio.Nursery, key: LoopKey, subscription: Subscription) -> None:
        name, partition = key
        status = self.status.setdefault((name, subscription.topic, partition), PartitionStatus())
        running = _Running(subscription, trio.CancelScope())
        self.loops[key] = running
        log.info("push %s: delivering %s-%d", name, subscription.topic, partition)
        nursery.start_soon(self._run_loop, key, running, status)

    async def _run_loop(self, key: LoopKey, running: _Running, status: PartitionStatus) -> None:
        subscription = running.subscription
        partition = key[1]
        poster = HttpPoster(subscription.concurrency)
        assert self.access is not None
        try:
            with running.scope:
                pusher = PartitionPusher(
                    subscription,
                    partition,
                    self.access,
                    poster,
                    status,
                    new_member_id(self.broker.config.node_id),
                )
                await pusher.run()
        except Exception:  # one subscription's bug must not stop the broker
            log.exception("push %s: delivery of %s-%d failed", subscription.name,
                          subscription.topic, partition)  # fmt: skip
        finally:
            if self.loops.get(key) is running:
                del self.loops[key]  # started again at the next check
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await poster.aclose()
            running.done.set()
            log.info("push %s: stopped delivering %s-%d", subscription.name,
                     subscription.topic, partition)  # fmt: skip


_SERVICES: weakref.WeakKeyDictionary[Broker, PushService] = weakref.WeakKeyDictionary()


def push_service_of(broker: Broker) -> PushService:
    """The broker's push service (made on first use: the HTTP routes and the broker's
    start both ask for it)."""
    service = _SERVICES.get(broker)
    if service is None:
        service = _SERVICES[broker] = PushService(broker)
    return service
