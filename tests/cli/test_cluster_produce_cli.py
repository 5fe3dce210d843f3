"""`weir produce` and `weir consume` (alone and in a group) against a real
three-broker cluster (etcd and `weir serve` processes) while a partition leader,
and perhaps the group's coordinator, is killed."""

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
        consumers = {
            name: subprocess.Popen(
                [
                    weir_executable(),
                    "-b",
                    cluster.bootstrap,
                    "consume",
                    topic,
                    "-o",
                    "beginning",
                    "--timeout-ms",
                    "10000",
                    *extra,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=clean_environment(),
            )  # fmt: skip
            for name, extra in (("plain", ()), ("group", ("-g", f"{topic}-readers")))
        }
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
                try:
                    producer.stdin.write(lines.encode())
                    producer.stdin.flush()
                except BrokenPipeError:
                    break  # the producer gave up: its summary says why
                if burst == KILL_AFTER_BURST:
                    cluster.brokers[leader].kill()
                time.sleep(0.1)
            out, err = producer.communicate(timeout=120)
            read = {name: c.communicate(timeout=120) for name, c in consumers.items()}
        finally:
            for process in (producer, *consumers.values()):
                process.kill()
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
        # Consumers running through the kill: one follows the new leader from its
        # position and prints every line once; a group member at least once.
        plain_out, plain_err = read["plain"]
        assert consumers["plain"].returncode == 0, plain_err.decode()
        assert plain_out.decode().splitlines() == [str(n) for n in range(1, total + 1)]
        group_out, group_err = read["group"]
        assert consumers["group"].returncode == 0, group_err.decode()
        assert {int(n) for n in group_out.decode().split()} == set(range(1, total + 1))
