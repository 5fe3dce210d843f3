"""Leadership and in-sync replicas of each partition, and the controller's decisions
about them: placement of new replicas, leader election, ISR changes.

Pure functions over plain values (no etcd, no clock, no sockets): the broker's
cluster member reads and writes the states through etcd (compare-and-swap on each
partition's key) and asks these functions what the next state is.

A partition's state is changed only by compare-and-swap on its `partition_epoch`
(etcd's mod revision of its key): the leader changes its ISR, the controller its
leader (and drops dead brokers from the ISR). The leader epoch moves on every
leader change, so that every batch a leader writes carries the epoch of its term
and followers can find where their logs diverge (KIP-101/279).

Eligible leader replicas (KIP-966's ELR): the high watermark does not advance while
the ISR is below `min.insync.replicas` (nor while the ELR is not empty, see
`change_isr`), so the replicas that leave the ISR as it falls below that minimum
still hold every committed record. They are kept in `elr`, and a clean election
may pick one of them when no ISR member can lead (`elect_leader`, `abdicate`).
Every ELR member holds every record below the committed high watermark: it came
from the ISR, and nothing has been committed since it left (the ELR is emptied
in the same change that brings the ISR back to `min.insync.replicas`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from weir.controller.errors import ControllerError
from weir.format.errors import ErrorCode

NO_LEADER = -1
# Brokers' JSON documents in etcd: bounded, so a corrupt value cannot become a huge object.
STATE_DOCUMENT_BYTES_MAX = 64 * 1024
# A broker's offline replicas (below): every partition of a failed disk may be listed,
# so more room than a state, and still below etcd's default 1.5 MiB request limit.
OFFLINE_REPLICAS_DOCUMENT_BYTES_MAX = 1024 * 1024

# A partition replica named by its topic id and partition index.
ReplicaKey = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker, as registered under its lease."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    # Unguessable token a follower presents with its replica fetches (see the
    # broker's replication): a client cannot claim a broker's replica id without it.
    replication_token: str = ""
    # etcd's create revision of the registration: moves on every (re)registration.
    epoch: int = 0
    # Each Kafka listener's advertised address by listener name (host and port above
    # are the inter-broker listener's). Absent from older registrations: empty.
    listeners: tuple[tuple[str, str, int], ...] = ()
    # The base URL of its HTTP API (scheme, advertised host, HTTP port), which the
    # other brokers ask for its own statistics. Absent from older registrations: "".
    http_url: str = ""

    def endpoint(self, listener_name: str) -> tuple[str, int]:
        """The address a client that came in on `listener_name` is told (Kafka
        answers with the same listener's endpoint of every broker)."""
        for name, host, port in self.listeners:
            if name == listener_name:
                return host, port
        return self.host, self.port

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "node_id": self.node_id,
                "host": self.host,
                "port": self.port,
                "rack": self.rack,
                "replication_token": self.replication_token,
                "listeners": {name: [host, port] for name, host, port in self.listeners},
                **({"http_url": self.http_url} if self.http_url else {}),
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, value: bytes, epoch: int) -> BrokerInfo:
        doc = _load_document(value)
        rack = doc.get("rack")
        return cls(
            node_id=_int(doc["node_id"]),
            host=str(doc["host"]),
            port=_int(doc["port"]),
            rack=None if rack is None else str(rack),
            replication_token=str(doc.get("replication_token", "")),
            epoch=epoch,
            listeners=_listeners(doc.get("listeners")),
            http_url=str(doc.get("http_url") or ""),
        )


def _listeners(doc: object) -> tuple[tuple[str, str, int], ...]:
    if not isinstance(doc, dict):
        return ()
    listeners = []
    for name, address in sorted(doc.items()):
        if isinstance(address, list) and len(address) == 2:
            listeners.append((str(name), str(address[0]), _int(address[1])))
    return tuple(listeners)


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    # Moves on every change of this state (leader or ISR); the CAS guard.
    partition_epoch: int = 0
    # Eligible leader replicas (KIP-966): out of the ISR, yet holding every committed
    # record (see the module's docstring). Absent from older documents: empty.
    elr: tuple[int, ...] = ()

    def to_json(self) -> bytes:
        doc: dict[str, object] = {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "partition_epoch": self.partition_epoch,
        }
        if self.elr:
            doc["elr"] = list(self.elr)
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_json(cls, value: bytes) -> PartitionState:
        doc = _load_document(value)
        return cls(
            leader=_int(doc["leader"]),
            leader_epoch=_int(doc["leader_epoch"]),
            isr=_int_tuple(doc["isr"], "isr"),
            partition_epoch=_int(doc["partition_epoch"]),
            elr=_int_tuple(doc.get("elr", []), "elr"),
        )

    def with_isr(self, isr: Iterable[int]) -> PartitionState:
        return replace(self, isr=tuple(isr), partition_epoch=self.partition_epoch + 1)


def _int_tuple(value: object, name: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{name} is not a list")
    return tuple(_int(r) for r in value)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _load_document(value: bytes) -> dict[str, object]:
    if len(value) > STATE_DOCUMENT_BYTES_MAX:
        raise ValueError(f"document of {len(value)} bytes")
    doc = json.loads(value)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc


def initial_state(replicas: Sequence[int]) -> PartitionState:
    """A new partition: led by its first replica, every replica in sync (all empty)."""
    assert replicas, "a partition has at least one replica"
    return PartitionState(leader=replicas[0], leader_epoch=0, isr=tuple(replicas))


def change_isr(
    state: PartitionState, isr: Iterable[int], *, min_isr: int, replicas: Sequence[int]
) -> PartitionState:
    """`state` with the ISR `isr` (the leader's shrink or expansion, the controller's
    removal of dead followers), the ELR kept true (KIP-966):

    - the ISR reaches `min_isr`: the ELR empties (the high watermark may advance
      again, past what its members hold);
    - else the replicas that leave the ISR join the ELR (nothing is committed while
      the ISR is below `min_isr`, so they keep every committed record), and
      replicas that join the ISR leave it.

    Replicas no longer assigned (a finished move) are never in the ELR."""
    new_isr, elr = _isr_and_elr(state, isr, min_isr, replicas)
    return replace(state, isr=new_isr, elr=elr, partition_epoch=state.partition_epoch + 1)


def _isr_and_elr(
    state: PartitionState, isr: Iterable[int], min_isr: int, replicas: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    new_isr = tuple(isr)
    if len(new_isr) >= min_isr:
        return new_isr, ()
    removed = [r for r in state.isr if r not in new_isr]
    # Order kept, newcomers last: an abdication picks the ELR's first live member,
    # so successive abdications rotate through the ELR (see `abdicate`).
    elr = dict.fromkeys(r for r in (*state.elr, *removed) if r in replicas and r not in new_isr)
    return new_isr, tuple(elr)


def elect_leader(
    state: PartitionState,
    replicas: Sequence[int],
    alive: frozenset[int],
    *,
    unclean: bool = False,
    min_isr: int = 1,
) -> PartitionState | None:
    """The next state when the leader is gone or dead brokers are in the ISR;
    None when nothing changes.

    - The leader is alive: only dead followers (and ISR members that are no longer
      replicas) leave the ISR, never the leader (into the ELR when the ISR falls
      below `min_isr`, see `change_isr`).
    - The leader is dead or absent: the first replica (assignment order: the
      preferred leader first) that is in the ISR and alive leads, with a new
      leader epoch; the ISR keeps its live members.
    - No live ISR member: the first live replica of the ELR leads (clean: it holds
      every committed record), alone in the ISR.
    - No live ISR or ELR member: the partition is offline (no leader) and keeps its
      ISR and ELR, so that one of those brokers leads again when it returns. With
      `unclean` (the topic's unclean.leader.election.enable), a live replica
      outside them leads instead, and acknowledged records it lacks are lost.
    """
    # Dead brokers leave the ISR, and so does a replica a finished move removed.
    live_isr = tuple(r for r in state.isr if r in alive and r in replicas)
    if state.leader != NO_LEADER and state.leader in alive:
        if live_isr == state.isr:
            return None
        return change_isr(state, live_isr, min_isr=min_isr, replicas=replicas)
    candidates = [r for r in replicas if r in live_isr]
    if candidates:
        isr, elr = _isr_and_elr(state, live_isr, min_isr, replicas)
        return _new_leader(state, candidates[0], isr, elr)
    eligible = [r for r in replicas if r in state.elr and r in alive]
    if eligible:
        isr, elr = _isr_and_elr(state, eligible[:1], min_isr, replicas)
        return _new_leader(state, eligible[0], isr, elr)
    if unclean:
        outside = [r for r in replicas if r in alive]
        if outside:
            return _new_leader(state, outside[0], (outside[0],), ())
    if state.leader == NO_LEADER:
        return None
    return replace(
        state,
        leader=NO_LEADER,
        leader_epoch=state.leader_epoch + 1,
        partition_epoch=state.partition_epoch + 1,
    )


def elect_leader_without_offline(
    state: PartitionState,
    replicas: Sequence[int],
    alive: frozenset[int],
    offline: frozenset[int],
    *,
    unclean: bool = False,
    min_isr: int = 1,
) -> PartitionState | None:
    """`elect_leader` when the brokers in `offline` are alive but hold this
    partition's replica offline (a write or fsync on its disk failed: Kafka's
    failed log directory). Such a replica is dead for this partition only: it
    cannot lead, it leaves the ISR, and it is never chosen, not even by an
    unclean election, until its broker reports it back (after a restart).

    - An offline leader hands over to the first other live ISR member in replica
      order (leader epoch + 1), which has every acknowledged record; the offline
      replica leaves the ISR.
    - An offline follower leaves the ISR at once (sooner than by lag), so acks=all
      writes do not wait for it.
    - No other live ISR member: the partition goes offline (no leader), keeping
      its ISR, as with every ISR member dead; it returns when one of them does.
    """
    return elect_leader(state, replicas, alive - offline, unclean=unclean, min_isr=min_isr)


def abdicate(
    state: PartitionState, replicas: Sequence[int], alive: frozenset[int], *, min_isr: int
) -> PartitionState | None:
    """A leader cut off from its followers (no follower fetched for
    replica_lag_time_max_ms, the caller's test) whose ISR is below `min_isr`
    hands leadership to a live replica that holds every committed record: the
    first live member of the ELR (then of the ISR), alone in the new ISR, with a
    new leader epoch; the old leader joins the ELR (it holds every committed
    record too). None when it should keep leading:

    - the ISR meets `min_isr` (with min.insync.replicas=1, never: a lone leader
      commits alone);
    - fewer live replicas besides the leader than `min_isr`: the new leader could
      not gather an ISR of `min_isr` without the old one (a replication factor of
      2 with min.insync.replicas=2), so leading elsewhere would gain nothing;
    - no live eligible replica.

    Each hop needs a full replica_lag_time_max_ms without follower fetches on the
    new leader, so leadership moves at most once per that time; the ELR's order
    (newcomers last) makes successive hops rotate through its members."""
    leader = state.leader
    if leader == NO_LEADER or len(state.isr) >= min_isr:
        return None
    if sum(1 for r in replicas if r != leader and r in alive) < min_isr:
        return None
    eligible = [r for r in (*state.elr, *state.isr) if r != leader and r in alive and r in replicas]
    if not eligible:
        return None
    isr, elr = _isr_and_elr(state, eligible[:1], min_isr, replicas)
    return _new_leader(state, eligible[0], isr, elr)


def elect_preferred(
    state: PartitionState, replicas: Sequence[int], alive: frozenset[int]
) -> PartitionState | ErrorCode:
    """ElectLeaders(PREFERRED): the first replica leads if it is alive and in sync."""
    preferred = replicas[0]
    if state.leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED
    if preferred not in alive or preferred not in state.isr:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    return _new_leader(state, preferred, state.isr, state.elr)


def offline_replicas_to_json(replicas: Iterable[ReplicaKey]) -> bytes:
    """A broker's offline replicas as stored in etcd: topic id -> partition indexes."""
    by_topic: dict[str, list[int]] = {}
    for topic_id, index in sorted(replicas):
        by_topic.setdefault(str(topic_id), []).append(index)
    return json.dumps({"replicas": by_topic}, sort_keys=True, separators=(",", ":")).encode()


def offline_replicas_from_json(value: bytes) -> frozenset[ReplicaKey]:
    """Raises ValueError (or KeyError, TypeError) for a document that is not one."""
    if len(value) > OFFLINE_REPLICAS_DOCUMENT_BYTES_MAX:
        raise ValueError(f"document of {len(value)} bytes")
    doc = json.loads(value)
    if not isinstance(doc, dict) or not isinstance(doc["replicas"], dict):
        raise ValueError("not an offline replicas document")
    keys: set[ReplicaKey] = set()
    for topic_id, indexes in doc["replicas"].items():
        if not isinstance(indexes, list):
            raise ValueError("partition indexes are not a list")
        keys.update((uuid.UUID(topic_id), _int(index)) for index in indexes)
    return frozenset(keys)


def _new_leader(
    state: PartitionState, leader: int, isr: Sequence[int], elr: Sequence[int]
) -> PartitionState:
    assert leader in isr and leader not in elr
    return PartitionState(
        leader=leader,
        leader_epoch=state.leader_epoch + 1,
        isr=tuple(isr),
        partition_epoch=state.partition_epoch + 1,
        elr=tuple(elr),
    )


def place_replicas(
    partition_count: int,
    replication_factor: int,
    brokers: Sequence[BrokerInfo],
    first_partition: int = 0,
    replica_counts: Mapping[int, int] | None = None,
) -> list[list[int]]:
    """Replica lists for new partitions: leaders spread round-robin over the brokers
    (fewest replicas first), followers on other brokers, on other racks first when
    brokers declare racks (Kafka's rack-aware assignment in spirit)."""
    if replication_factor < 1:
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor must be at least 1, not {replication_factor}",
        )
    if replication_factor > len(brokers):
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is larger than the "
            f"{len(brokers)} available broker{'s' if len(brokers) != 1 else ''}",
        )
    counts = dict(replica_counts or {})
    ordered = sorted(brokers, key=lambda b: (counts.get(b.node_id, 0), b.node_id))
    assignments = []
    for offset in range(partition_count):
        start = (first_partition + offset) % len(ordered)
        rotation = ordered[start:] + ordered[:start]
        assignments.append(_pick_replicas(rotation, replication_factor))
    return assignments


def _pick_replicas(rotation: Sequence[BrokerInfo], count: int) -> list[int]:
    picked = [rotation[0]]
    racks_used = {rotation[0].rack}
    rest = list(rotation[1:])
    while len(picked) < count:
        other_rack = next((b for b in rest if b.rack not in racks_used), None)
        chosen = other_rack if other_rack is not None else rest[0]
        rest.remove(chosen)
        picked.append(chosen)
        racks_used.add(chosen.rack)
    return [b.node_id for b in picked]


def check_assignment(replicas: Sequence[int], known_brokers: Iterable[int]) -> None:
    """An explicit replica list: distinct, non-empty, every broker registered."""
    known = set(known_brokers)
    if not replicas:
        raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "a replica list is empty")
    if len(set(replicas)) != len(replicas):
        raise ControllerError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"replica assignment {list(replicas)} names a broker twice",
        )
    unknown = [r for r in replicas if r not in known]
    if unknown:
        raise ControllerError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"replica assignment {list(replicas)} names brokers {unknown} that are not "
            f"registered (live brokers: {sorted(known)})",
        )


@dataclass(frozen=True)
class PartitionLeadership:
    """What the preferred-leader balance reads of one partition."""

    replicas: tuple[int, ...]  # assignment order: the first is the preferred leader
    state: PartitionState
    # A reassignment in progress: its leader is left where it is (the move's end
    # picks a leader among the target replicas).
    moving: bool = False


@dataclass(frozen=True)
class PreferredImbalance:
    """One broker's share of Kafka's leader imbalance: of the partitions whose
    preferred replica it is, how many another broker (or none) leads."""

    not_led: int
    preferred: int

    def exceeds(self, percentage: int) -> bool:
        """Kafka's test: not_led / preferred > percentage / 100 (exact, in integers)."""
        return self.not_led * 100 > percentage * self.preferred


PartitionKey = TypeVar("PartitionKey", bound=Hashable)


def preferred_imbalance(partitions: Iterable[PartitionLeadership]) -> dict[int, PreferredImbalance]:
    """Per broker that is some partition's preferred replica, its imbalance."""
    not_led: dict[int, int] = {}
    preferred: dict[int, int] = {}
    for partition in partitions:
        if not partition.replicas:
            continue
        broker = partition.replicas[0]
        preferred[broker] = preferred.get(broker, 0) + 1
        not_led[broker] = not_led.get(broker, 0) + (partition.state.leader != broker)
    return {b: PreferredImbalance(not_led[b], count) for b, count in preferred.items()}


def preferred_leader_rebalance(
    partitions: Mapping[PartitionKey, PartitionLeadership],
    alive: frozenset[int],
    imbalance_percentage: int,
) -> list[tuple[PartitionKey, PartitionState]]:
    """Kafka's automatic leader rebalance (auto.leader.rebalance.enable): the
    preferred-leader elections to make, in the mapping's order.

    A broker is imbalanced when more than `imbalance_percentage` percent of the
    partitions whose preferred replica it is are led by another broker. Each of
    those partitions hands leadership back to it where `elect_preferred` would:
    the preferred replica is alive and in the ISR (a replica that just came back
    catches up and rejoins the ISR first). Partitions being reassigned count in
    the ratio but do not move. Balanced brokers' partitions stay where they are."""
    imbalanced = {
        broker
        for broker, imbalance in preferred_imbalance(partitions.values()).items()
        if imbalance.exceeds(imbalance_percentage)
    }
    elections = []
    for key, partition in partitions.items():
        if partition.moving or not partition.replicas or partition.replicas[0] not in imbalanced:
            continue
        outcome = elect_preferred(partition.state, partition.replicas, alive)
        if isinstance(outcome, PartitionState):
            elections.append((key, outcome))
    return elections
