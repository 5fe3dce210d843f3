"""The fault run's measures and the group checker, on made-up histories (no cluster)."""

from __future__ import annotations

from compat_tests.fault_run import first_ack_s, longest_gap_s, summarize_by_kind
from compat_tests.group_load import (
    Commit,
    Regression,
    commit_regressions,
    first_commit_after,
    parse_member_log,
    parse_samples,
    sample_regressions,
    unconsumed,
)

ACKS = {0: [1.0, 2.0, 9.0, 9.5], 1: [1.5, 3.0, 4.0], 2: [2.5]}
# Produced (wall-clock ms) 1000 s after the monotonic times above; partition 0's
# acknowledgement at 9.0 is of a write produced before the fault at 2.5.
CREATED_MS = {0: [1_001_000, 1_001_900, 1_002_000, 1_009_400], 1: [1_001_400, 1_002_900, 1_003_900]}


def test_failover_is_the_slowest_affected_partition_to_acknowledge_a_new_write() -> None:
    assert first_ack_s(ACKS, CREATED_MS, [0, 1], since_s=2.5, since_wall_s=1002.5) == 7.0
    assert first_ack_s(ACKS, CREATED_MS, [1], since_s=2.5, since_wall_s=1002.5) == 0.5


def test_failover_is_none_when_an_affected_partition_acknowledged_no_new_write() -> None:
    assert first_ack_s(ACKS, CREATED_MS, [0, 2], since_s=3.0, since_wall_s=1003.0) is None


def test_longest_gap_counts_from_the_last_acknowledgement_before_the_fault() -> None:
    # partition 0: nothing between 2.0 and 9.0 -> 7 s, counted from the fault at 2.5
    assert longest_gap_s(ACKS, [0], 2.5, 10.0) == 6.5
    # partition 2 acknowledged nothing after 2.5: the gap runs to the end
    assert longest_gap_s(ACKS, [0, 1, 2], 2.5, 10.0) == 7.5


def test_a_sampled_committed_offset_below_an_earlier_one_is_a_regression() -> None:
    samples = [(1.0, {0: -1, 1: 5}), (2.0, {0: 10, 1: 7}), (3.0, {0: 8, 1: 7}), (4.0, {0: -1})]
    assert sample_regressions(samples) == [Regression(0, 3.0, 10, 8), Regression(0, 4.0, 10, -1)]


def test_a_commit_sent_after_a_higher_one_was_acknowledged_is_a_regression() -> None:
    commits = [
        Commit(1.0, 1.1, ((0, 10),)),
        Commit(1.05, 1.2, ((0, 8),)),  # in flight together with the first: not ordered
        Commit(2.0, 2.1, ((0, 9), (1, 4))),  # sent after 10 was acknowledged: went back
        Commit(3.0, 3.1, ((0, 12),)),
    ]
    assert commit_regressions(commits) == [Regression(0, 2.1, 10, 9)]


def test_unconsumed_lists_acknowledged_values_no_member_recorded_in_write_order() -> None:
    assert unconsumed(["w-3", "w-1", "w-2", "w-10"], {"w-2"}) == ["w-1", "w-3", "w-10"]


def test_group_failover_is_the_first_commit_sent_after_the_fault() -> None:
    commits = [Commit(0.9, 5.0, ()), Commit(2.0, 2.5, ()), Commit(3.0, 3.2, ())]
    assert first_commit_after(commits, 1.0) == 1.5
    assert first_commit_after(commits, 4.0) is None


def test_member_and_sampler_logs_skip_a_line_torn_by_sigkill() -> None:
    log = parse_member_log(["r 0 4 w-1\n", "c 1.0 1.2 0:5,1:3\n", "e 2.0 timed out\n", "r 1 3"])
    assert log.consumed == {"w-1"}
    assert log.commits == [Commit(1.0, 1.2, ((0, 5), (1, 3)))]
    assert log.commit_errors == 1
    samples = parse_samples(["s 1.0 g 0:5,1:-1\n", "s 2.0 g 0:6"])
    assert samples == {"g": [(1.0, {0: 5, 1: -1})]}


def test_each_kind_reports_the_median_and_worst_of_its_measures() -> None:
    records: list[dict[str, object]] = [
        {"kind": "kill", "failover_s": 3.0, "heal_s": 1.0, "healed": True},
        {"kind": "kill", "failover_s": 5.0, "heal_s": 2.0, "healed": True},
        {"kind": "kill", "failover_s": None, "healed": False, "group_commit_s": {"g": 4.0}},
    ]
    kill = summarize_by_kind(records)["kill"]
    assert isinstance(kill, dict)
    assert kill["failover_s"] == {"count": 2, "median": 4.0, "worst": 5.0, "missing": 1}
    assert kill["group_commit_s"] == {"count": 1, "median": 4.0, "worst": 4.0, "missing": 0}
    assert kill["unhealed"] == 1
