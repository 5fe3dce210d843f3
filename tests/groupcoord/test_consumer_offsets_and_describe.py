"""KIP-848 offset commit/fetch checks and the wire-shaped answers: ConsumerGroupDescribe
entries and the heartbeat response."""

from __future__ import annotations

from tests.groupcoord.consumer_harness import (
    GROUP,
    T1,
    T2,
    Client,
    World,
    converge,
)
from weir.format.errors import ErrorCode


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
