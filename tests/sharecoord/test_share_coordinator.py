"""The share-group coordinator: membership, epochs, errors, timers, admin and loading.

Expected answers were checked against Apache Kafka 4.4 with raw ShareGroupHeartbeat
requests (member epochs, error codes and messages, the assignment interval)."""

from __future__ import annotations

import random
import uuid

from weir.format.errors import ErrorCode
from weir.sharecoord.share_coordinator import (
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareGroupSettings,
    ShareHeartbeat,
    ShareHeartbeatAnswer,
)
from weir.sharecoord.share_group import GroupState, TopicInfo
from weir.sharecoord.share_group_records import ShareGroupRecord

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
A = "aaaaaaaa-0000-0000-0000-000000000000"
B = "bbbbbbbb-0000-0000-0000-000000000000"
C = "cccccccc-0000-0000-0000-000000000000"


class Harness:
    """A coordinator over a dict of topics, collecting every record it returns."""

    def __init__(self, **settings: int) -> None:
        self.topics: dict[str, TopicInfo] = {"t1": TopicInfo(T1, 3), "t2": TopicInfo(T2, 2)}
        self.configs: dict[str, ShareGroupConfig] = {}
        self.other_groups: dict[str, str] = {}
        self.coordinator = ShareGroupCoordinator(
            ShareGroupSettings(**settings),
            lambda name: self.topics.get(name),
            self.configs.get,
            self.other_groups.get,
        )
        self.records: list[ShareGroupRecord] = []

    def heartbeat(
        self,
        member_id: str,
        epoch: int,
        topics: tuple[str, ...] | None = None,
        now_ms: int = 0,
        group_id: str = "g",
        rack_id: str | None = None,
    ) -> ShareHeartbeatAnswer:
        request = ShareHeartbeat(group_id, member_id, epoch, rack_id, topics, "client", "/10.0.0.1")
        answer, records = self.coordinator.heartbeat(request, now_ms)
        if answer.error_code != ErrorCode.NONE:
            assert records == []
        self.records += records
        return answer

    def advance(self, now_ms: int) -> None:
        self.records += self.coordinator.advance(now_ms)


def test_the_first_member_joins_at_epoch_2_with_every_partition() -> None:
    h = Harness()
    answer = h.heartbeat(A, 0, ("t1",))
    assert (answer.error_code, answer.member_id, answer.member_epoch) == (ErrorCode.NONE, A, 2)
    assert answer.heartbeat_interval_ms == 5_000
    assert answer.assignment == {T1: (0, 1, 2)}
    assert h.coordinator.group_state("g") == GroupState.STABLE


def test_an_unchanged_assignment_is_not_sent_again() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1",))
    answer = h.heartbeat(A, 2, now_ms=5_000)
    assert (answer.member_epoch, answer.assignment) == (2, None)
    # A full request (the subscription sent) gets the assignment again.
    assert h.heartbeat(A, 2, ("t1",), now_ms=6_000).assignment == {T1: (0, 1, 2)}


def test_a_join_within_the_assignment_interval_waits_for_the_next_heartbeat() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1",), now_ms=1_000)
    early = h.heartbeat(B, 0, ("t1",), now_ms=1_100)
    # Kafka 4.4: B takes the current target's epoch and nothing yet.
    assert (early.member_epoch, early.assignment) == (2, {})
    assert h.coordinator.describe(["g"])[0]["group_epoch"] == 3
    later = h.heartbeat(B, 2, now_ms=2_000)
    assert (later.member_epoch, later.assignment) == (3, {T1: (2,)})
    again = h.heartbeat(A, 2, now_ms=2_100)
    assert (again.member_epoch, again.assignment) == (3, {T1: (0, 1)})


def test_a_member_waiting_for_the_next_target_is_told_to_come_back_when_it_is_due() -> None:
    h = Harness()
    first = h.heartbeat(A, 0, ("t1",), now_ms=1_000)
    assert first.heartbeat_interval_ms == 5_000  # nothing waits
    early = h.heartbeat(B, 0, ("t1",), now_ms=1_100)
    assert early.assignment == {}
    # The next target may be computed at 2_000: B comes back just after, not at 6_100.
    assert early.heartbeat_interval_ms == 900 + 50
    later = h.heartbeat(B, 2, now_ms=1_100 + early.heartbeat_interval_ms)
    assert later.assignment == {T1: (2,)}
    assert later.heartbeat_interval_ms == 5_000  # computed: back to the group's interval


def test_an_assignment_interval_of_0_assigns_at_once() -> None:
    h = Harness(assignment_interval_ms=0)
    h.heartbeat(A, 0, ("t1",))
    assert h.heartbeat(B, 0, ("t1",), now_ms=1).assignment == {T1: (2,)}


def test_more_members_than_partitions_all_get_work() -> None:
    h = Harness(assignment_interval_ms=0)
    h.topics["one"] = TopicInfo(uuid.UUID(int=9), 1)
    members = [str(uuid.UUID(int=100 + i)) for i in range(16)]
    for i, m in enumerate(members):
        h.heartbeat(m, 0, ("one",), now_ms=i)
    for i, m in enumerate(members):
        epoch = h.coordinator.groups["g"].members[m].member_epoch
        h.heartbeat(m, epoch, now_ms=100 + i)
    assignments = [h.coordinator.assignment_of("g", m) for m in members]
    assert all(a == {uuid.UUID(int=9): frozenset({0})} for a in assignments)


def test_the_previous_member_epoch_is_accepted_and_others_are_fenced() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1",), now_ms=0)
    h.heartbeat(B, 0, ("t1",), now_ms=2_000)
    assert h.heartbeat(A, 2, now_ms=2_001).member_epoch == 3  # moves A to epoch 3
    assert h.heartbeat(A, 2, now_ms=2_002).error_code == ErrorCode.NONE  # previous: a lost answer
    greater = h.heartbeat(A, 8, now_ms=2_003)
    assert greater.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert greater.error_message == (
        "The share group member has a greater member epoch (8) than the one known by the "
        "group coordinator (3). The member must abandon all its partitions and rejoin."
    )
    smaller = h.heartbeat(A, 1, now_ms=2_004)
    assert smaller.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert "does not match the previous member epoch (2)" in (smaller.error_message or "")


def test_epoch_0_rejoins_whatever_the_members_epoch() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1",))
    answer = h.heartbeat(A, 0, ("t1",), now_ms=10)
    assert (answer.error_code, answer.member_epoch, answer.assignment) == (
        ErrorCode.NONE,
        2,
        {T1: (0, 1, 2)},
    )


def test_unknown_groups_and_members_are_refused_as_kafka_does() -> None:
    h = Harness()
    no_group = h.heartbeat(A, 1)
    assert (no_group.error_code, no_group.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Share group g not found.",
    )
    leave = h.heartbeat(A, -1)
    assert (leave.error_code, leave.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group g not found.",
    )
    h.heartbeat(A, 0, ("t1",))
    for epoch in (1, 5, -1):
        stranger = h.heartbeat(B, epoch)
        assert (stranger.error_code, stranger.error_message) == (
            ErrorCode.UNKNOWN_MEMBER_ID,
            f"Member {B} is not a member of group g.",
        )
    assert h.coordinator.members_of("g") == {A}


def test_malformed_requests_are_invalid() -> None:
    h = Harness()
    cases = [
        ("", 0, ("t1",), None, None),
        ("x" * 37, 0, ("t1",), None, None),
        (A, 0, None, None, "SubscribedTopicNames must be set in first request."),
        (A, 0, (), None, "SubscribedTopicNames must be set in first request."),
        (A, -2, ("t1",), None, "MemberEpoch is invalid."),
        (A, 0, ("t1",), "", "RackId can't be empty."),
    ]
    for member_id, epoch, topics, rack, message in cases:
        answer = h.heartbeat(member_id, epoch, topics, rack_id=rack)
        assert (answer.error_code, answer.error_message) == (ErrorCode.INVALID_REQUEST, message)
    assert h.heartbeat(A, 0, ("t1",), group_id="").error_message == "GroupId can't be empty."
    assert not h.coordinator.has_group("g") and h.records == []
    # Any client-chosen id of at most 36 characters is a member id (Kafka accepts "abc").
    assert h.heartbeat("abc", 0, ("t1",)).error_code == ErrorCode.NONE


def test_a_group_id_of_another_group_type_is_not_a_share_group() -> None:
    h = Harness()
    h.other_groups["classic-group"] = "classic"
    answer = h.heartbeat(A, 0, ("t1",), group_id="classic-group")
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group classic-group is not a share group.",
    )
    described = h.coordinator.describe(["classic-group"])[0]
    assert described["error_message"] == "Group classic-group is not a share group."


def test_the_group_size_is_bounded() -> None:
    h = Harness(max_size=2)
    h.heartbeat(A, 0, ("t1",))
    h.heartbeat(B, 0, ("t1",))
    full = h.heartbeat(C, 0, ("t1",))
    assert (full.error_code, full.error_message) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        "The share group has reached its maximum capacity of 2 members.",
    )
    assert h.heartbeat(A, 0, ("t1",), now_ms=5).error_code == ErrorCode.NONE  # members rejoin


def test_a_topic_subscribed_before_it_exists_is_assigned_once_created() -> None:
    h = Harness()
    first = h.heartbeat(A, 0, ("later",))
    assert (first.member_epoch, first.assignment) == (2, {})
    h.topics["later"] = TopicInfo(uuid.UUID(int=7), 2)
    h.records += h.coordinator.topics_changed()
    assert h.coordinator.describe(["g"])[0]["group_epoch"] == 3
    answer = h.heartbeat(A, 2, now_ms=5_000)
    assert (answer.member_epoch, answer.assignment) == (3, {uuid.UUID(int=7): (0, 1)})


def test_a_deleted_topic_leaves_the_assignment_on_the_next_heartbeat() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1", "t2"))
    del h.topics["t2"]
    answer = h.heartbeat(A, 2, now_ms=5_000)
    assert (answer.member_epoch, answer.assignment) == (3, {T1: (0, 1, 2)})


def test_dropping_a_topic_from_the_subscription_drops_its_partitions_at_once() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1", "t2"), now_ms=1_000)
    answer = h.heartbeat(A, 2, ("t2",), now_ms=1_100)  # within the assignment interval
    # The old target, restricted to the new subscription (Kafka's assignment builder).
    assert (answer.member_epoch, answer.assignment) == (2, {T2: (0, 1)})
    later = h.heartbeat(A, 2, now_ms=2_100)  # the new target: the same partitions
    assert (later.member_epoch, later.assignment) == (3, None)


def test_leaving_removes_the_member_and_bumps_the_group_epoch() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1",))
    h.heartbeat(B, 0, ("t1",), now_ms=2_000)
    assert h.heartbeat(A, 2, now_ms=2_001).assignment == {T1: (0, 1)}
    left = h.heartbeat(B, -1, now_ms=2_002)
    assert (left.error_code, left.member_id, left.member_epoch) == (ErrorCode.NONE, B, -1)
    assert h.coordinator.members_of("g") == {A}
    assert h.coordinator.describe(["g"])[0]["group_epoch"] == 4
    assert h.heartbeat(B, -1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(A, 2, now_ms=4_000).assignment == {T1: (0, 1, 2)}


def test_the_last_member_leaving_empties_the_group_and_a_new_one_is_assigned_at_once() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1",))
    h.heartbeat(A, -1, now_ms=10)
    described = h.coordinator.describe(["g"])[0]
    assert (described["group_state"], described["group_epoch"]) == ("Empty", 3)
    assert described["assignment_epoch"] == 3
    assert h.heartbeat(B, 0, ("t1",), now_ms=20).assignment == {T1: (0, 1, 2)}


def test_a_silent_member_is_removed_after_the_session_timeout() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1",), now_ms=0)
    h.heartbeat(B, 0, ("t1",), now_ms=10_000)
    assert h.coordinator.next_deadline_ms() == 45_000
    h.heartbeat(A, 2, now_ms=30_000)
    assert h.coordinator.next_deadline_ms() == 55_000
    h.advance(54_999)
    assert h.coordinator.members_of("g") == {A, B}
    h.advance(55_000)
    assert h.coordinator.members_of("g") == {A}
    assert h.coordinator.next_deadline_ms() == 75_000


def test_a_group_config_sets_the_session_timeout_and_heartbeat_interval() -> None:
    h = Harness()
    h.configs["g"] = ShareGroupConfig(
        session_timeout_ms=50_000, heartbeat_interval_ms=7_000, assignment_interval_ms=1_000
    )
    answer = h.heartbeat(A, 0, ("t1",), now_ms=0)
    assert answer.heartbeat_interval_ms == 7_000
    assert h.coordinator.next_deadline_ms() == 50_000


def test_describe_answers_kafkas_shape() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1", "t2"), rack_id="r1")
    described = h.coordinator.describe(["g", "nope"])
    assert described[0] == {
        "error_code": 0,
        "error_message": None,
        "group_id": "g",
        "group_state": "Stable",
        "group_epoch": 2,
        "assignment_epoch": 2,
        "assignor_name": "simple",
        "members": [
            {
                "member_id": A,
                "rack_id": "r1",
                "member_epoch": 2,
                "client_id": "client",
                "client_host": "/10.0.0.1",
                "subscribed_topic_names": ["t1", "t2"],
                "assignment": {
                    "topic_partitions": [
                        {"topic_id": T1, "topic_name": "t1", "partitions": [0, 1, 2]},
                        {"topic_id": T2, "topic_name": "t2", "partitions": [0, 1]},
                    ]
                },
            }
        ],
        "authorized_operations": -(2**31),
    }
    assert described[1]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert described[1]["error_message"] == "Group nope not found."


def test_list_and_delete_groups() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1",), group_id="busy")
    h.heartbeat(B, 0, ("t1",), group_id="idle")
    h.heartbeat(B, -1, group_id="idle")
    assert h.coordinator.list_groups() == [("busy", "Stable"), ("idle", "Empty")]
    assert h.coordinator.list_groups(["empty"]) == [("idle", "Empty")]
    results, records = h.coordinator.delete_groups(["busy", "idle", "nope"])
    assert results == {
        "busy": ErrorCode.NON_EMPTY_GROUP,
        "idle": ErrorCode.NONE,
        "nope": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    assert records and all(r.group_id == "idle" and r.value is None for r in records)
    assert h.coordinator.group_state("idle") == GroupState.DEAD
    h.records += records
    reloaded = ShareGroupCoordinator(ShareGroupSettings(), h.topics)
    for key, value in h.records:
        assert reloaded.replay(key, value)
    reloaded.finish_loading(0)
    assert sorted(reloaded.groups) == ["busy"]


def snapshot(coordinator: ShareGroupCoordinator) -> dict[str, object]:
    return {
        gid: (
            g.group_epoch,
            g.metadata_hash,
            g.assignment_epoch,
            g.assignment_timestamp_ms,
            g.target,
            {
                mid: (
                    m.rack_id,
                    m.client_id,
                    m.client_host,
                    m.subscribed_topic_names,
                    m.member_epoch,
                    m.previous_member_epoch,
                    m.assigned,
                )
                for mid, m in g.members.items()
            },
            dict(g.subscribed_counts),
        )
        for gid, g in coordinator.groups.items()
    }


def test_replaying_the_records_reproduces_the_groups_after_random_churn() -> None:
    for seed in (11, 12, 13):
        rng = random.Random(seed)
        h = Harness()
        epochs: dict[tuple[str, str], int] = {}
        now_ms = 0
        for _ in range(300):
            now_ms += rng.randint(1, 3_000)
            group_id = rng.choice(["g1", "g2"])
            member_id = f"m{rng.randint(0, 6)}"
            known = (group_id, member_id) in epochs
            roll = rng.random()
            if not known or roll < 0.1:
                topics = tuple(rng.sample(["t1", "t2", "t3"], rng.randint(1, 2)))
                answer = h.heartbeat(member_id, 0, topics, now_ms, group_id)
            elif roll < 0.2:
                answer = h.heartbeat(member_id, -1, now_ms=now_ms, group_id=group_id)
                epochs.pop((group_id, member_id))
                continue
            elif roll < 0.25:
                h.topics["t3"] = TopicInfo(uuid.UUID(int=3), rng.randint(1, 4))
                h.records += h.coordinator.topics_changed()
                continue
            else:
                epoch = epochs[(group_id, member_id)]
                answer = h.heartbeat(member_id, epoch, now_ms=now_ms, group_id=group_id)
            h.advance(now_ms)
            if answer.error_code == ErrorCode.NONE:
                epochs[(group_id, member_id)] = answer.member_epoch
            for gid, mid in list(epochs):
                if mid not in h.coordinator.members_of(gid):
                    del epochs[(gid, mid)]
        reloaded = ShareGroupCoordinator(ShareGroupSettings(), dict(h.topics))
        for key, value in h.records:
            assert reloaded.replay(key, value)
        reloaded.finish_loading(now_ms)
        assert snapshot(reloaded) == snapshot(h.coordinator)
        assert reloaded.next_deadline_ms() == now_ms + 45_000 or not any(
            g.members for g in reloaded.groups.values()
        )


def test_a_loaded_member_carries_on_with_its_epoch() -> None:
    h = Harness()
    h.heartbeat(A, 0, ("t1",))
    reloaded = ShareGroupCoordinator(ShareGroupSettings(), h.topics)
    for key, value in h.records:
        reloaded.replay(key, value)
    reloaded.finish_loading(1_000)
    request = ShareHeartbeat("g", A, 2, client_id="client", client_host="/10.0.0.1")
    answer, records = reloaded.heartbeat(request, 2_000)
    assert (answer.error_code, answer.member_epoch, answer.assignment, records) == (
        ErrorCode.NONE,
        2,
        None,
        [],
    )
    assert reloaded.assignment_of("g", A) == {T1: frozenset({0, 1, 2})}
    reloaded.unload(["g"])
    assert reloaded.next_deadline_ms() is None and not reloaded.has_group("g")
