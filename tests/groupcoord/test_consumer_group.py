"""The KIP-848 consumer group state machine, driven by simulated clients and a fake clock."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest

from weir.format.errors import ErrorCode
from weir.groupcoord import consumer_group_records as rec
from weir.groupcoord.consumer_coordinator import ConsumerGroupCoordinator
from weir.groupcoord.consumer_group import GroupState, MemberState, TopicInfo
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


def test_single_member_gets_everything_and_group_is_stable() -> None:
    world = World()
    a = Client(world, "a", ["t1", "t2"])
    result = a.heartbeat()
    assert result.error_code == ErrorCode.NONE
    assert result.member_id == "a"
    assert result.member_epoch == 1
    assert result.heartbeat_interval_ms == 5_000
    assert a.partitions() == all_partitions(world, ["t1", "t2"])
    assert world.coordinator.group_state(GROUP) == GroupState.STABLE
    # Steady heartbeats carry no assignment.
    assert a.heartbeat().assignment is None


def test_two_members_converge_without_sharing_a_partition() -> None:
    world = World()
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    assert len(a.partitions()) == 6
    b.heartbeat()
    # b joined at epoch 2 but a still owns everything: b gets nothing yet.
    assert b.epoch == 2
    assert b.partitions() == set()
    no_partition_twice([a, b])
    # a is asked to revoke three partitions, keeping epoch 1 until it has.
    a.heartbeat()
    assert a.epoch == 1 and len(a.partitions()) == 3
    no_partition_twice([a, b])
    converge(world, [a, b])
    assert len(a.partitions()) == len(b.partitions()) == 3
    assert a.partitions() | b.partitions() == all_partitions(world, ["t1"])
    assert a.epoch == b.epoch == 2
    assert world.coordinator.group_state(GROUP) == GroupState.STABLE


def test_three_members_converge_and_a_leaver_frees_partitions() -> None:
    world = World()
    clients = [Client(world, m, ["t1", "t2"]) for m in ("a", "b", "c")]
    for c in clients:
        c.heartbeat()
        no_partition_twice(clients)
    converge(world, clients)
    assert sorted(len(c.partitions()) for c in clients) == [3, 3, 4]
    union = set().union(*(c.partitions() for c in clients))
    assert union == all_partitions(world, ["t1", "t2"])
    before = {c.member_id: c.partitions() for c in clients}

    a, b, c = clients
    result = world.coordinator.heartbeat(GROUP, "a", -1, now_ms=world.now_ms, topics=world.topics)
    assert result.error_code == ErrorCode.NONE and result.member_epoch == -1
    a.owned = {}
    converge(world, [b, c])
    assert len(b.partitions()) == len(c.partitions()) == 5
    assert b.partitions() | c.partitions() == all_partitions(world, ["t1", "t2"])
    # Sticky: the stayers kept what they had.
    assert before["b"] <= b.partitions() and before["c"] <= c.partitions()
    # The leaver is gone: its heartbeats are unknown.
    assert a.heartbeat().error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_member_that_stops_heartbeating_is_fenced_after_session_timeout() -> None:
    world = World()
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    assert world.coordinator.next_deadline_ms() is not None
    # b keeps heartbeating; a goes silent.
    for _ in range(8):
        world.tick(5_000)
        assert b.heartbeat().error_code == ErrorCode.NONE
    assert "a" in world.coordinator.groups[GROUP].members
    world.tick(5_000)
    assert "a" not in world.coordinator.groups[GROUP].members
    converge(world, [b])
    assert b.partitions() == all_partitions(world, ["t1"])
    result = a.heartbeat()
    assert result.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_member_that_does_not_revoke_in_time_is_fenced() -> None:
    world = World()
    a = Client(world, "a", ["t1"], stuck=True)
    a.heartbeat()
    b = Client(world, "b", ["t1"])
    b.heartbeat()
    a.heartbeat()
    member = world.coordinator.groups[GROUP].members["a"]
    assert member.state == MemberState.UNREVOKED_PARTITIONS
    # Revocation pending but a keeps reporting all six partitions.
    for _ in range(5):
        world.tick(5_000)
        a.heartbeat()
        b.heartbeat()
        assert b.partitions() == set()
        no_partition_twice([a, b])
    world.tick(REBALANCE_TIMEOUT_MS)
    assert "a" not in world.coordinator.groups[GROUP].members
    converge(world, [b])
    assert b.partitions() == all_partitions(world, ["t1"])
    assert a.heartbeat().error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_partition_count_increase_bumps_group_epoch_and_assigns_new_partitions() -> None:
    world = World()
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    epoch = world.coordinator.groups[GROUP].group_epoch
    world.topics["t1"] = TopicInfo(T1, 8)
    converge(world, [a, b])
    assert world.coordinator.groups[GROUP].group_epoch == epoch + 1
    assert len(a.partitions()) == len(b.partitions()) == 4
    assert a.epoch == b.epoch == epoch + 1


def test_subscribing_to_a_topic_created_later() -> None:
    world = World()
    a = Client(world, "a", ["t1", "t3"])
    a.heartbeat()
    assert a.partitions() == all_partitions(world, ["t1"])
    world.topics["t3"] = TopicInfo(uuid.UUID(int=3), 2)
    converge(world, [a])
    assert a.partitions() == all_partitions(world, ["t1", "t3"])


def test_subscription_change_moves_partitions() -> None:
    world = World()
    a, b = Client(world, "a", ["t1", "t2"]), Client(world, "b", ["t1", "t2"])
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    b.heartbeat(subscribed_topic_names=["t2"])
    converge(world, [a, b])
    assert all(t == T2 for t, _ in b.partitions())
    assert a.partitions() | b.partitions() == all_partitions(world, ["t1", "t2"])


def test_static_member_rejoins_with_new_member_id_and_keeps_its_partitions() -> None:
    world = World()
    a = Client(world, "a", ["t1"], instance_id="i-a")
    b = Client(world, "b", ["t1"], instance_id="i-b")
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    mine = a.partitions()
    group_epoch = world.coordinator.groups[GROUP].group_epoch
    result = world.coordinator.heartbeat(
        GROUP, "a", -2, now_ms=world.now_ms, topics=world.topics, instance_id="i-a"
    )
    assert result.error_code == ErrorCode.NONE and result.member_epoch == -2
    # While away, the instance keeps its partitions; nobody else gets them.
    converge(world, [b])
    assert not (b.partitions() & mine)
    # The restarted process comes back under a new member id.
    a2 = Client(world, "a2", ["t1"], instance_id="i-a")
    result = a2.heartbeat()
    assert result.error_code == ErrorCode.NONE
    assert a2.partitions() == mine
    assert world.coordinator.groups[GROUP].group_epoch == group_epoch
    assert "a" not in world.coordinator.groups[GROUP].members


def test_static_instance_in_use_is_unreleased() -> None:
    world = World()
    a = Client(world, "a", ["t1"], instance_id="i-a")
    a.heartbeat()
    imposter = Client(world, "x", ["t1"], instance_id="i-a")
    assert imposter.heartbeat().error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    # A static member's session expiring frees the instance id.
    world.tick(45_000)
    assert imposter.heartbeat().error_code == ErrorCode.NONE


def test_static_member_fenced_by_a_replacement() -> None:
    world = World()
    a = Client(world, "a", ["t1"], instance_id="i-a")
    a.heartbeat()
    world.coordinator.heartbeat(
        GROUP, "a", -2, now_ms=world.now_ms, topics=world.topics, instance_id="i-a"
    )
    Client(world, "a2", ["t1"], instance_id="i-a").heartbeat()
    result = world.coordinator.heartbeat(
        GROUP, "a", -1, now_ms=world.now_ms, topics=world.topics, instance_id="i-a"
    )
    assert result.error_code == ErrorCode.FENCED_INSTANCE_ID


def test_epoch_fencing() -> None:
    world = World()
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    assert a.epoch == 2
    hb = world.coordinator.heartbeat
    ahead = hb(GROUP, "a", 3, now_ms=world.now_ms, topics=world.topics, topic_partitions=[])
    assert ahead.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    # The previous epoch is accepted when the owned partitions are a subset (lost response)...
    owned = a.owned_list()
    ok = hb(GROUP, "a", 1, now_ms=world.now_ms, topics=world.topics, topic_partitions=owned)
    assert ok.error_code == ErrorCode.NONE and ok.member_epoch == 2
    # ...but not when the member claims partitions it does not have.
    others = b.owned_list()
    bad = hb(GROUP, "a", 1, now_ms=world.now_ms, topics=world.topics, topic_partitions=others)
    assert bad.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    rejoin = hb(GROUP, "a", 0, now_ms=world.now_ms, topics=world.topics)
    assert rejoin.error_code == ErrorCode.INVALID_REQUEST  # a join must carry its subscription
    unknown = hb(GROUP, "zzz", 2, now_ms=world.now_ms, topics=world.topics)
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    no_group = hb("nope", "a", 2, now_ms=world.now_ms, topics=world.topics)
    assert no_group.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_fenced_member_may_rejoin_with_epoch_zero() -> None:
    world = World()
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    a.epoch, a.owned = 0, {}
    result = a.heartbeat()
    assert result.error_code == ErrorCode.NONE and result.member_epoch == 2
    assert len(a.partitions()) == 3
    no_partition_twice([a, b])


def test_errors_change_nothing() -> None:
    world = World()
    a = Client(world, "a", ["t1"])
    a.heartbeat()
    n = len(world.records)
    epoch = world.coordinator.groups[GROUP].group_epoch
    result = Client(world, "b", ["t1"], assignor="sticky").heartbeat()
    assert result.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert result.records == [] and len(world.records) == n
    assert world.coordinator.groups[GROUP].group_epoch == epoch
    assert set(world.coordinator.groups[GROUP].members) == {"a"}


@pytest.mark.parametrize(
    ("member_id", "epoch", "kwargs", "api_version"),
    [
        ("", 0, {}, 1),  # v1: the client names itself
        ("m", 0, {"rebalance_timeout_ms": -1}, 1),
        ("m", 0, {"topic_partitions": None}, 1),
        ("m", 0, {"topic_partitions": [(T1, [0])]}, 1),
        ("m", 0, {"subscribed_topic_names": None}, 1),
        ("m", -2, {}, 1),  # static leave without instance id
        ("m", -3, {}, 1),
        ("m", 0, {"instance_id": ""}, 1),
        ("", 5, {}, 0),
    ],
)
def test_invalid_requests(
    member_id: str, epoch: int, kwargs: dict[str, object], api_version: int
) -> None:
    world = World()
    args: dict[str, object] = {
        "now_ms": world.now_ms,
        "topics": world.topics,
        "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": ["t1"],
        "topic_partitions": [],
        "api_version": api_version,
    }
    args.update(kwargs)
    result = world.coordinator.heartbeat(GROUP, member_id, epoch, **args)  # type: ignore[arg-type]
    assert result.error_code == ErrorCode.INVALID_REQUEST


def test_v0_join_gets_a_member_id_from_the_coordinator() -> None:
    world = World()
    result = world.coordinator.heartbeat(
        GROUP,
        "",
        0,
        now_ms=world.now_ms,
        topics=world.topics,
        rebalance_timeout_ms=1000,
        subscribed_topic_names=["t1"],
        topic_partitions=[],
        api_version=0,
    )
    assert result.error_code == ErrorCode.NONE
    assert result.member_id and uuid.UUID(result.member_id)


def test_group_max_size() -> None:
    world = World(group_max_size=2)
    Client(world, "a", ["t1"]).heartbeat()
    Client(world, "b", ["t1"]).heartbeat()
    assert Client(world, "c", ["t1"]).heartbeat().error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_range_assignor_is_chosen_by_members() -> None:
    world = World()
    a = Client(world, "a", ["t1", "t2"], assignor="range")
    b = Client(world, "b", ["t1", "t2"], assignor="range")
    a.heartbeat()
    b.heartbeat()
    converge(world, [a, b])
    assert a.partitions() == {(T1, 0), (T1, 1), (T1, 2), (T2, 0), (T2, 1)}
    assert b.partitions() == {(T1, 3), (T1, 4), (T1, 5), (T2, 2), (T2, 3)}
    [described] = world.coordinator.describe([GROUP], lambda t: {T1: "t1", T2: "t2"}.get(t))
    assert described["assignor_name"] == "range"


def test_offset_commit_validation() -> None:
    world = World()
    a = Client(world, "a", ["t1"])
    a.heartbeat()
    validate = world.coordinator.validate_offset_commit
    assert validate(GROUP, "a", 1) == ErrorCode.NONE
    assert validate(GROUP, "a", 0) == ErrorCode.STALE_MEMBER_EPOCH
    assert validate(GROUP, "b", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert validate(GROUP, "", -1) == ErrorCode.UNKNOWN_MEMBER_ID  # group not empty
    assert validate("other", "", -1) == ErrorCode.NONE
    fetch = world.coordinator.validate_offset_fetch
    assert fetch(GROUP, None, -1) == ErrorCode.NONE
    assert fetch(GROUP, "a", 1) == ErrorCode.NONE
    assert fetch(GROUP, "a", 7) == ErrorCode.STALE_MEMBER_EPOCH


def test_describe_reports_states_epochs_and_assignments() -> None:
    world = World()
    names = {T1: "t1", T2: "t2"}.get
    a, b = Client(world, "a", ["t1"]), Client(world, "b", ["t1"])
    a.heartbeat()
    b.heartbeat()
    [g] = world.coordinator.describe([GROUP], names)
    assert g["group_state"] == "Reconciling"
    assert (g["group_epoch"], g["assignment_epoch"]) == (2, 2)
    converge(world, [a, b])
    [g, missing] = world.coordinator.describe([GROUP, "nope"], names)
    assert g["error_code"] == 0 and g["group_state"] == "Stable"
    assert g["assignor_name"] == "uniform"
    assert [m["member_id"] for m in g["members"]] == ["a", "b"]
    member = g["members"][0]
    assert member["assignment"] == member["target_assignment"]
    assert member["assignment"]["topic_partitions"][0]["topic_name"] == "t1"
    assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert missing["group_state"] == "Dead"
    world.coordinator.heartbeat(GROUP, "a", -1, now_ms=world.now_ms, topics=world.topics)
    [g] = world.coordinator.describe([GROUP], names)
    assert g["group_state"] == "Assigning"
    world.coordinator.heartbeat(GROUP, "b", -1, now_ms=world.now_ms, topics=world.topics)
    [g] = world.coordinator.describe([GROUP], names)
    assert g["group_state"] == "Empty"


def test_heartbeat_response_dict_has_wire_field_names() -> None:
    world = World()
    response = Client(world, "a", ["t2"]).heartbeat().response()
    assert response["error_code"] == 0 and response["member_epoch"] == 1
    assert response["assignment"] == {
        "topic_partitions": [{"topic_id": T2, "partitions": [0, 1, 2, 3]}]
    }


def test_records_use_kafka_key_types_and_round_trip() -> None:
    world = World()
    a = Client(world, "a", ["t1"], instance_id="i")
    a.heartbeat()
    types = [rec.decode_key(k) for k, _ in world.records]
    assert (rec.MEMBER_METADATA, (GROUP, "a")) in types
    assert (rec.GROUP_METADATA, (GROUP,)) in types
    assert (rec.TARGET_ASSIGNMENT_METADATA, (GROUP,)) in types
    by_key = {rec.decode_key(k): v for k, v in world.records}
    value = by_key[(rec.CURRENT_MEMBER_ASSIGNMENT, (GROUP, "a"))]
    assert value is not None
    current = rec.decode_current_assignment(value)
    assert current.member_epoch == 1 and current.state == MemberState.STABLE
    assert current.assigned == {T1: frozenset(range(6))}
    meta_value = by_key[(rec.MEMBER_METADATA, (GROUP, "a"))]
    assert meta_value is not None
    meta = rec.decode_member_metadata(meta_value)
    assert meta.instance_id == "i" and meta.subscribed_topic_names == ("t1",)
    assert meta.rebalance_timeout_ms == REBALANCE_TIMEOUT_MS
    epoch_value = by_key[(rec.GROUP_METADATA, (GROUP,))]
    assert epoch_value is not None and rec.decode_epoch(epoch_value) == 1
    partitions_value = by_key[(rec.PARTITION_METADATA, (GROUP,))]
    assert partitions_value is not None
    assert rec.decode_partition_metadata(partitions_value) == {"t1": (T1, 6)}
    # Leaving writes tombstones for the member's three records.
    left = world.coordinator.heartbeat(GROUP, "a", -1, now_ms=world.now_ms, topics=world.topics)
    tombstones = {rec.decode_key(k) for k, v in left.records if v is None}
    assert {
        (rec.MEMBER_METADATA, (GROUP, "a")),
        (rec.TARGET_ASSIGNMENT_MEMBER, (GROUP, "a")),
        (rec.CURRENT_MEMBER_ASSIGNMENT, (GROUP, "a")),
    } <= tombstones


def test_group_epoch_value_bytes_match_kafka_layout() -> None:
    key, value = rec.group_epoch_record("g", 5)
    assert key == b"\x00\x03\x00\x01g"
    assert value == b"\x00\x00\x00\x00\x00\x05\x00"


def snapshot(coordinator: ConsumerGroupCoordinator) -> dict[str, object]:
    """What must survive a restart: epochs, members, targets, current assignments."""
    return {
        gid: (
            g.group_epoch,
            g.assignment_epoch,
            g.subscription_metadata,
            g.static_members,
            g.target,
            g.owners,
            g.assignor_name,
            {
                mid: (
                    m.instance_id,
                    m.subscribed_topic_names,
                    m.server_assignor,
                    m.rebalance_timeout_ms,
                    m.member_epoch,
                    m.previous_member_epoch,
                    m.state,
                    m.assigned,
                    m.pending_revocation,
                )
                for mid, m in g.members.items()
            },
        )
        for gid, g in coordinator.groups.items()
    }


def compacted(records: list[rec.GroupRecord]) -> list[rec.GroupRecord]:
    """What log compaction leaves: the last record per key, in offset order."""
    last = {key: index for index, (key, _) in enumerate(records)}
    return [r for index, r in enumerate(records) if last[r[0]] == index]


@pytest.mark.parametrize("compact", [False, True])
def test_replaying_the_records_rebuilds_the_groups(compact: bool) -> None:
    world = World()
    a = Client(world, "a", ["t1", "t2"], instance_id="i-a")
    b = Client(world, "b", ["t1"], assignor="range", stuck=True)
    c = Client(world, "c", ["t2"])
    for client in (a, b, c):
        client.heartbeat()
    converge(world, [a, c], rounds=2)
    world.coordinator.heartbeat(
        GROUP, "a", -2, now_ms=world.now_ms, topics=world.topics, instance_id="i-a"
    )
    world.records += Client(world, "a2", ["t1", "t2"], instance_id="i-a").heartbeat().records
    world.topics["t2"] = TopicInfo(T2, 5)
    converge(world, [c], rounds=2)
    Client(world, "d", ["t1"]).heartbeat()
    world.records += world.coordinator.heartbeat(
        GROUP, "d", -1, now_ms=world.now_ms, topics=world.topics
    ).records
    # A second, emptied and deleted group leaves nothing behind.
    other = world.coordinator.heartbeat(
        "gone",
        "x",
        0,
        now_ms=world.now_ms,
        topics=world.topics,
        rebalance_timeout_ms=1,
        subscribed_topic_names=["t1"],
        topic_partitions=[],
    )
    world.records += other.records
    world.records += world.coordinator.heartbeat(
        "gone", "x", -1, now_ms=world.now_ms, topics=world.topics
    ).records
    code, deleted = world.coordinator.delete_group("gone")
    assert code == ErrorCode.NONE
    world.records += deleted

    loaded = ConsumerGroupCoordinator()
    records = compacted(world.records) if compact else world.records
    for key, value in records:
        assert loaded.replay(key, value)
    loaded.finish_loading(world.now_ms)
    assert snapshot(loaded) == snapshot(world.coordinator)
    assert "gone" not in loaded.groups
    # Loaded members carry on where they were.
    world.coordinator = loaded
    assert c.heartbeat().error_code == ErrorCode.NONE


def test_loading_another_partitions_groups_keeps_the_loaded_members_timers() -> None:
    """A coordinator that gains offsets partitions one by one (failovers) must not
    restart the session timers of the groups it already serves: a member killed
    without leaving is fenced one session timeout after its group was loaded."""
    world = World()
    Client(world, "dead", ["t1"]).heartbeat()
    session_timeout_ms = GroupSettings().consumer_session_timeout_ms
    loaded = ConsumerGroupCoordinator()
    for key, value in world.records:
        loaded.replay(key, value)
    loaded_at_ms = world.now_ms
    loaded.finish_loading(loaded_at_ms)
    elsewhere = World()  # a group of another offsets partition, loaded later
    joined = elsewhere.coordinator.heartbeat(
        "other-group",
        "m",
        0,
        now_ms=elsewhere.now_ms,
        topics=elsewhere.topics,
        rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
        subscribed_topic_names=["t1"],
        topic_partitions=[],
    )
    for key, value in joined.records:
        loaded.replay(key, value)
    loaded.finish_loading(loaded_at_ms + session_timeout_ms // 2)  # a later partition
    loaded.advance(loaded_at_ms + session_timeout_ms)
    assert "dead" not in loaded.groups[GROUP].members


def test_replay_ignores_other_record_types() -> None:
    # An OffsetCommitKey (version 1) is not a consumer-group record.
    assert not ConsumerGroupCoordinator().replay(b"\x00\x01\x00\x01g", b"")


def test_delete_group_refuses_a_group_with_members() -> None:
    world = World()
    Client(world, "a", ["t1"]).heartbeat()
    assert world.coordinator.delete_group(GROUP) == (ErrorCode.NON_EMPTY_GROUP, [])
    assert world.coordinator.delete_group("nope") == (ErrorCode.GROUP_ID_NOT_FOUND, [])


def live(world: World, clients: Iterable[Client]) -> list[Client]:
    """Clients the coordinator still counts as members.

    A member the coordinator fenced is a zombie until its next heartbeat tells it so
    (its offset commits are refused from then on); exclusivity holds among live members.
    """
    group = world.coordinator.groups.get(GROUP)
    return [c for c in clients if group is not None and c.member_id in group.members]


@pytest.mark.parametrize("seed", range(8))
def test_random_churn_never_gives_a_partition_to_two_members(seed: int) -> None:
    import random

    rng = random.Random(seed)
    world = World()
    clients: dict[str, Client] = {}
    for step in range(300):
        action = rng.random()
        if action < 0.08 and len(clients) < 6:
            name = f"m{step}"
            clients[name] = Client(world, name, rng.choice([["t1"], ["t1", "t2"], ["t2"]]))
        elif action < 0.12 and clients:
            name = rng.choice(sorted(clients))
            world.coordinator.heartbeat(GROUP, name, -1, now_ms=world.now_ms, topics=world.topics)
            del clients[name]
        elif action < 0.14:
            name = rng.choice(["t1", "t2"])
            info = world.topics[name]
            world.topics[name] = TopicInfo(info.topic_id, info.partition_count + 1)
        elif action < 0.16 and clients:
            # A client crashes: it stops heartbeating and its partitions are lost with it.
            del clients[rng.choice(sorted(clients))]
        elif clients:
            client = clients[rng.choice(sorted(clients))]
            client.stuck = rng.random() < 0.05
            result = client.heartbeat()
            if result.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
                client.epoch, client.owned, client.stuck = 0, {}, False
                client.heartbeat()
            else:
                assert result.error_code == ErrorCode.NONE, result
        world.tick(rng.choice([10, 500, 3_000]))
        no_partition_twice(live(world, clients.values()))
        alive = live(world, clients.values())
        for zombie in (c for c in clients.values() if c not in alive):
            refused = world.coordinator.validate_offset_commit(
                GROUP, zombie.member_id, zombie.epoch
            )
            assert refused == ErrorCode.UNKNOWN_MEMBER_ID
    # Let everyone settle: all subscribed partitions are owned, once.
    for client in clients.values():
        client.stuck = False
    # (long enough for crashed members' sessions to expire)
    for _ in range(60):
        for client in list(clients.values()):
            result = client.heartbeat()
            if result.error_code != ErrorCode.NONE:
                client.epoch, client.owned = 0, {}
                client.heartbeat()
            no_partition_twice(live(world, clients.values()))
        world.tick(1_000)
    if clients:
        subscribed = {n for c in clients.values() for n in c.topics}
        owned = set().union(*(c.partitions() for c in clients.values()))
        assert owned == all_partitions(world, subscribed)
        assert world.coordinator.group_state(GROUP) == GroupState.STABLE
