"""The range assignor `weir consume -g` runs when it leads its group."""

from __future__ import annotations

from weir.cli.range_assignor import assign_range


def test_range_assignor_gives_each_subscriber_a_contiguous_range() -> None:
    plan = assign_range({"m2": ["a"], "m1": ["a", "b"], "m3": ["a"]}, {"a": 5, "b": 2})
    assert plan == {
        "m1": {"a": [0, 1], "b": [0, 1]},
        "m2": {"a": [2, 3]},
        "m3": {"a": [4]},
    }


def test_range_assignor_leaves_extra_members_without_partitions() -> None:
    assert assign_range({"m1": ["a"], "m2": ["a"]}, {"a": 1}) == {"m1": {"a": [0]}, "m2": {}}
