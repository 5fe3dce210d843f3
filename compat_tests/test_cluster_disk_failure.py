"""A broker whose disk fills, in a real three-broker cluster over a real etcd, under
idempotent acks=all writes from confluent-kafka (root: the broker's data dir is a
small tmpfs of its own).

Its replicas go offline there: the partitions it led get new leaders from the
healthy brokers within a second or two, it leaves every ISR, the writes go on, no
acknowledged record is lost, and the broker itself keeps running (not ready, and
saying why). Once the disk has room again, a restart brings its replicas back as
followers that catch up and rejoin every ISR (Kafka's failed log directory:
offline until the broker restarts)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from compat_tests.cluster_harness import WeirCluster
from compat_tests.etcd_harness import EtcdCluster
from compat_tests.harness import unique_topic_name
from compat_tests.history_checker import ConcurrentReader, ProduceLoad, check_history

pytestmark = pytest.mark.timeout(150)

VICTIM = 1
PARTITIONS = 3
# Room for the broker's files and the run's records; a filler file takes the rest.
FILESYSTEM_BYTES = 64 * 1024 * 1024
FILLER_NAME = "filler"
# From the disk filling up to every partition the victim led having another leader
# (measured: well under a second; the bound leaves room for a loaded CI machine).
HANDOVER_S_MAX = 10.0


@contextmanager
def small_filesystem(directory: Path, size_bytes: int) -> Iterator[None]:
    """A tmpfs of `size_bytes` mounted on `directory` (fsync works there, so the
    broker's syncfs method does too), unmounted on exit."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem for the broker needs root")
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(directory)],
        check=True,
        timeout=10,
    )
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False, timeout=10)


def fill(directory: Path) -> None:
    """Write zeros into `directory` until its filesystem has no room left."""
    fd = os.open(directory / FILLER_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    chunk = bytes(1024 * 1024)
    try:
        while True:
            os.write(fd, chunk)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[WeirCluster]:
    """Three brokers over one etcd member; broker VICTIM's data dir on a small tmpfs."""
    etcd = EtcdCluster.start(tmp_path / "etcd", 1)
    try:
        weir = WeirCluster(tmp_path / "weir", etcd, 3)
        with small_filesystem(weir.brokers[VICTIM].data_dir, FILESYSTEM_BYTES):
            try:
                weir.start()
                yield weir
            finally:
                weir.stop()  # before the unmount; fails on any broker's traceback
    finally:
        etcd.stop()


def _ready_status(cluster: WeirCluster, node_id: int) -> tuple[int, dict[str, object]]:
    status, body = cluster.brokers[node_id].http_get("/health/ready")
    return status, json.loads(body)


def test_a_broker_whose_disk_fills_hands_over_its_partitions_and_loses_nothing(
    cluster: WeirCluster,
) -> None:
    topic = unique_topic_name("disk-full")
    cluster.create_topic(topic, PARTITIONS, 3)
    cluster.wait_full_isr(topic)
    led = [p for p, described in cluster.partitions(topic).items() if described.leader == VICTIM]
    assert led, "the victim leads one of the partitions (leaders are spread)"
    victim = cluster.brokers[VICTIM]

    def handed_over() -> bool:
        partitions = cluster.partitions(topic)
        return all(
            partitions[p].leader not in (VICTIM, -1) and VICTIM not in partitions[p].isrs
            for p in range(PARTITIONS)
        )

    with ConcurrentReader(cluster.bootstrap, topic, PARTITIONS) as reader:
        with ProduceLoad(cluster.bootstrap, topic) as load:
            load.acked_since(300, timeout_s=30)
            filled_at_s = time.monotonic()
            fill(victim.data_dir)
            cluster.wait_until(handed_over, HANDOVER_S_MAX, "new leaders and ISRs without it")
            handover_s = time.monotonic() - filled_at_s
            load.acked_since(500, timeout_s=30)  # the writes go on without it

            assert victim.is_running()
            status, ready = _ready_status(cluster, VICTIM)
            assert status == 503 and ready["replicas_offline"] == PARTITIONS, ready
            assert victim.metric_samples("weir_partitions_offline") == {"": PARTITIONS}

            (victim.data_dir / FILLER_NAME).unlink()  # the disk is fixed
            victim.stop()
            victim.start(ready_timeout_s=60)  # ready: nothing offline, caught up
            cluster.wait_full_isr(topic, timeout_s=40)
            load.acked_since(200, timeout_s=30)
        time.sleep(1)  # the reader reaches the end
    check_history(cluster, load, PARTITIONS, reader)
    print(f"handover after the disk filled: {handover_s:.2f} s")
