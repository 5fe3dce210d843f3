"""A long randomized fault-injection run against a real three-broker cluster.

    sudo .venv/bin/python -m compat_tests.fault_run [--faults 20 | --duration-minutes 60]
        [--seed 1] [--etcd-members 1|3] [--kinds kill,pause,...]
        [--groups classic,consumer | --groups none] [--group-members 2]
        [--order random|cycle] [--work-dir DIR] [--out fault-run.json]

Each broker and each etcd member runs in a network namespace of its own
(compat_tests/netns.py); the clients run in the root namespace. One idempotent
acks=all producer writes unique values to a 3-partition, replication-factor-3
topic the whole time, and a reader reads everything while it happens. With
`--groups`, one consumer group per protocol (classic, KIP-848 `consumer`), each of
`--group-members` processes, consumes the topic and commits, while its members are
SIGKILLed and restarted at random (compat_tests/group_load.py); the first fault
waits until every group has committed. Faults are drawn
at random from `--kinds` (default: every kind the etcd size allows; `--order cycle`
takes them in turn), one at a time, each followed by healing and a wait for every
partition's full ISR:

- kill: SIGKILL a partition leader, restart it 1-4 s after its partitions moved;
- pause: SIGSTOP a broker for 4-7 s (past its 3 s session), then SIGCONT;
- isolate: cut a broker off from everything (brokers and etcd) for 3-6 s;
- controller: SIGKILL the active controller, restart it;
- restart: SIGTERM a broker and start it again (a rolling-restart step);
- leader-cut: cut a partition leader off from the other brokers only (it still
  reaches etcd) for 8-15 s;
- etcd-outage: every etcd member SIGKILLed for 6-10 s, then started again;
- etcd-kill / etcd-pause / etcd-isolate (three members): one etcd member (the etcd
  leader half of the time) SIGKILLed for 3-6 s, SIGSTOPped for 4-8 s, or cut off
  from everything for 4-8 s;
- kill+pause: a partition leader SIGKILLed while another broker is paused 4-7 s;
- isolate+etcd-leader (three members): a partition leader isolated while the etcd
  leader member is SIGKILLed, for 3-6 s;
- disk-full / disk-readonly: broker 3's data dir is on a 400 MB ext4 image of its
  own (compat_tests/small_disk.py); the fault fills it (ENOSPC) for 6-10 s and then
  frees it, or turns it read-only through an ext4 error for 6-10 s, after which the
  broker is stopped, the filesystem checked and mounted again and the broker
  started. A broker that is down, or whose partitions are not back in full ISR
  within 20 s of a freed disk, is restarted;
- clock-forward / clock-back: broker 2's wall clock (only; not its monotonic clock)
  jumps 1 h ahead or back for 6-10 s, then returns (compat_tests/clock_shift.py).

At the end the history checker (history_checker.py) reads everything back and
reports lost, duplicated, reordered, offset-mismatched, vanished and unexpected
records; the groups get time to consume to the end, and the group checker reports
committed offsets that went backwards and acknowledged records a group never
consumed. The run prints a JSON summary (also written to --out) with every fault,
the anomalies, the brokers' tracebacks and ERROR lines, and per fault kind the
median and worst of: the failover time (injection to the first acknowledged write
on every affected partition: those the victim led, or all for etcd faults), the
longest time any partition went without an acknowledged write during the cycle,
the heal time (the heal action to every partition's full ISR) and each group's
time to its first acknowledged commit sent after the injection. Exit code 0 only
with zero anomalies, every fault healed and no broker traceback.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from compat_tests.clock_shift import ClockShift
from compat_tests.cluster_harness import TEST_CLUSTER_SETTINGS, WeirCluster, running_cluster
from compat_tests.group_load import (
    CONSUMER_GROUP_BROKER_SETTINGS,
    PROTOCOLS,
    GroupLoad,
    MemberLog,
    commit_regressions,
    first_commit_after,
    sample_regressions,
    unconsumed,
)
from compat_tests.history_checker import (
    AckLog,
    ConcurrentReader,
    ProduceLoad,
    check,
    read_everything,
)
from compat_tests.netns import NetworkLab
from compat_tests.small_disk import SmallDisk, enter_private_mount_namespace

TOPIC = "faults"
PARTITIONS = 3
BROKERS = 3
HEAL_TIMEOUT_S = 90.0
FAILOVER_WAIT_S = 30.0
DISK_SETTLE_S = 20.0
GROUP_CATCH_UP_S = 120.0
GROUP_START_S = 60.0
DISK_BROKER = 3
CLOCK_BROKER = 2
CLOCK_JUMP_S = 3600.0
DISK_SIZE_MB = 400
ORIGINAL_KINDS = ("kill", "pause", "isolate", "controller", "restart")
ETCD_QUORUM_KINDS = ("etcd-kill", "etcd-pause", "etcd-isolate", "isolate+etcd-leader")
DISK_KINDS = ("disk-full", "disk-readonly")
CLOCK_KINDS = ("clock-forward", "clock-back")
FAULT_KINDS = (
    *ORIGINAL_KINDS,
    "leader-cut",
    "etcd-outage",
    *ETCD_QUORUM_KINDS,
    "kill+pause",
    *DISK_KINDS,
    *CLOCK_KINDS,
)
ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL)\b\s*(.*)")


# -- measures (pure, over the acknowledgement times) ------------------------------------


def first_ack_s(
    ack_times: Mapping[int, Sequence[float]],
    created_ms: Mapping[int, Sequence[int]],
    partitions: Sequence[int],
    since_s: float,
    since_wall_s: float,
) -> float | None:
    """Seconds from `since_s` until every one of `partitions` acknowledged a write
    produced at or after it (`since_wall_s` on the wall clock: writes in flight at
    the fault do not count); None if one never did. Per partition the writes are
    acknowledged in the order they were produced, so `created_ms` is sorted."""
    worst = 0.0
    for partition in partitions:
        created = created_ms.get(partition, ())
        index = bisect.bisect_left(created, int(since_wall_s * 1000))
        times = ack_times.get(partition, ())
        if index >= min(len(created), len(times)):
            return None
        worst = max(worst, times[index] - since_s)
    return worst


def longest_gap_s(
    ack_times: Mapping[int, Sequence[float]], partitions: Sequence[int], start_s: float,
    end_s: float,
) -> float:  # fmt: skip
    """The longest stretch within [start_s, end_s] in which one of `partitions` got
    no acknowledgement (an acknowledgement just before `start_s` starts a stretch)."""
    worst = 0.0
    for partition in partitions:
        times = ack_times.get(partition, ())
        first = bisect.bisect_right(times, start_s)
        last = bisect.bisect_right(times, end_s)
        previous = max(times[first - 1], start_s) if first > 0 else start_s
        for at_s in times[first:last]:
            worst = max(worst, at_s - previous)
            previous = at_s
        worst = max(worst, end_s - previous)
    return worst


def spread(values: Sequence[float | None]) -> dict[str, object]:
    """count, median and worst of the measured values; `missing` counts the None ones."""
    measured = [v for v in values if v is not None]
    return {
        "count": len(measured),
        "median": round(statistics.median(measured), 2) if measured else None,
        "worst": round(max(measured), 2) if measured else None,
        "missing": len(values) - len(measured),
    }


def summarize_by_kind(records: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """Per fault kind: how many, and the spread of each measure."""
    kinds = sorted({str(r["kind"]) for r in records})
    summary: dict[str, object] = {}
    for kind in kinds:
        of_kind = [r for r in records if r["kind"] == kind]
        group_values: list[float | None] = []
        for record in of_kind:
            by_group = record.get("group_commit_s")
            if isinstance(by_group, dict):
                group_values += list(by_group.values())
        summary[kind] = {
            "count": len(of_kind),
            "failover_s": spread([_number(r.get("failover_s")) for r in of_kind]),
            "longest_ack_gap_s": spread([_number(r.get("longest_ack_gap_s")) for r in of_kind]),
            "heal_s": spread([_number(r.get("heal_s")) for r in of_kind]),
            "group_commit_s": spread(group_values),
            "unhealed": sum(1 for r in of_kind if r.get("healed") is False),
        }
    return summary


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


# -- the faults -------------------------------------------------------------------------


@dataclass
class Faults:
    """Everything a fault acts on."""

    cluster: WeirCluster
    lab: NetworkLab
    load: ProduceLoad
    rng: random.Random
    disk: SmallDisk | None
    clock: ClockShift | None

    def broker_namespace(self, node_id: int) -> int:
        return node_id - 1

    def etcd_namespace(self, index: int) -> int:
        return BROKERS + index

    def random_leader(self) -> int:
        return self.cluster.leader_of(TOPIC, self.rng.randrange(PARTITIONS))

    def led_by(self, brokers: Sequence[int]) -> list[int]:
        return sorted(
            p for p, d in self.cluster.partitions(TOPIC).items() if int(d.leader) in brokers
        )

    def inject(self, record: dict[str, object], victims: Sequence[int] = ()) -> None:
        """Note the moment of injection and what the victims lead right before it."""
        led = self.led_by(victims) if victims else []
        record["led"] = led
        record["affected"] = led or list(range(PARTITIONS))
        record["injected_at"] = time.monotonic()
        record["injected_wall"] = time.time()

    def healing(self, record: dict[str, object]) -> None:
        record["heal_started_at"] = time.monotonic()

    def wait_failover(self, record: dict[str, object]) -> None:
        """Until every partition the victims led has an acknowledgement after the
        injection (their leadership moved), at most FAILOVER_WAIT_S."""
        led = record.get("led")
        if not isinstance(led, list) or not led:
            return
        since = float(record["injected_at"])  # type: ignore[arg-type]
        deadline = time.monotonic() + FAILOVER_WAIT_S
        wall = float(record["injected_wall"])  # type: ignore[arg-type]
        acks = self.load.acks
        while time.monotonic() < deadline:
            if first_ack_s(acks.ack_times, acks.ack_created_ms, led, since, wall) is not None:
                return
            time.sleep(0.05)  # polling the producer thread's acknowledgements

    def hold(self, low_s: float, high_s: float) -> None:
        time.sleep(self.rng.uniform(low_s, high_s))

    def pick_etcd_member(self) -> int:
        """Half of the time the etcd leader, else any member."""
        members = self.cluster.etcd.members
        if self.rng.random() < 0.5:
            with contextlib.suppress(Exception):
                return members.index(self.cluster.etcd.leader())
        return self.rng.randrange(len(members))

    def restart_etcd_member(self, index: int) -> None:
        member = self.cluster.etcd.members[index]
        if not member.is_running():
            member.start()
        self.cluster.etcd.wait_healthy()


def fault_kill(f: Faults, record: dict[str, object], controller: bool = False) -> None:
    victim = f.cluster.controller_id() if controller else f.random_leader()
    record["broker"] = victim
    f.inject(record, [victim])
    f.cluster.brokers[victim].kill()
    f.wait_failover(record)
    f.hold(1, 4)
    f.healing(record)
    f.cluster.brokers[victim].start(ready_timeout_s=HEAL_TIMEOUT_S)


def fault_pause(f: Faults, record: dict[str, object]) -> None:
    victim = f.rng.choice(list(f.cluster.brokers))
    record["broker"] = victim
    f.inject(record, [victim])
    os.kill(f.cluster.brokers[victim].pid, signal.SIGSTOP)
    f.hold(4, 7)
    f.healing(record)
    os.kill(f.cluster.brokers[victim].pid, signal.SIGCONT)


def fault_isolate(f: Faults, record: dict[str, object]) -> None:
    victim = f.rng.choice(list(f.cluster.brokers))
    record["broker"] = victim
    f.inject(record, [victim])
    f.lab.isolate(f.broker_namespace(victim))
    f.hold(3, 6)
    f.healing(record)
    f.lab.heal(f.broker_namespace(victim))


def fault_restart(f: Faults, record: dict[str, object]) -> None:
    victim = f.rng.choice(list(f.cluster.brokers))
    record["broker"] = victim
    f.inject(record, [victim])
    f.cluster.brokers[victim].stop()
    f.healing(record)
    f.cluster.brokers[victim].start(ready_timeout_s=HEAL_TIMEOUT_S)


def fault_leader_cut(f: Faults, record: dict[str, object]) -> None:
    victim = f.random_leader()
    others = [n for n in f.cluster.brokers if n != victim]
    record["broker"] = victim
    f.inject(record, [victim])
    for other in others:
        f.lab.cut(f.broker_namespace(victim), f.lab.addresses[f.broker_namespace(other)])
    f.hold(8, 15)
    f.healing(record)
    for other in others:
        f.lab.restore(f.broker_namespace(victim), f.lab.addresses[f.broker_namespace(other)])


def fault_etcd_outage(f: Faults, record: dict[str, object]) -> None:
    f.inject(record)
    for member in f.cluster.etcd.members:
        member.kill()
    f.hold(6, 10)
    f.healing(record)
    for member in f.cluster.etcd.members:
        member.start()
    f.cluster.etcd.wait_healthy()


def fault_etcd_kill(f: Faults, record: dict[str, object]) -> None:
    index = f.pick_etcd_member()
    record["etcd_member"] = index
    f.inject(record)
    f.cluster.etcd.members[index].kill()
    f.hold(3, 6)
    f.healing(record)
    f.restart_etcd_member(index)


def fault_etcd_pause(f: Faults, record: dict[str, object]) -> None:
    index = f.pick_etcd_member()
    record["etcd_member"] = index
    f.inject(record)
    f.cluster.etcd.members[index].pause()
    f.hold(4, 8)
    f.healing(record)
    f.cluster.etcd.members[index].resume()
    f.cluster.etcd.wait_healthy()


def fault_etcd_isolate(f: Faults, record: dict[str, object]) -> None:
    index = f.pick_etcd_member()
    record["etcd_member"] = index
    f.inject(record)
    f.lab.isolate(f.etcd_namespace(index))
    f.hold(4, 8)
    f.healing(record)
    f.lab.heal(f.etcd_namespace(index))
    f.cluster.etcd.wait_healthy()


def fault_kill_and_pause(f: Faults, record: dict[str, object]) -> None:
    killed = f.random_leader()
    paused = f.rng.choice([n for n in f.cluster.brokers if n != killed])
    record |= {"broker": killed, "paused_broker": paused}
    f.inject(record, [killed, paused])
    f.cluster.brokers[killed].kill()
    os.kill(f.cluster.brokers[paused].pid, signal.SIGSTOP)
    f.hold(4, 7)
    f.healing(record)
    os.kill(f.cluster.brokers[paused].pid, signal.SIGCONT)
    f.hold(1, 3)
    f.cluster.brokers[killed].start(ready_timeout_s=HEAL_TIMEOUT_S)


def fault_isolate_and_etcd_leader(f: Faults, record: dict[str, object]) -> None:
    victim = f.random_leader()
    index = f.cluster.etcd.members.index(f.cluster.etcd.leader())
    record |= {"broker": victim, "etcd_member": index}
    f.inject(record, [victim])
    f.lab.isolate(f.broker_namespace(victim))
    f.cluster.etcd.members[index].kill()
    f.hold(3, 6)
    f.healing(record)
    f.lab.heal(f.broker_namespace(victim))
    f.restart_etcd_member(index)


def fault_disk(f: Faults, record: dict[str, object], read_only: bool) -> None:
    assert f.disk is not None
    broker = f.cluster.brokers[DISK_BROKER]
    record["broker"] = DISK_BROKER
    f.inject(record, [DISK_BROKER])
    if read_only:
        f.disk.fail()
    else:
        record["filled_bytes"] = f.disk.fill()
    f.hold(6, 10)
    record["during"] = observe_broker(f, DISK_BROKER)
    f.healing(record)
    if read_only:
        record["broker_exit_code"] = stop_broker(f, DISK_BROKER)
        record["fsck"] = f.disk.repair()
        broker.start(ready_timeout_s=HEAL_TIMEOUT_S)
        return
    f.disk.free()
    if not broker.is_running():
        record["broker_exit_code"] = broker.process.poll() if broker.process else None
        broker.start(ready_timeout_s=HEAL_TIMEOUT_S)
        return
    try:
        f.cluster.wait_full_isr(TOPIC, timeout_s=DISK_SETTLE_S)
    except AssertionError:
        record["restarted_for_isr"] = True
        stop_broker(f, DISK_BROKER)
        broker.start(ready_timeout_s=HEAL_TIMEOUT_S)


def observe_broker(f: Faults, node_id: int) -> dict[str, object]:
    """What a broker under a fault looks like: alive, ready, what it still leads."""
    broker = f.cluster.brokers[node_id]
    seen: dict[str, object] = {"running": broker.is_running()}
    if broker.is_running():
        with contextlib.suppress(Exception):
            seen["ready_status"] = broker.http_get("/health/ready", timeout_s=2)[0]
    with contextlib.suppress(Exception):
        seen["leads"] = f.led_by([node_id])
    return seen


def stop_broker(f: Faults, node_id: int) -> int | None:
    """SIGTERM (SIGKILL after the harness's wait); the exit code, None if it hung."""
    broker = f.cluster.brokers[node_id]
    if not broker.is_running():
        return broker.process.poll() if broker.process else None
    try:
        return broker.stop()
    except AssertionError:
        return None


def fault_clock(f: Faults, record: dict[str, object], jump_s: float) -> None:
    assert f.clock is not None
    record |= {"broker": CLOCK_BROKER, "jump_s": jump_s}
    f.inject(record, [CLOCK_BROKER])
    f.clock.set_offset_s(jump_s)
    f.hold(6, 10)
    record["during"] = observe_broker(f, CLOCK_BROKER)
    f.healing(record)
    f.clock.set_offset_s(0)


FAULTS: dict[str, Callable[[Faults, dict[str, object]], None]] = {
    "kill": fault_kill,
    "pause": fault_pause,
    "isolate": fault_isolate,
    "controller": lambda f, r: fault_kill(f, r, controller=True),
    "restart": fault_restart,
    "leader-cut": fault_leader_cut,
    "etcd-outage": fault_etcd_outage,
    "etcd-kill": fault_etcd_kill,
    "etcd-pause": fault_etcd_pause,
    "etcd-isolate": fault_etcd_isolate,
    "kill+pause": fault_kill_and_pause,
    "isolate+etcd-leader": fault_isolate_and_etcd_leader,
    "disk-full": lambda f, r: fault_disk(f, r, read_only=False),
    "disk-readonly": lambda f, r: fault_disk(f, r, read_only=True),
    "clock-forward": lambda f, r: fault_clock(f, r, CLOCK_JUMP_S),
    "clock-back": lambda f, r: fault_clock(f, r, -CLOCK_JUMP_S),
}


def run_fault(kind: str, f: Faults) -> dict[str, object]:
    """One cycle: the fault, its heal, the wait for every partition's full ISR and
    for the load to make progress. A cycle that does not heal is recorded as such,
    and everything down is started again."""
    record: dict[str, object] = {"kind": kind}
    try:
        FAULTS[kind](f, record)
        record.setdefault("heal_started_at", time.monotonic())
        f.cluster.wait_full_isr(TOPIC, timeout_s=HEAL_TIMEOUT_S)
        record["heal_s"] = round(time.monotonic() - float(record["heal_started_at"]), 2)  # type: ignore[arg-type]
        f.load.acked_since(50, timeout_s=HEAL_TIMEOUT_S)
        record["healed"] = True
    except Exception as exc:  # noqa: BLE001 - a fault tool reports, then carries on
        record["healed"] = False
        record["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        record.setdefault("injected_at", time.monotonic())
        record.setdefault("injected_wall", time.time())
        recover(f)
    record["cycle_end_at"] = time.monotonic()
    return record


def recover(f: Faults) -> None:
    """Undo whatever a failed cycle left: links, cuts, clocks, disks, processes."""
    for index in range(len(f.lab.namespaces)):
        f.lab.heal(index)
        for address in f.lab.addresses:
            f.lab.restore(index, address)
    for member in f.cluster.etcd.members:
        member.resume()
        if not member.is_running():
            member.start()
    if f.clock is not None:
        f.clock.set_offset_s(0)
    for broker in f.cluster.brokers.values():
        if broker.is_running():
            with contextlib.suppress(OSError):
                os.kill(broker.pid, signal.SIGCONT)
    if f.disk is not None and f.disk.is_read_only():
        stop_broker(f, DISK_BROKER)
        f.disk.repair()
    if f.disk is not None:
        f.disk.free()
    for broker in f.cluster.brokers.values():
        if not broker.is_running():
            with contextlib.suppress(Exception):
                broker.start(ready_timeout_s=HEAL_TIMEOUT_S)
    with contextlib.suppress(Exception):
        f.cluster.etcd.wait_healthy()
    with contextlib.suppress(AssertionError):
        f.cluster.wait_full_isr(TOPIC, timeout_s=HEAL_TIMEOUT_S)


def measure(record: dict[str, object], acks: AckLog) -> None:
    """The cycle's failover and longest acknowledgement gap (once the load stopped:
    a partition may acknowledge its first new write after the cycle ended)."""
    injected = float(record["injected_at"])  # type: ignore[arg-type]
    injected_wall = float(record["injected_wall"])  # type: ignore[arg-type]
    end = float(record["cycle_end_at"])  # type: ignore[arg-type]
    affected = record.get("affected") or list(range(PARTITIONS))
    assert isinstance(affected, list)
    times, created = acks.ack_times, acks.ack_created_ms
    failover = first_ack_s(times, created, affected, injected, injected_wall)
    record["failover_s"] = None if failover is None else round(failover, 2)
    record["longest_ack_gap_s"] = round(longest_gap_s(times, range(PARTITIONS), injected, end), 2)


def measure_groups(records: Sequence[dict[str, object]], logs: Mapping[str, MemberLog]) -> None:
    """Each cycle's time from injection to each group's first acknowledged commit
    sent after it (from the members' logs, once at the end)."""
    for record in records:
        wall = float(record["injected_wall"])  # type: ignore[arg-type]
        record["group_commit_s"] = {
            group: _rounded(first_commit_after(log.commits, wall)) for group, log in logs.items()
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


# -- the run ----------------------------------------------------------------------------


def kinds_for(requested: Sequence[str] | None, etcd_members: int) -> list[str]:
    if requested is None:
        return [k for k in FAULT_KINDS if etcd_members >= 3 or k not in ETCD_QUORUM_KINDS]
    unknown = [k for k in requested if k not in FAULT_KINDS]
    if unknown:
        raise SystemExit(f"unknown fault kinds {unknown}; known: {', '.join(FAULT_KINDS)}")
    needs_quorum = [k for k in requested if k in ETCD_QUORUM_KINDS]
    if needs_quorum and etcd_members < 3:
        raise SystemExit(f"{needs_quorum} need --etcd-members 3")
    return list(requested)


@dataclass
class Options:
    faults: int
    duration_s: float | None
    seed: int
    etcd_members: int
    kinds: list[str]
    group_protocols: list[str]
    group_members: int
    order: str = "random"


def run(options: Options, base: Path) -> dict[str, object]:
    rng = random.Random(options.seed)
    clock = ClockShift.build(base / "clock") if set(options.kinds) & set(CLOCK_KINDS) else None
    with contextlib.ExitStack() as stack:
        disk = None
        if set(options.kinds) & set(DISK_KINDS):
            disk = stack.enter_context(SmallDisk(base / "disk.img", base / "disk", DISK_SIZE_MB))
        lab = stack.enter_context(NetworkLab(BROKERS + options.etcd_members))
        # nsenter, not `ip netns exec`: no mount namespace copy keeps the disk mounted.
        broker_at = lambda n: (lab.addresses[n - 1], lab.enter_prefix(n - 1))  # noqa: E731
        etcd_at = lambda i: (lab.addresses[BROKERS + i], lab.enter_prefix(BROKERS + i))  # noqa: E731
        return run_in_lab(options, base, rng, lab, broker_at, etcd_at, disk, clock)
    raise AssertionError("unreachable")


def run_in_lab(
    options: Options,
    base: Path,
    rng: random.Random,
    lab: NetworkLab,
    broker_at: Callable[[int], tuple[str, tuple[str, ...]]],
    etcd_at: Callable[[int], tuple[str, tuple[str, ...]]],
    disk: SmallDisk | None,
    clock: ClockShift | None,
) -> dict[str, object]:
    summary: dict[str, object] = {}
    try:
        with running_cluster(
            base,
            settings=TEST_CLUSTER_SETTINGS + CONSUMER_GROUP_BROKER_SETTINGS,
            etcd_members=options.etcd_members,
            placement=broker_at,
            etcd_placement=etcd_at,
            broker_env=lambda n: clock.environment if clock and n == CLOCK_BROKER else {},
            data_dir_of=lambda n: disk.mount_point / "data" if disk and n == DISK_BROKER else None,
        ) as cluster:
            summary = drive(options, base, rng, cluster, lab, disk, clock)
            summary["broker_tracebacks"] = [
                {"file": str(path), "last_lines": text.strip().splitlines()[-6:]}
                for path, text in cluster.tracebacks()
            ]
            summary["broker_errors"] = broker_errors(cluster)
    except AssertionError as exc:
        if not summary or "a broker logged a traceback" not in str(exc):
            raise  # the run itself failed, not only a broker's log
    records = summary.get("faults")
    summary["ok"] = bool(
        summary.get("history_ok")
        and summary.get("groups_ok", True)
        and not summary.get("broker_tracebacks")
        and isinstance(records, list)
        and all(r.get("healed") for r in records)
    )
    return summary


def broker_errors(cluster: WeirCluster) -> dict[str, int]:
    """ERROR and CRITICAL log lines of every broker run, counted by message (numbers
    blanked, so one message about many partitions counts once)."""
    counted: Counter[str] = Counter()
    for node_id, broker in cluster.brokers.items():
        for path in sorted(broker.log_dir.glob("*.stderr")):
            for line in path.read_text(errors="replace").splitlines():
                match = ERROR_LINE.search(line)
                if match:
                    message = re.sub(r"\d+", "N", match.group(2))[:200]
                    counted[f"broker {node_id}: {message}"] += 1
    return dict(counted.most_common(30))


def drive(
    options: Options,
    base: Path,
    rng: random.Random,
    cluster: WeirCluster,
    lab: NetworkLab,
    disk: SmallDisk | None,
    clock: ClockShift | None,
) -> dict[str, object]:
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    cluster.wait_full_isr(TOPIC)
    records: list[dict[str, object]] = []
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        reader = stack.enter_context(ConcurrentReader(cluster.bootstrap, TOPIC, PARTITIONS))
        groups = None
        if options.group_protocols:
            groups = stack.enter_context(
                GroupLoad(
                    cluster.bootstrap,
                    TOPIC,
                    PARTITIONS,
                    base / "groups",
                    options.group_protocols,
                    options.group_members,
                    seed=options.seed,
                )
            )
        with ProduceLoad(cluster.bootstrap, TOPIC) as load:
            load.acked_since(200, timeout_s=30)
            if groups is not None:
                groups.wait_committed(GROUP_START_S)  # every group consuming first
            faults = Faults(cluster, lab, load, rng, disk, clock)
            for index in _fault_indexes(options, started):
                if options.order == "cycle":
                    kind = options.kinds[index % len(options.kinds)]
                else:
                    kind = rng.choice(options.kinds)
                record = run_fault(kind, faults)
                shown = {k: v for k, v in record.items() if not k.endswith("_at")}
                print(f"fault {index + 1}: {json.dumps(shown)}", flush=True)
                records.append(record)
                time.sleep(rng.uniform(1, 3))  # apart, so the measures do not overlap
        if groups is not None:
            groups.stop_chaos()
        time.sleep(1)
        bootstrap = ",".join(b.bootstrap for b in cluster.running())
        final = read_everything(bootstrap, TOPIC, PARTITIONS)
        anomalies = check(load.acks, load.sent, final, reader.reads)
        for record in records:
            measure(record, load.acks)
        group_summary = None
        if groups is not None:
            ends = {p: items[-1][0] + 1 if items else 0 for p, items in final.items()}
            group_summary = check_groups(groups, ends, list(load.acks.acked), records)
    for record in records:
        for key in [k for k in record if k.endswith("_at")]:
            del record[key]
    summary: dict[str, object] = {
        "seed": options.seed,
        "etcd_members": options.etcd_members,
        "kinds": options.kinds,
        "duration_s": round(time.monotonic() - started, 1),
        "faults": records,
        "faults_by_kind": dict(Counter(str(r["kind"]) for r in records)),
        "acknowledged": anomalies.acknowledged_count,
        "read_back": anomalies.read_count,
        "reads_during_run": len(reader.reads),
        "anomalies": {
            "lost": len(anomalies.lost),
            "duplicated": len(anomalies.duplicated),
            "reordered": len(anomalies.reordered),
            "offset_mismatch": len(anomalies.offset_mismatch),
            "vanished": len(anomalies.vanished),
            "unexpected": len(anomalies.unexpected),
            "failed": len(anomalies.failed),
        },
        "anomaly_examples": anomalies.summary() if not anomalies.ok else None,
        "history_ok": anomalies.ok,
        "by_kind": summarize_by_kind(records),
        # As before this change: kill and controller faults, to the first
        # acknowledged write on every partition the killed broker led.
        "failover_s": spread(
            [_number(r.get("failover_s")) for r in records if r["kind"] in ("kill", "controller")]
        ),
    }
    if group_summary is not None:
        summary["groups"] = group_summary
        summary["groups_ok"] = all(g["ok"] for g in group_summary.values())
    return summary


def _fault_indexes(options: Options, started: float) -> Iterator[int]:
    index = 0
    while True:
        if options.duration_s is not None:
            if time.monotonic() - started >= options.duration_s:
                return
        elif index >= options.faults:
            return
        yield index
        index += 1


def check_groups(
    groups: GroupLoad,
    ends: Mapping[int, int],
    acknowledged: Sequence[str],
    records: Sequence[dict[str, object]],
) -> dict[str, dict[str, object]]:
    caught_up_s = groups.wait_caught_up(ends, GROUP_CATCH_UP_S)  # group: s or None
    logs = groups.logs()
    samples = groups.samples
    measure_groups(records, logs)
    result: dict[str, dict[str, object]] = {}
    for group, protocol in groups.groups.items():
        log = logs[group]
        missing = unconsumed(acknowledged, log.consumed)
        sampled = sample_regressions(samples[group])
        committed = commit_regressions(log.commits)
        result[group] = {
            "protocol": protocol,
            "sampler_restarts": groups.sampler_restarts,
            "member_kills": sum(m.kills for m in groups.members if m.group == group),
            "consumed_values": len(log.consumed),
            "commits": len(log.commits),
            "commit_errors": log.commit_errors,
            "committed_at_end": dict(samples[group][-1][1]) if samples[group] else {},
            "high_watermarks": dict(ends),
            "caught_up_s": _rounded(caught_up_s[group]),
            "unconsumed": len(missing),
            "unconsumed_examples": missing[:5],
            "sampled_offset_regressions": len(sampled),
            "commit_regressions": len(committed),
            "regression_examples": [vars(r) for r in (sampled + committed)[:5]],
            "ok": not missing and not sampled and not committed,
        }
    return result


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C, so namespaces, mounts and processes are cleaned up."""
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=20)
    parser.add_argument(
        "--duration-minutes", type=float, default=None,
        help="draw faults until this much time has passed (instead of --faults)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--etcd-members", type=int, choices=(1, 3), default=1)
    parser.add_argument(
        "--kinds", default=None,
        help=f"comma-separated fault kinds (default: all the etcd size allows): "
        f"{', '.join(FAULT_KINDS)}",
    )  # fmt: skip
    parser.add_argument(
        "--groups", default=",".join(PROTOCOLS),
        help="consumer groups to run, one per protocol: classic, consumer; 'none' for none",
    )  # fmt: skip
    parser.add_argument("--group-members", type=int, default=2)
    parser.add_argument(
        "--order", choices=("random", "cycle"), default="random",
        help="draw each fault's kind at random, or take the kinds in turn (a short "
        "run that tries every kind)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--work-dir", type=Path, default=None,
        help="keep the brokers' data and logs, etcd's and the group members' logs here "
        "(default: a temporary directory, removed at the end)",
    )  # fmt: skip
    args = parser.parse_args()
    protocols = [] if args.groups == "none" else [p for p in args.groups.split(",") if p]
    if any(p not in PROTOCOLS for p in protocols):
        raise SystemExit(f"--groups: one or more of {', '.join(PROTOCOLS)}, or none")
    options = Options(
        faults=args.faults,
        duration_s=args.duration_minutes * 60 if args.duration_minutes is not None else None,
        seed=args.seed,
        etcd_members=args.etcd_members,
        kinds=kinds_for(args.kinds.split(",") if args.kinds else None, args.etcd_members),
        group_protocols=protocols,
        group_members=args.group_members,
        order=args.order,
    )
    if set(options.kinds) & set(DISK_KINDS):
        enter_private_mount_namespace()  # before any thread: the disk is ours alone
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        summary = run(options, args.work_dir.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="weir-fault-run-") as tmp:
            summary = run(options, Path(tmp))
    text = json.dumps(summary, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
