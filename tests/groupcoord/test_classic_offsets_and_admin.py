"""Committed offsets (commit, fetch, delete, expiry) and ListGroups/DescribeGroups/DeleteGroups."""

from __future__ import annotations

from collections.abc import Sequence

from weir.format.errors import ErrorCode
from weir.groupcoord import classic_records as rec
from weir.groupcoord.classic_coordinator import ClassicGroupCoordinator
from weir.groupcoord.classic_group import GroupState
from weir.groupcoord.classic_messages import (
    LeavingMember,
    OffsetCommitRequest,
    OffsetToCommit,
    PartitionError,
)
from weir.groupcoord.committed_offsets import (
    CommittedOffset,
    GroupRecord,
    OffsetStore,
    decode_offset_key,
    encode_offset_key,
)
from weir.groupcoord.settings import GroupSettings

from .classic_harness import GROUP, INITIAL_DELAY_MS, SESSION_TIMEOUT_MS, Harness

DAY_MS = 24 * 60 * 60 * 1000
RETENTION_MS = 7 * DAY_MS


def tombstone(group_id: str, topic: str, partition: int) -> GroupRecord:
    return encode_offset_key(group_id, topic, partition), None


def errors(results: Sequence[PartitionError]) -> list[ErrorCode]:
    return [r.error for r in results]


def offsets_of(h: Harness, group_id: str = GROUP) -> dict[tuple[str, int], int]:
    fetched = h.coord.fetch_offsets(group_id, None).partitions
    return {(p.topic, p.partition): p.offset for p in fetched}


def test_standalone_commit_creates_an_empty_group_and_fetch_returns_it() -> None:
    h = Harness()
    assert errors(h.commit([("t", 0, 10), ("t", 1, 20)])) == [ErrorCode.NONE] * 2
    assert h.coord.group_state(GROUP) is GroupState.EMPTY
    assert offsets_of(h) == {("t", 0): 10, ("t", 1): 20}
    fetched = h.coord.fetch_offsets(GROUP, [("t", 1), ("t", 9)]).partitions
    assert [(p.offset, p.metadata, p.leader_epoch) for p in fetched] == [(20, "", -1), (-1, "", -1)]
    assert len(h.log) == 2
    assert decode_offset_key(h.log[0][0]) == (GROUP, "t", 0)


def test_fetch_from_unknown_group_returns_no_offsets() -> None:
    h = Harness()
    result = h.coord.fetch_offsets("nope", [("t", 0)])
    assert result.error is ErrorCode.NONE
    assert [p.offset for p in result.partitions] == [-1]
    assert h.coord.fetch_offsets("nope", None).partitions == []


def test_commit_with_a_generation_to_a_missing_group_is_illegal_generation() -> None:
    h = Harness()
    assert errors(h.commit([("t", 0, 1)], generation_id=3, member_id="m")) == [
        ErrorCode.ILLEGAL_GENERATION
    ]
    assert not h.coord.has_group(GROUP)


def test_member_commit_with_current_generation_succeeds_and_refreshes_its_session() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    h.tick(SESSION_TIMEOUT_MS - 1)
    result = h.commit([("t", 0, 7)], generation_id=a.generation_id, member_id=a.member_id)
    assert errors(result) == [ErrorCode.NONE]
    h.tick(SESSION_TIMEOUT_MS - 1)
    assert h.coord.group_state(GROUP) is GroupState.STABLE


def test_commit_with_stale_generation_or_unknown_member_is_rejected() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    stale = h.commit([("t", 0, 1)], generation_id=a.generation_id - 1, member_id=a.member_id)
    ghost = h.commit([("t", 0, 1)], generation_id=a.generation_id, member_id="ghost")
    assert errors(stale) == [ErrorCode.ILLEGAL_GENERATION]
    assert errors(ghost) == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert offsets_of(h) == {}


def test_standalone_commit_to_a_group_with_members_is_unknown_member_id() -> None:
    h = Harness()
    h.stable_group({"client_id": "a"})
    assert errors(h.commit([("t", 0, 1)])) == [ErrorCode.UNKNOWN_MEMBER_ID]


def test_commit_while_completing_rebalance_is_rebalance_in_progress() -> None:
    h = Harness()
    a = h.join_new(client_id="a")
    h.tick(INITIAL_DELAY_MS)
    result = h.commit([("t", 0, 1)], generation_id=1, member_id=a.result.member_id)
    assert errors(result) == [ErrorCode.REBALANCE_IN_PROGRESS]


def test_commit_with_oversized_metadata_is_offset_metadata_too_large() -> None:
    h = Harness(config=GroupSettings(offset_metadata_max_bytes=4))
    assert errors(h.commit([("t", 0, 1)], metadata="12345")) == [
        ErrorCode.OFFSET_METADATA_TOO_LARGE
    ]
    assert errors(h.commit([("t", 0, 1)], metadata="1234")) == [ErrorCode.NONE]


def test_offset_delete_refuses_topics_the_group_is_consuming() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a", "topics": ["t"]})
    h.commit([("t", 0, 1), ("u", 0, 2)], generation_id=1, member_id=a.member_id)
    reply = h.coord.delete_offsets(GROUP, [("t", 0), ("u", 0)], h.now_ms)
    result = reply.pending.result
    assert result.error is ErrorCode.NONE
    assert errors(list(result.partitions)) == [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.NONE]
    assert offsets_of(h) == {("t", 0): 1}
    assert reply.records == [tombstone(GROUP, "u", 0)]


def test_offset_delete_on_an_empty_group_deletes_any_topic() -> None:
    h = Harness()
    h.commit([("t", 0, 1)])
    reply = h.coord.delete_offsets(GROUP, [("t", 0)], h.now_ms)
    assert errors(list(reply.pending.result.partitions)) == [ErrorCode.NONE]
    assert offsets_of(h) == {}


def test_offset_delete_on_unknown_group_is_group_id_not_found() -> None:
    h = Harness()
    reply = h.coord.delete_offsets("nope", [("t", 0)], h.now_ms)
    assert reply.pending.result.error is ErrorCode.GROUP_ID_NOT_FOUND


def test_offset_delete_on_active_non_consumer_group_is_non_empty_group() -> None:
    h = Harness()
    h.stable_group({"client_id": "a", "protocol_type": "connect"})
    reply = h.coord.delete_offsets(GROUP, [("t", 0)], h.now_ms)
    assert reply.pending.result.error is ErrorCode.NON_EMPTY_GROUP


def test_offsets_of_empty_group_expire_after_retention_counted_from_when_it_emptied() -> None:
    config = GroupSettings(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=1_000)
    h = Harness(config=config)
    (a,) = h.stable_group({"client_id": "a", "topics": ["t"]})
    h.commit([("t", 0, 5)], generation_id=1, member_id=a.member_id)
    for _ in range(60):  # 300 s of membership: longer than the retention
        h.tick(5_000)
        h.heartbeat(a.member_id, 1)
    assert offsets_of(h) == {("t", 0): 5}
    h.leave(LeavingMember(a.member_id))
    assert h.coord.group_state(GROUP) is GroupState.EMPTY
    h.tick(99_000)
    assert offsets_of(h) == {("t", 0): 5}  # counted from when it emptied
    h.tick(2_000)
    assert offsets_of(h) == {}
    assert not h.coord.has_group(GROUP)
    assert tombstone(GROUP, "t", 0) in h.log
    assert h.log[-1] == rec.group_metadata_tombstone(GROUP)


def test_default_offsets_retention_is_seven_days() -> None:
    h = Harness()
    h.commit([("t", 0, 5)])
    h.tick(RETENTION_MS - 600_000)
    assert offsets_of(h) == {("t", 0): 5}
    h.tick(600_000)
    assert offsets_of(h) == {}


def test_offsets_are_kept_while_the_group_has_members_that_heartbeat() -> None:
    h = Harness(config=GroupSettings(offsets_retention_ms=60_000))
    (a,) = h.stable_group({"client_id": "a", "topics": ["t"]})
    h.commit([("t", 0, 5), ("gone", 0, 1)], generation_id=1, member_id=a.member_id)
    for _ in range(200):  # 1000 s
        h.tick(5_000)
        h.heartbeat(a.member_id, 1)
    # Subscribed topic kept; the unsubscribed one expired from its commit time.
    assert offsets_of(h) == {("t", 0): 5}


def test_standalone_offsets_expire_from_their_commit_time() -> None:
    h = Harness(config=GroupSettings(offsets_retention_ms=60_000))
    h.commit([("t", 0, 1)])
    h.tick(30_000)
    h.commit([("t", 1, 1)])
    h.tick(30_000 + 600_000)
    assert offsets_of(h) == {}
    assert not h.coord.has_group(GROUP)
    assert rec.group_metadata_tombstone(GROUP) not in h.log  # it never had metadata


def test_list_groups_filters_by_state() -> None:
    h = Harness()
    h.stable_group({"client_id": "a"})
    h.commit([("t", 0, 1)], group_id="simple")
    all_groups = {(g.group_id, g.state, g.protocol_type) for g in h.coord.list_groups()}
    assert all_groups == {(GROUP, "Stable", "consumer"), ("simple", "Empty", "")}
    assert [g.group_id for g in h.coord.list_groups(["empty"])] == ["simple"]
    assert [g.group_id for g in h.coord.list_groups(["Stable", "Dead"])] == [GROUP]


def test_describe_group_shows_metadata_and_assignments_only_when_stable() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a", "topics": ["t"]})
    d = h.coord.describe_group(GROUP)
    assert (d.state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    (m,) = d.members
    assert (m.member_id, m.client_id, m.client_host) == (a.member_id, "a", "/127.0.0.1")
    assert m.assignment == f"to:{a.member_id}".encode() and m.metadata
    h.join_new(client_id="b")
    d = h.coord.describe_group(GROUP)
    assert d.state == "PreparingRebalance" and d.protocol_data == ""
    assert all(m.metadata == b"" and m.assignment == b"" for m in d.members)
    missing = h.coord.describe_group("missing")
    assert (missing.error, missing.state) == (ErrorCode.NONE, "Dead")


def test_delete_groups_deletes_only_empty_groups() -> None:
    h = Harness()
    h.stable_group({"client_id": "a"})
    h.commit([("t", 0, 1)], group_id="simple")
    reply = h.coord.delete_groups([GROUP, "simple", "missing"], h.now_ms)
    assert reply.pending.result == [
        (GROUP, ErrorCode.NON_EMPTY_GROUP),
        ("simple", ErrorCode.NONE),
        ("missing", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
    assert reply.records == [tombstone("simple", "t", 0)]
    assert not h.coord.has_group("simple")


def test_deleting_an_emptied_group_writes_its_metadata_tombstone() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    h.leave(LeavingMember(a.member_id))
    reply = h.coord.delete_groups([GROUP], h.now_ms)
    assert reply.pending.result == [(GROUP, ErrorCode.NONE)]
    assert reply.records == [rec.group_metadata_tombstone(GROUP)]


def test_offsets_go_to_the_store_shared_with_the_kip848_groups() -> None:
    shared = OffsetStore()
    coordinator = ClassicGroupCoordinator(offsets=shared)
    request = OffsetCommitRequest("simple", [OffsetToCommit("t", 0, 9)])
    coordinator.commit_offsets(request, now_ms=1)
    assert shared.fetch("simple", "t", 0) == CommittedOffset(9, -1, "", 1)
