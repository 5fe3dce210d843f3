"""Consumer groups under faults, for the fault run: member processes that record what
they consume and commit, killed and restarted at random, and the group checker.

A member (`python -m compat_tests.group_load member BOOTSTRAP TOPIC GROUP PROTOCOL OUT`,
PROTOCOL `consumer` for KIP-848 or `classic`) consumes in batches until killed; for
each batch it first appends every record to OUT as `r PARTITION OFFSET VALUE` (line
flushed to the kernel, so a SIGKILL loses none), then commits the next offsets
synchronously and appends `c START END P:O,P:O` (wall-clock seconds when the commit
was sent and when it was acknowledged); a failed commit appends `e TIME ERROR`.
At-least-once: nothing is committed before it is recorded. With WEIR_GROUP_MEMBER_DEBUG set
(librdkafka debug contexts, e.g. `cgrp`), members log their group protocol to their
stderr files.

`GroupLoad` runs the members of one or more groups, kills one with SIGKILL at random
intervals and starts it again, and samples every group's committed offsets twice a
second (`python -m compat_tests.group_load sampler ...`, restarted if it dies).
The checker then reports, per group:

- offset regressions: a committed offset (as the coordinator answered it) lower than
  one it answered before, or a member's acknowledged commit lower than an earlier
  acknowledged commit of the group (a commit that was lost or rolled back);
- unconsumed: acknowledged writes no member of the group ever recorded;
- per fault, the time from the fault to the first acknowledged commit that was sent
  after it (`first_commit_after`).
"""

from __future__ import annotations

import functools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from compat_tests.harness import _prepare_child

SAMPLE_INTERVAL_S = 0.5
ADMIN_TIMEOUT_S = 5.0
BATCH_MAX = 500
PROTOCOLS = ("classic", "consumer")
# Set to librdkafka debug contexts (e.g. "cgrp") to log the members' group protocol.
MEMBER_DEBUG_ENV = "WEIR_GROUP_MEMBER_DEBUG"


# -- the member process -----------------------------------------------------------------


# The brokers' KIP-848 session settings for the fault run: the same 6 s session and
# 0.5 s heartbeat as the classic members ask for themselves (below). With Kafka's
# default 45 s session, a SIGKILLed member keeps its partitions until a coordinator
# has not moved for 45 s: every coordinator that loads the group starts its members'
# sessions afresh (as Kafka's does), and under the run's faults the offsets
# partition's leader moves every 10-40 s, so a dead member was never fenced.
CONSUMER_GROUP_BROKER_SETTINGS = """\
group_consumer_session_timeout_ms = 6000
group_consumer_min_session_timeout_ms = 6000
group_consumer_heartbeat_interval_ms = 500
group_consumer_min_heartbeat_interval_ms = 500
"""


def group_consumer_config(bootstrap: str, group_id: str, protocol: str) -> dict[str, object]:
    """A group member committing by hand from the earliest offset: KIP-848 with
    `protocol` "consumer", else classic with a 6 s session (failover tests)."""
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config |= {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    return config


def member_main(argv: Sequence[str]) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    bootstrap, topic, group_id, protocol, out_path = argv
    config = group_consumer_config(bootstrap, group_id, protocol)
    if os.environ.get(MEMBER_DEBUG_ENV):  # librdkafka's debug contexts, to the stderr file
        config["debug"] = os.environ[MEMBER_DEBUG_ENV]
    consumer = Consumer(config)
    consumer.subscribe([topic])
    with open(out_path, "a") as out:
        while True:
            messages = [m for m in consumer.consume(BATCH_MAX, 0.2) if m.error() is None]
            if not messages:
                continue
            next_offsets: dict[int, int] = {}
            for message in messages:
                value = (message.value() or b"").decode()
                partition, offset = message.partition() or 0, message.offset() or 0
                out.write(f"r {partition} {offset} {value}\n")
                next_offsets[partition] = offset + 1
            out.flush()
            started = time.time()
            try:
                consumer.commit(
                    offsets=[TopicPartition(topic, p, o) for p, o in next_offsets.items()],
                    asynchronous=False,
                )
            except KafkaException as exc:
                out.write(f"e {time.time():.3f} {exc.args[0]}\n".replace("\n", " ") + "\n")
                out.flush()
                continue
            committed = ",".join(f"{p}:{o}" for p, o in sorted(next_offsets.items()))
            out.write(f"c {started:.3f} {time.time():.3f} {committed}\n")
            out.flush()


def sampler_main(argv: Sequence[str]) -> None:
    """Every SAMPLE_INTERVAL_S, each group's committed offsets as its coordinator
    answers OffsetFetch (a consumer that never joins: `committed()`), appended to
    OUT as `s WALL GROUP P:O,P:O` (-1: nothing committed)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    bootstrap, topic, partitions, out_path, *groups = argv
    consumers = {
        group: Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        for group in groups
    }
    wanted = [TopicPartition(topic, p) for p in range(int(partitions))]
    with open(out_path, "a") as out:
        while True:
            for group, consumer in consumers.items():
                try:
                    answer = consumer.committed(wanted, timeout=ADMIN_TIMEOUT_S)
                except KafkaException:
                    continue  # no coordinator now: no sample
                if any(tp.error is not None for tp in answer):
                    continue
                offsets = ",".join(f"{tp.partition}:{tp.offset}" for tp in answer)
                out.write(f"s {time.time():.3f} {group} {offsets}\n")
                out.flush()
            time.sleep(SAMPLE_INTERVAL_S)  # a sample rate, not a wait for an event


def parse_samples(lines: Iterable[str]) -> dict[str, list[tuple[float, dict[int, int]]]]:
    """The sampler's OUT file, by group, in order."""
    samples: dict[str, list[tuple[float, dict[int, int]]]] = {}
    for line in lines:
        parts = line.split()
        if not line.endswith("\n") or len(parts) != 4 or parts[0] != "s":
            continue
        offsets = {int(p): int(o) for p, o in (item.split(":") for item in parts[3].split(","))}
        samples.setdefault(parts[2], []).append((float(parts[1]), offsets))
    return samples


# -- what the members wrote -------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    sent_s: float  # wall clock
    acked_s: float
    offsets: tuple[tuple[int, int], ...]  # (partition, next offset)


@dataclass
class MemberLog:
    consumed: set[str] = field(default_factory=set)
    commits: list[Commit] = field(default_factory=list)
    commit_errors: int = 0


def parse_member_log(lines: Iterable[str]) -> MemberLog:
    """A member's OUT file; a torn last line (SIGKILL mid-write) is skipped."""
    log = MemberLog()
    for line in lines:
        if not line.endswith("\n"):
            continue
        parts = line.split()
        if len(parts) == 4 and parts[0] == "r":
            log.consumed.add(parts[3])
        elif len(parts) == 4 and parts[0] == "c":
            offsets = tuple(
                (int(p), int(o)) for p, o in (item.split(":") for item in parts[3].split(","))
            )
            log.commits.append(Commit(float(parts[1]), float(parts[2]), offsets))
        elif parts and parts[0] == "e":
            log.commit_errors += 1
    return log


# -- the checks (pure) ------------------------------------------------------------------


@dataclass(frozen=True)
class Regression:
    partition: int
    at_s: float  # wall clock of the lower value
    before: int
    after: int


def sample_regressions(samples: Sequence[tuple[float, Mapping[int, int]]]) -> list[Regression]:
    """Committed offsets (wall time, {partition: offset}) in the order they were read:
    every one lower than the highest read before it for that partition (-1, none
    committed, after a value counts: the commit vanished)."""
    highest: dict[int, int] = {}
    found = []
    for at_s, offsets in samples:
        for partition, offset in offsets.items():
            before = highest.get(partition)
            if before is None and offset < 0:
                continue  # nothing committed yet
            if before is not None and offset < before:
                found.append(Regression(partition, at_s, before, offset))
            highest[partition] = max(offset, before if before is not None else offset)
    return found


def commit_regressions(commits: Iterable[Commit]) -> list[Regression]:
    """Acknowledged commits of one group's members: one sent after another commit of
    the same partition was acknowledged, yet committing a lower offset (the group
    went back: it was handed an older committed offset than it had)."""
    ordered = sorted(commits, key=lambda c: c.acked_s)
    highest_by_ack: list[dict[int, int]] = []  # the highest offsets after each ack
    highest: dict[int, int] = {}
    for commit in ordered:
        for partition, offset in commit.offsets:
            highest[partition] = max(highest.get(partition, offset), offset)
        highest_by_ack.append(dict(highest))
    times = [c.acked_s for c in ordered]
    found = []
    for commit in ordered:
        index = _last_before(times, commit.sent_s)
        if index < 0:
            continue
        known = highest_by_ack[index]
        for partition, offset in commit.offsets:
            if partition in known and offset < known[partition]:
                found.append(Regression(partition, commit.acked_s, known[partition], offset))
    return found


def _last_before(times: Sequence[float], at_s: float) -> int:
    """Index of the last of the sorted `times` strictly before `at_s`, or -1."""
    low, high = 0, len(times)
    while low < high:
        middle = (low + high) // 2
        if times[middle] < at_s:
            low = middle + 1
        else:
            high = middle
    return low - 1


def unconsumed(acknowledged: Iterable[str], consumed: set[str]) -> list[str]:
    """Acknowledged values the group never consumed, in write order."""
    missing = [value for value in acknowledged if value not in consumed]
    return sorted(missing, key=lambda v: int(v.split("-", 1)[1]) if "-" in v else 0)


def first_commit_after(commits: Iterable[Commit], at_s: float) -> float | None:
    """Seconds from `at_s` to the first acknowledged commit sent at or after it."""
    after = [c.acked_s for c in commits if c.sent_s >= at_s]
    return min(after) - at_s if after else None


# -- running the members ----------------------------------------------------------------


@dataclass
class Member:
    group: str
    protocol: str
    out_path: Path
    process: subprocess.Popen[bytes] | None = None
    kills: int = 0


class GroupLoad:
    """The members of one group per protocol, each with `members` processes."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        work_dir: Path,
        protocols: Sequence[str],
        members: int = 2,
        kill_interval_s: tuple[float, float] = (8.0, 20.0),
        seed: int = 0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        self.groups = {f"fault-run-{protocol}": protocol for protocol in protocols}
        self.members = [
            Member(group, protocol, work_dir / f"{group}-{index}.log")
            for group, protocol in self.groups.items()
            for index in range(members)
        ]
        self.samples_path = work_dir / "committed-samples.log"
        self.sampler: subprocess.Popen[bytes] | None = None
        self.sampler_restarts = 0
        self.kills: list[tuple[float, str]] = []  # (wall clock, member log name)
        self._kill_interval_s = kill_interval_s
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._chaos_stop = threading.Event()
        self._chaos_done = threading.Event()  # the last killed member is back
        self._threads = [
            threading.Thread(target=self._supervise_sampler, daemon=True),
            threading.Thread(target=self._chaos, daemon=True),
        ]

    def __enter__(self) -> GroupLoad:
        for member in self.members:
            self._start(member)
        self._start_sampler()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._chaos_stop.set()
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(15)
        for process in [m.process for m in self.members] + [self.sampler]:
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def _start(self, member: Member) -> None:
        arguments = [self.bootstrap, self.topic, member.group, member.protocol]
        member.process = self._spawn("member", [*arguments, str(member.out_path)])

    def _start_sampler(self) -> None:
        arguments = [self.bootstrap, self.topic, str(self.partitions), str(self.samples_path)]
        self.sampler = self._spawn("sampler", [*arguments, *self.groups])

    def _spawn(self, role: str, arguments: Sequence[str]) -> subprocess.Popen[bytes]:
        """A member or the sampler: its own process, so a client library that aborts
        (librdkafka asserts under some broker failures) takes only itself down."""
        with open(self.work_dir / f"{role}.stderr", "ab") as errors:
            return subprocess.Popen(
                [sys.executable, "-m", "compat_tests.group_load", role, *arguments],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                preexec_fn=functools.partial(_prepare_child, None),
            )

    def _supervise_sampler(self) -> None:
        while not self._stop.wait(1.0):
            if self.sampler is not None and self.sampler.poll() is not None:
                self.sampler_restarts += 1
                self._start_sampler()

    @property
    def samples(self) -> dict[str, list[tuple[float, dict[int, int]]]]:
        """Every group's sampled committed offsets, in order."""
        if not self.samples_path.exists():
            return {group: [] for group in self.groups}
        with open(self.samples_path) as lines:
            found = parse_samples(lines)
        return {group: found.get(group, []) for group in self.groups}

    def stop_chaos(self) -> None:
        """No more kills; a member killed last is started again before this returns."""
        self._chaos_stop.set()
        self._chaos_done.wait(15)

    def _chaos(self) -> None:
        while not self._chaos_stop.wait(self._rng.uniform(*self._kill_interval_s)):
            member = self._rng.choice(self.members)
            assert member.process is not None
            member.process.send_signal(signal.SIGKILL)
            member.process.wait()
            member.kills += 1
            self.kills.append((time.time(), member.out_path.name))
            time.sleep(self._rng.uniform(1.0, 3.0))  # down for a moment, then back
            self._start(member)
        self._chaos_done.set()
        # Members this thread started die with it (PR_SET_PDEATHSIG follows the
        # parent *thread*): it lives until the load ends, so they consume until then.
        self._stop.wait()

    def committed(self, group: str) -> dict[int, int]:
        """The latest sampled committed offsets of `group`."""
        samples = self.samples[group]
        return dict(samples[-1][1]) if samples else {}

    def committed_all(self) -> dict[str, dict[int, int]]:
        """The latest sampled committed offsets of every group."""
        return {group: dict(s[-1][1]) if s else {} for group, s in self.samples.items()}

    def logs(self) -> dict[str, MemberLog]:
        """Every group's members' records and commits, merged per group."""
        merged = {group: MemberLog() for group in self.groups}
        for member in self.members:
            if not member.out_path.exists():
                continue
            with open(member.out_path) as lines:
                log = parse_member_log(lines)
            into = merged[member.group]
            into.consumed |= log.consumed
            into.commits += log.commits
            into.commit_errors += log.commit_errors
        return merged

    def wait_committed(self, timeout_s: float) -> None:
        """Until every group has committed some offset (its members joined and
        consume), at most `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            latest = self.committed_all()
            if all(any(o >= 0 for o in offsets.values()) for offsets in latest.values()):
                return
            time.sleep(SAMPLE_INTERVAL_S)  # the sampler's progress

    def wait_caught_up(self, ends: Mapping[int, int], timeout_s: float) -> dict[str, float | None]:
        """Per group, seconds until its committed offsets reached `ends` (partition:
        high watermark); None for a group that did not within `timeout_s`."""
        started = time.monotonic()
        deadline = started + timeout_s
        caught_up: dict[str, float | None] = {group: None for group in self.groups}
        while time.monotonic() < deadline and None in caught_up.values():
            for group, offsets in self.committed_all().items():
                if caught_up[group] is None and all(
                    offsets.get(p, -1) >= end for p, end in ends.items()
                ):
                    caught_up[group] = time.monotonic() - started
            time.sleep(SAMPLE_INTERVAL_S)  # the sampler's progress
        return caught_up


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.argv[1] == "sampler":
        sampler_main(sys.argv[2:])
    else:
        member_main(sys.argv[2:])
