"""TxnOffsetCommit to classic groups (Kafka's rules) and to KIP-848 consumer groups."""

from __future__ import annotations

from collections.abc import Sequence

from weir.format.errors import ErrorCode
from weir.groupcoord.classic_group import GroupState
from weir.groupcoord.classic_messages import LeavingMember, PartitionError
from weir.groupcoord.settings import GroupSettings

from .classic_harness import GROUP, Harness
from .consumer_harness import Client, World

PRODUCER = 42


def errors(results: Sequence[PartitionError]) -> list[ErrorCode]:
    return [r.error for r in results]


def offsets_of(h: Harness) -> dict[tuple[str, int], int]:
    return {(p.topic, p.partition): p.offset for p in h.coord.fetch_offsets(GROUP, None).partitions}


def test_a_txn_commit_to_an_unknown_group_without_generation_stores_offsets_only() -> None:
    h = Harness()
    assert errors(h.txn_commit([("t", 0, 10)], producer_id=PRODUCER)) == [ErrorCode.NONE]
    assert h.coord.group_state(GROUP) is GroupState.EMPTY
    assert offsets_of(h) == {}  # pending until the transaction commits
    assert h.coord.offsets.has_pending_transaction(GROUP, "t", 0)
    assert len(h.log) == 1


def test_a_txn_commit_naming_a_generation_of_an_unknown_group_is_illegal_generation() -> None:
    h = Harness()
    assert errors(h.txn_commit([("t", 0, 1)], generation_id=3, member_id="m")) == [
        ErrorCode.ILLEGAL_GENERATION
    ]
    assert not h.coord.has_group(GROUP) and h.log == []


def test_a_txn_commit_without_member_fields_is_accepted_by_an_active_group() -> None:
    """Old TxnOffsetCommit versions carry no member fields: unlike OffsetCommit (which
    answers UNKNOWN_MEMBER_ID), the group's members do not refuse them."""
    h = Harness()
    h.stable_group({"client_id": "a"})
    assert errors(h.commit([("t", 0, 1)])) == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert errors(h.txn_commit([("t", 0, 1)])) == [ErrorCode.NONE]


def test_a_txn_commit_with_member_fields_is_checked_against_the_group() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a", "instance_id": "i"})
    ok = h.txn_commit([("t", 0, 1)], generation_id=1, member_id=a.member_id, instance_id="i")
    assert errors(ok) == [ErrorCode.NONE]
    stale = h.txn_commit([("t", 0, 1)], generation_id=0, member_id=a.member_id, instance_id="i")
    assert errors(stale) == [ErrorCode.ILLEGAL_GENERATION]
    unknown = h.txn_commit([("t", 0, 1)], generation_id=1, member_id="nobody")
    assert errors(unknown) == [ErrorCode.UNKNOWN_MEMBER_ID]
    fenced = h.txn_commit([("t", 0, 1)], generation_id=1, member_id="other", instance_id="i")
    assert errors(fenced) == [ErrorCode.FENCED_INSTANCE_ID]


def test_a_txn_commit_is_accepted_while_the_group_completes_a_rebalance() -> None:
    h = Harness()
    (a,) = h.stable_group({"client_id": "a"})
    joined = h.join(a.member_id, topics=["t", "u"])  # a new subscription: a new generation
    assert h.coord.group_state(GROUP) is GroupState.COMPLETING_REBALANCE, joined
    member_id, generation = joined.result.member_id, joined.result.generation_id
    assert errors(h.commit([("t", 0, 1)], generation_id=generation, member_id=member_id)) == [
        ErrorCode.REBALANCE_IN_PROGRESS
    ]
    txn = h.txn_commit([("t", 0, 1)], generation_id=generation, member_id=member_id)
    assert errors(txn) == [ErrorCode.NONE]


def test_an_empty_group_with_an_open_transaction_is_kept_past_retention() -> None:
    config = GroupSettings(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=1_000)
    h = Harness(config=config)
    (a,) = h.stable_group({"client_id": "a", "topics": ["t"]})
    h.commit([("t", 0, 5), ("t", 1, 5)], generation_id=1, member_id=a.member_id)
    h.txn_commit([("t", 0, 6)], generation_id=1, member_id=a.member_id, producer_id=PRODUCER)
    h.leave(LeavingMember(a.member_id))
    h.tick(120_000)
    assert offsets_of(h) == {("t", 0): 5}  # its transaction's offset is pending
    h.coord.offsets.end_transaction(PRODUCER, True, lambda g: True, 0, None)
    h.txn_commit([("t", 2, 7)], producer_id=PRODUCER)
    h.tick(120_000)
    assert offsets_of(h) == {}  # only a transaction holds the group now
    assert h.coord.has_group(GROUP)
    assert h.coord.offsets.has_pending_transaction(GROUP, "t", 2)
    h.coord.offsets.end_transaction(PRODUCER, False, lambda g: True, 0, None)
    h.tick(2_000)
    assert offsets_of(h) == {} and not h.coord.has_group(GROUP)


def test_kip848_txn_commits_check_member_and_epoch_as_illegal_generation() -> None:
    world = World()
    Client(world, "a", ["t1"]).heartbeat()
    validate = world.coordinator.validate_txn_offset_commit
    assert validate(GROUP, "a", None, 1) == ErrorCode.NONE
    assert validate(GROUP, "a", None, 0) == ErrorCode.ILLEGAL_GENERATION
    assert validate(GROUP, "b", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert validate(GROUP, "", None, -1) == ErrorCode.NONE  # no member fields at all
    assert validate("other", "", None, -1) == ErrorCode.NONE
