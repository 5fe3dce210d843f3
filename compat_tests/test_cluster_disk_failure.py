"""A broker whose disk fills or turns read-only, in a real three-broker cluster over
a real etcd, under idempotent acks=all writes from confluent-kafka (root: the
broker's data dir is a small ext4 image of its own, loop-mounted with
`errors=remount-ro`).

Its replicas go offline there: the partitions it led get new leaders from the
healthy brokers within a second or two, it leaves every ISR, the writes go on, no
acknowledged record is lost, and the broker itself keeps running (not ready, and
saying why). Once the disk is fixed, a restart brings its replicas back as
followers that catch up and rejoin every ISR (Kafka's failed log directory:
offline until the broker restarts).

The read-only turn is the kernel's own: ext4's `trigger_fs_error` (sysfs) records
a filesystem error, and `errors=remount-ro` makes the mounted filesystem read-only
under the broker's open files, as a real I/O error would (`mount -o remount,ro`
is refused while files are open for writing)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.cluster_harness import WeirCluster
from compat_tests.etcd_harness import EtcdCluster
from compat_tests.harness import unique_topic_name
from compat_tests.history_checker import ConcurrentReader, ProduceLoad, check_history
from compat_tests.wire_client import connect, round_trip

pytestmark = pytest.mark.timeout(150)

VICTIM = 1
HEALTHY = 2
PARTITIONS = 3
# Room for the broker's files and the run's records; a filler file takes the rest.
IMAGE_BYTES = 64 * 1024 * 1024
FILLER_NAME = "filler"
COMMAND_TIMEOUT_S = 30
# From the disk failing to every partition having a leader and an ISR without the
# victim (measured: under a second; the bound leaves room for a loaded CI machine).
HANDOVER_S_MAX = 10.0


def _run(*command: str, ok_codes: tuple[int, ...] = (0,)) -> None:
    done = subprocess.run(command, capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False)
    assert done.returncode in ok_codes, f"{command}: {done.returncode} {done.stderr!r}"


def _write_until_full(fd: int) -> int:
    """Zeros in 1 MiB, then 4 KiB writes until ENOSPC; the bytes written."""
    written = 0
    for chunk in (bytes(1024 * 1024), bytes(4096)):
        try:
            while True:
                written += os.write(fd, chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return written


class VictimDisk:
    """An ext4 image loop-mounted on the victim broker's data dir."""

    def __init__(self, image: Path, mount_point: Path) -> None:
        self.image = image
        self.mount_point = mount_point
        self.device = ""

    def create(self) -> None:
        with open(self.image, "wb") as image:
            image.truncate(IMAGE_BYTES)
        _run("mkfs.ext4", "-q", "-F", str(self.image))
        self.mount_point.mkdir(parents=True, exist_ok=True)
        self.mount()

    def mount(self) -> None:
        """On a loop device of its own each time (`mount -o loop` would reuse one
        still attached, whose filesystem a mount namespace made meanwhile by
        another test's `ip netns exec` may keep alive, read-only)."""
        self.device = subprocess.run(
            ["losetup", "--find", "--show", str(self.image)],
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=True,
        ).stdout.strip()  # fmt: skip
        _run("mount", "-o", "errors=remount-ro", self.device, str(self.mount_point))

    def unmount(self, *, lazy: bool = False) -> None:
        _run("umount", *(["-l"] if lazy else []), str(self.mount_point))
        _run("losetup", "-d", self.device)  # detached once nothing holds it

    def fill(self) -> None:
        """Write zeros until the filesystem has no room left, even after an fsync
        (ext4 returns what it reserved for delayed allocation once it is written)."""
        fd = os.open(self.mount_point / FILLER_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            while _write_until_full(fd) > 0:
                os.fsync(fd)
        finally:
            os.close(fd)

    def free(self) -> None:
        (self.mount_point / FILLER_NAME).unlink()

    def turn_read_only(self) -> None:
        """ext4 records an error and, with errors=remount-ro, goes read-only."""
        trigger = Path("/sys/fs/ext4") / Path(self.device).name / "trigger_fs_error"
        trigger.write_text("weir test: the disk turns read-only\n")

    def repair(self) -> None:
        """What an operator does (the broker stopped): unmount, check, mount again."""
        self.unmount()
        _run("e2fsck", "-f", "-y", str(self.image), ok_codes=(0, 1))
        self.mount()


@pytest.fixture(scope="module")
def disk_and_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[VictimDisk, WeirCluster]]:
    """Three brokers over one etcd member; broker VICTIM's data dir on its own disk."""
    if os.geteuid() != 0:
        pytest.skip("loop-mounting a disk image for the broker needs root")
    base = tmp_path_factory.mktemp("disk-failure")
    etcd = EtcdCluster.start(base / "etcd", 1)
    try:
        weir = WeirCluster(base / "weir", etcd, 3)
        disk = VictimDisk(base / "victim.img", weir.brokers[VICTIM].data_dir)
        disk.create()
        try:
            weir.start()
            yield disk, weir
        finally:
            try:
                weir.stop()  # before the unmount; fails on any broker's traceback
            finally:
                disk.unmount(lazy=True)
    finally:
        etcd.stop()


METADATA_API_KEY = 3


def _offline_replicas(cluster: WeirCluster, topic: str) -> dict[int, list[int]]:
    """Per partition, the offline replicas a healthy broker's Metadata v12 reports
    (clients hide the field)."""
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    with connect(cluster.brokers[HEALTHY]) as sock:
        [described] = round_trip(sock, METADATA_API_KEY, 12, body).topics
    return {p.partition_index: sorted(p.offline_replicas) for p in described.partitions}


def _hand_over_and_recover(
    cluster: WeirCluster, break_disk: Callable[[], None], fix_disk: Callable[[], None]
) -> float:
    """Under load: break the victim's disk, see its partitions move and the writes go
    on, fix the disk (the victim stopped), start it again, see every ISR full; no
    acknowledged write lost. Returns the seconds from the break to the handover."""
    topic = unique_topic_name("disk-failure")
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
            broken_at_s = time.monotonic()
            break_disk()
            cluster.wait_until(handed_over, HANDOVER_S_MAX, "new leaders and ISRs without it")
            handover_s = time.monotonic() - broken_at_s
            load.acked_since(500, timeout_s=30)  # the writes go on without it
            # Metadata names the replicas whose log failed as offline, though their
            # broker is alive (Kafka's offline replicas of a failed log dir).
            cluster.wait_until(
                lambda: (
                    _offline_replicas(cluster, topic) == dict.fromkeys(range(PARTITIONS), [VICTIM])
                ),
                10,
                "Metadata lists the victim's replicas as offline",
            )

            assert victim.is_running()
            status, body = victim.http_get("/health/ready")
            ready = json.loads(body)
            # The topic's replicas, and any of `__consumer_offsets` that wrote meanwhile.
            offline = ready["replicas_offline"]
            assert status == 503 and offline >= PARTITIONS, ready
            assert victim.metric_samples("weir_partitions_offline") == {"": offline}

            victim.stop()
            fix_disk()
            victim.start(ready_timeout_s=60)  # ready: nothing offline, caught up
            cluster.wait_full_isr(topic, timeout_s=40)
            load.acked_since(200, timeout_s=30)
        time.sleep(1)  # the reader reaches the end
    check_history(cluster, load, PARTITIONS, reader)
    return handover_s


def test_a_broker_whose_disk_fills_hands_over_its_partitions_and_loses_nothing(
    disk_and_cluster: tuple[VictimDisk, WeirCluster],
) -> None:
    disk, cluster = disk_and_cluster
    handover_s = _hand_over_and_recover(cluster, disk.fill, disk.free)
    print(f"handover after the disk filled: {handover_s:.2f} s")


def test_a_broker_whose_disk_turns_read_only_hands_over_its_partitions_and_loses_nothing(
    disk_and_cluster: tuple[VictimDisk, WeirCluster],
) -> None:
    disk, cluster = disk_and_cluster
    handover_s = _hand_over_and_recover(cluster, disk.turn_read_only, disk.repair)
    print(f"handover after the disk turned read-only: {handover_s:.2f} s")
