"""plan_reset: Kafka's `--reset-offsets` strategies and clamping, as pure decisions."""

from __future__ import annotations

import pytest

from weir.groupcoord.offset_reset import (
    EARLIEST,
    LATEST,
    OFFSET,
    SHIFT_BY,
    TIMESTAMP,
    LogBounds,
    ResetRefusedError,
    plan_reset,
)

P0, P1 = ("t", 0), ("t", 1)
BOUNDS = {P0: LogBounds(5, 20, at_timestamp=12), P1: LogBounds(0, 4, at_timestamp=None)}
COMMITTED = {P0: 8}


def new_offsets(strategy: str, value: int | None = None) -> dict[tuple[str, int], int]:
    planned = plan_reset(strategy, value, [P1, P0], COMMITTED, BOUNDS)
    return {(p.topic, p.partition): p.new_offset for p in planned}


def test_earliest_and_latest_are_the_logs_bounds() -> None:
    assert new_offsets(EARLIEST) == {P0: 5, P1: 0}
    assert new_offsets(LATEST) == {P0: 20, P1: 4}


def test_a_timestamp_with_no_record_at_or_after_it_goes_to_the_log_end() -> None:
    assert new_offsets(TIMESTAMP) == {P0: 12, P1: 4}


def test_a_shift_or_an_offset_beyond_the_log_is_moved_to_the_nearer_end() -> None:
    assert plan_reset(SHIFT_BY, -100, [P0], COMMITTED, BOUNDS)[0].new_offset == 5
    assert plan_reset(SHIFT_BY, 100, [P0], COMMITTED, BOUNDS)[0].new_offset == 20
    assert plan_reset(SHIFT_BY, 2, [P0], COMMITTED, BOUNDS)[0].new_offset == 10
    assert new_offsets(OFFSET, 3) == {P0: 5, P1: 3}


def test_a_partition_with_no_committed_offset_cannot_be_shifted() -> None:
    with pytest.raises(ResetRefusedError, match="no committed offset"):
        plan_reset(SHIFT_BY, 1, [P0, P1], COMMITTED, BOUNDS)


def test_the_plan_is_sorted_once_per_partition_with_the_current_offset() -> None:
    planned = plan_reset(EARLIEST, None, [P1, P0, P1], COMMITTED, BOUNDS)
    assert [(p.partition, p.current_offset) for p in planned] == [(0, 8), (1, None)]


def test_a_partition_without_known_bounds_or_a_value_is_refused() -> None:
    with pytest.raises(ResetRefusedError):
        plan_reset(EARLIEST, None, [("u", 0)], COMMITTED, BOUNDS)
    with pytest.raises(ResetRefusedError):
        plan_reset(OFFSET, None, [P0], COMMITTED, BOUNDS)
