"""`weir produce` and `weir consume` against a real three-broker cluster (etcd and
`weir serve` processes) while a partition leader is killed."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from compat_tests.cluster_harness import running_cluster
from compat_tests.harness import clean_environment, run_cli, unique_topic_name, weir_executable

pytestmark = pytest.mark.timeout(180)

BURSTS = 30
LINES_PER_BURST = 20
KILL_AFTER_BURST = 10


def test_produce_carries_on_through_a_leader_kill_without_losing_or_repeating_a_line(
    tmp_path: Path,
) -> None:
    """acks=all: the idempotent producer sends again what the dead leader never
    answered; the new leader writes it once (or already has it from replication)."""
    with running_cluster(tmp_path) as cluster:
        topic = unique_topic_name("cli-failover")
        created = run_cli("-b", cluster.bootstrap, "topic", "create", topic,
                          "--partitions", "1", "--replication-factor", "3")  # fmt: skip
        assert created.returncode == 0, created.stderr
        cluster.wait_full_isr(topic)
        leader = cluster.leader_of(topic, 0)
        producer = subprocess.Popen(
            [weir_executable(), "-b", cluster.bootstrap, "produce", topic, "--format", "json"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=clean_environment(),
        )  # fmt: skip
        assert producer.stdin is not None
        try:
            for burst in range(BURSTS):
                first = burst * LINES_PER_BURST + 1
                lines = "".join(f"{n}\n" for n in range(first, first + LINES_PER_BURST))
                producer.stdin.write(lines.encode())
                producer.stdin.flush()
                if burst == KILL_AFTER_BURST:
                    cluster.brokers[leader].kill()
                time.sleep(0.1)
            out, err = producer.communicate(timeout=120)
        finally:
            producer.kill()
        total = BURSTS * LINES_PER_BURST
        assert producer.returncode == 0, err.decode()
        summary = json.loads(out)
        assert summary["errors"] == []
        assert (summary["records_acknowledged"], summary["lines_acknowledged"]) == (
            total, f"1-{total}",
        )  # fmt: skip
        survivor = next(b for n, b in cluster.brokers.items() if n != leader)
        consumed = run_cli("-b", survivor.bootstrap, "consume", topic, "-o", "beginning", "-e")
        assert consumed.returncode == 0, consumed.stderr
        assert consumed.stdout.splitlines() == [str(n) for n in range(1, total + 1)]
