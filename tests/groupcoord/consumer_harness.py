"""A KIP-848 coordinator driven by simulated clients and a fake clock (the world the
consumer-group tests share)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from weir.format.errors import ErrorCode
from weir.groupcoord import consumer_group_records as rec
from weir.groupcoord.consumer_coordinator import ConsumerGroupCoordinator
from weir.groupcoord.consumer_group import TopicInfo
from weir.groupcoord.consumer_messages import HeartbeatResult
from weir.groupcoord.settings import GroupSettings

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
GROUP = "g"
REBALANCE_TIMEOUT_MS = 30_000


class World:
    """The coordinator, the topics the broker knows, a clock, and the records written."""

    def __init__(self, **config: int) -> None:
        self.coordinator = ConsumerGroupCoordinator(GroupSettings(**config))  # type: ignore[arg-type]
        self.topics: dict[str, TopicInfo] = {"t1": TopicInfo(T1, 6), "t2": TopicInfo(T2, 4)}
        self.now_ms = 1_000
        self.records: list[rec.GroupRecord] = []

    def tick(self, ms: int) -> list[rec.GroupRecord]:
        self.now_ms += ms
        expired = self.coordinator.advance(self.now_ms)
        self.records += expired
        return expired


@dataclass
class Client:
    """A consumer as librdkafka behaves: it owns what the last assignment gave it."""

    world: World
    member_id: str
    topics: list[str]
    instance_id: str | None = None
    assignor: str | None = None
    epoch: int = 0
    owned: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    # When True the client does not give partitions up (a slow rebalance listener).
    stuck: bool = False
    last: HeartbeatResult | None = None

    def owned_list(self) -> list[tuple[uuid.UUID, list[int]]]:
        return [(t, sorted(ps)) for t, ps in sorted(self.owned.items()) if ps]

    def heartbeat(self, **overrides: object) -> HeartbeatResult:
        joining = self.epoch == 0
        kwargs: dict[str, object] = {
            "now_ms": self.world.now_ms,
            "topics": self.world.topics,
            "instance_id": self.instance_id if joining else None,
            "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS if joining else -1,
            "subscribed_topic_names": self.topics if joining else None,
            "server_assignor": self.assignor if joining else None,
            "topic_partitions": [] if joining else self.owned_list(),
        }
        kwargs.update(overrides)
        result = self.world.coordinator.heartbeat(GROUP, self.member_id, self.epoch, **kwargs)  # type: ignore[arg-type]
        self.last = result
        self.world.records += result.records
        if result.error_code != ErrorCode.NONE:
            return result
        self.epoch = result.member_epoch
        if result.assignment is not None:
            new = {t: set(ps) for t, ps in result.assignment}
            if self.stuck:
                for t, ps in new.items():
                    self.owned.setdefault(t, set()).update(ps)
            else:
                self.owned = new
        return result

    def partitions(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def no_partition_twice(clients: Iterable[Client]) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for c in clients:
        for tp in c.partitions():
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {c.member_id}"
            seen[tp] = c.member_id


def converge(world: World, clients: list[Client], rounds: int = 10) -> None:
    """Heartbeat every client in turn, checking exclusive ownership after every step."""
    for _ in range(rounds):
        for c in clients:
            result = c.heartbeat()
            assert result.error_code == ErrorCode.NONE, result
            no_partition_twice(clients)
        world.now_ms += 100


def all_partitions(world: World, names: Iterable[str]) -> set[tuple[uuid.UUID, int]]:
    return {
        (world.topics[n].topic_id, p) for n in names for p in range(world.topics[n].partition_count)
    }
