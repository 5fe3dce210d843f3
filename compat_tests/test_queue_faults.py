"""A short queue fault run (compat_tests/queue_fault_run.py) in CI: a share group on a
three-broker cluster with dead letters, delays and TTLs, under a consumer SIGKILL, a
source partition leader SIGKILL and a share coordinator SIGKILL (one each, in that
order), with a slow consumer whose locks expire; the queue history checker
(compat_tests/share_history.py) finds no anomaly, and every fate occurred: records
accepted, rejected and dead-lettered, released to the delivery limit and
dead-lettered, expired and dead-lettered, delayed and delivered after their delay.
The longer randomized runs are on demand (docs/cluster.md, "Queues under faults")."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from compat_tests.queue_fault_run import failed, run

pytestmark = pytest.mark.timeout(240)


def test_a_queue_under_a_consumer_a_leader_and_a_coordinator_kill_loses_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    args = argparse.Namespace(
        seed=1,
        faults=None,
        duration_minutes=0,
        sequence=["consumer", "leader", "coordinator"],
        kinds=[],
        consumers=3,
        partitions=3,
    )
    summary = run(args, tmp_path)
    shown = json.dumps(summary, indent=1)[:6000]
    assert not failed(summary), shown
    assert summary["faults_by_kind"] == {"consumer": 1, "leader": 1, "coordinator": 1}, shown
    assert summary["failover_events"].get("kill", 0) >= 1, shown  # a leader failed over
    assert summary["drain_empty"], shown
    resolutions = summary["resolutions_by_fate"]
    assert resolutions["accept"].get("accepted", 0) > 0, shown
    assert resolutions["release1"].get("accepted", 0) > 0, shown
    letters = summary["dead_letters_by_reason"]
    assert letters.get("REJECTED", 0) > 0, shown
    assert letters.get("DELIVERY_LIMIT", 0) > 0, shown
    assert letters.get("EXPIRED", 0) > 0, shown
    assert resolutions["expire"] == {"expired": summary["records_by_fate"]["expire"]}, shown
    assert summary["delayed_delivered_late_ms"].get("count", 0) > 0, shown
    assert summary["delayed_delivered_late_ms"]["min"] >= 0, shown
