"""A randomized run of a share group (a queue) under faults, against a real three-broker
cluster, checked by the queue history checker (compat_tests/share_history.py).

    .venv/bin/python -m compat_tests.queue_fault_run [--faults 20 | --duration-minutes 10]
        [--seed 1] [--consumers 4] [--kinds consumer,leader,coordinator,pause]
        [--sequence consumer,leader,...] [--work-dir DIR] [--out queue-fault-run.json]

A source topic (`--partitions`, default 4, at most `--consumers` so that every
partition is shared by two consumers or more and the slow one never has a partition
to itself; replication factor 3, min.insync.replicas 2) and its group's dead-letter
topic `dlq.…` (its replica lists rotated by one broker, so that each dead-letter
partition is led by another broker than its source partition: every dead letter is
written across brokers, `weir/broker/coordinators/dead_letter_destinations.py`), a
share group with 3 s locks, a delivery count limit of 4, dead letters with
the records copied, `weir.*` record headers honoured and a 100-1000 ms release
backoff. An idempotent acks=all producer thread writes records whose value names
their fate (`FATES`): accepted, released once then accepted, rejected, released
every time (the delivery limit), delayed by a header, given a short TTL (delivered
in time or expired), or given a TTL shorter than their delay (always expired).
`--consumers` confluent-kafka share consumers run as processes
(compat_tests/share_clients/python_consumer.py, acting by the value's fate through
`DriverSpec.value_actions`), restarted when one exits, plus one slow consumer whose
pause before acknowledging exceeds the lock (its acknowledgements come late: lock
expiry). A thread tails the dead-letter topic.

Faults, one at a time, drawn at random:

- consumer: SIGKILL a consumer process (a `killed` event), start a replacement;
- leader: SIGKILL the leader of a source partition, restart it 1-4 s after the
  partition moved;
- coordinator: SIGKILL the leader of a source partition's `__share_group_state`
  partition (the share coordinator of its key), restart it likewise;
- pause: SIGSTOP a broker for 4-7 s (past its 3 s session), then SIGCONT.

Killing or pausing a broker emits a `failover` event for every source partition it
led (the checker ends the holdings open then). Each fault is followed by healing
(every broker running; the source, dead-letter and `__share_group_state` topics in
full ISR; leadership handed back to the preferred replicas, which is a failover of
each partition that moves, also emitted; automatic rebalancing is off so that no
leadership moves unannounced, and a watcher notes any that does) and a check that
records are accepted again within `PROGRESS_TIMEOUT_S` (else a stall is noted).

At the end the producer stops, the consumers drain until every produced record is
accepted or dead-lettered (or `DRAIN_TIMEOUT_S`), then are killed; a fresh consumer
of the group runs for longer than a lock (`drain_empty`: it got nothing), the
dead-letter topic is read to its end, and the checker runs. The JSON summary (also
written to --out): faults by kind, records by fate and resolution, dead letters by
reason, the checker's violations (count and examples), stalls, unhealed faults,
broker tracebacks. Exit code 0 only with none of those.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ElectionType,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat_tests.cluster_harness import TEST_CLUSTER_SETTINGS, WeirCluster, running_cluster
from compat_tests.share_clients.driver_spec import DriverSpec
from compat_tests.share_clients.scenarios import DriverProcess
from compat_tests.share_history import (
    DeadLetterSeen,
    HistoryReport,
    ProducedRecord,
    check_share_history,
    record_key,
)
from weir.broker.coordinators.share_state_service import ShareKey, share_state_partition
from weir.controller.controller import SHARE_GROUP_STATE_TOPIC_NAME
from weir.sharecoord.dead_letter_records import parse_dead_letter

KINDS = ("consumer", "leader", "coordinator", "pause")
SETTINGS = (
    TEST_CLUSTER_SETTINGS
    + """\
group_share_min_record_lock_duration_ms = 1000
group_share_min_session_timeout_ms = 6000
group_share_min_heartbeat_interval_ms = 500
auto_leader_rebalance_enable = false
"""
)
PARTITIONS = 4  # the default; fewer than the consumers (slow one included)
STATE_PARTITIONS = 50  # the broker's default __share_group_state partition count
LOCK_MS = 3000
DELIVERY_LIMIT = 4
RELEASE_BACKOFF_INITIAL_MS = 100
RELEASE_BACKOFF_MAX_MS = 1000
SLOW_PAUSE_MS = LOCK_MS + 1500
# fate -> (weight, the consumers' actions on a consumer's 1st, 2nd... sighting)
FATES: dict[str, tuple[int, list[str]]] = {
    "accept": (40, ["ACCEPT"]),
    "release1": (14, ["RELEASE", "ACCEPT"]),
    "reject": (10, ["REJECT"]),
    "releaseall": (4, ["RELEASE"]),
    "delay": (12, ["ACCEPT"]),  # weir.delay.ms 500-3000
    "ttl": (12, ["ACCEPT"]),  # weir.ttl.ms 200-2000: in time, or expired
    "expire": (8, ["ACCEPT"]),  # weir.ttl.ms 300 behind weir.delay.ms 1500: expired
}
PRODUCE_RATE_PER_S = 30
HEAL_TIMEOUT_S = 90.0
PROGRESS_TIMEOUT_S = 60.0
PROGRESS_ACCEPTS = 5
DRAIN_TIMEOUT_S = 120.0
DRAIN_QUIET_S = 30.0
FINAL_DRAIN_MS = LOCK_MS + 4000
WATCH_INTERVAL_S = 0.3
CONSUMER_DEADLINE_MS = 24 * 3600 * 1000


def now_ms() -> int:
    return int(time.time() * 1000)


# -- the history ------------------------------------------------------------------------


@dataclass
class RunLog:
    """What the run knows, from every thread."""

    produced: dict[str, tuple[str, ProducedRecord]] = field(default_factory=dict)
    produce_errors: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # killed, failover
    letters: list[DeadLetterSeen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_event(self, event: dict[str, Any]) -> None:
        with self.lock:
            self.events.append(event)

    def failovers(self, partitions: list[int], t_ms: int, why: str) -> None:
        for partition in partitions:
            self.add_event({"event": "failover", "partition": partition, "t_ms": t_ms, "why": why})


class ProduceLoad:
    """An idempotent acks=all producer thread writing records whose values name their
    fate, round-robin over the partitions at a steady rate."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, log: RunLog, rng: random.Random
    ) -> None:
        self.partitions = partitions
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        self.topic, self.log, self.rng = topic, log, rng
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0
        names = list(FATES)
        self._fates = names, [FATES[name][0] for name in names]

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self._produce_one()
            self.producer.poll(0)
            time.sleep(1 / PRODUCE_RATE_PER_S)  # the load's pace: nothing to wait on
        self.producer.flush(60)

    def _produce_one(self) -> None:
        fate = self.rng.choices(*self._fates)[0]
        value = f"{fate}/{self.sent}"
        delay_ms = ttl_ms = None
        if fate == "delay":
            delay_ms = self.rng.randint(500, 3000)
        elif fate == "ttl":
            ttl_ms = self.rng.randint(200, 2000)
        elif fate == "expire":
            delay_ms, ttl_ms = 1500, 300
        headers: list[tuple[str, str | bytes | None]] = []
        if delay_ms is not None:
            headers.append(("weir.delay.ms", str(delay_ms).encode()))
        if ttl_ms is not None:
            headers.append(("weir.ttl.ms", str(ttl_ms).encode()))

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                with self.log.lock:
                    self.log.produce_errors.append(f"{value}: {error}")
                return
            key = record_key(message.partition(), message.offset())
            record = ProducedRecord(message.timestamp()[1], delay_ms, ttl_ms)
            with self.log.lock:
                self.log.produced[key] = (value, record)

        self.producer.produce(
            self.topic, value.encode(), partition=self.sent % self.partitions, headers=headers,
            on_delivery=delivered,
        )  # fmt: skip
        self.sent += 1

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=90)
        assert not self.thread.is_alive(), "the producer did not flush"


class DeadLetterTail:
    """A thread reading the dead-letter topic from the beginning, parsing each record."""

    def __init__(self, bootstrap: str, queue: Queue, log: RunLog) -> None:
        dlq, self.partitions = queue.dlq, queue.partitions
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"dlq-tail-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            }
        )
        self.consumer.assign(
            [TopicPartition(dlq, p, OFFSET_BEGINNING) for p in range(self.partitions)]
        )
        self.dlq, self.group, self.source, self.log = dlq, queue.group, queue.source, log
        self.positions = dict.fromkeys(range(self.partitions), 0)
        self.foreign = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self._read_one()

    def _read_one(self) -> None:
        try:
            message = self.consumer.poll(0.2)
        except KafkaException:
            return
        if message is None or message.error() is not None:
            return
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None
        self.positions[partition] = offset + 1
        raw = message.headers() or []
        pairs = list(raw.items()) if isinstance(raw, dict) else raw
        headers = [(name, _bytes(value)) for name, value in pairs]
        letter = parse_dead_letter(headers)
        if letter is None or letter.group_id != self.group or letter.topic != self.source:
            self.foreign += 1
            return
        reason = letter.reason
        seen = DeadLetterSeen(
            record_key(letter.partition, letter.offset),
            letter.delivery_count,
            None if reason is None else reason.name,
        )
        with self.log.lock:
            self.log.letters.append(seen)

    def read_to_end(self, timeout_s: float) -> None:
        """Stops the thread, then reads on (on this thread: a client used by one thread
        at a time) until every partition was read to its current end, and closes."""
        self.stop.set()
        self.thread.join(timeout=10)
        deadline = time.monotonic() + timeout_s
        ends: dict[int, int] = {}
        while time.monotonic() < deadline and len(ends) < self.partitions:
            try:
                for p in range(self.partitions):
                    _, ends[p] = self.consumer.get_watermark_offsets(
                        TopicPartition(self.dlq, p), timeout=5, cached=False
                    )
            except KafkaException:
                time.sleep(0.5)
        while time.monotonic() < deadline and any(self.positions[p] < ends[p] for p in ends):
            self._read_one()
        self.consumer.close()


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


class ConsumerPool:
    """The share-consumer driver processes, each restarted (with a new client id) when
    it exits; `kill` SIGKILLs one and records a `killed` event."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, log: RunLog, count: int, log_dir: Path
    ) -> None:
        self.bootstrap, self.group, self.topic, self.log = bootstrap, group, topic, log
        self.log_dir = log_dir
        self.slots: list[DriverProcess | None] = [None] * (count + 1)  # the last is slow
        self.retired: list[DriverProcess] = []
        self.launches = 0
        self.exits = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._supervise, daemon=True)

    def spec(self, client_id: str, *, slow: bool = False, deadline_ms: int = 0) -> DriverSpec:
        return DriverSpec(
            bootstrap=self.bootstrap,
            group=self.group,
            topics=[self.topic],
            client_id=client_id,
            value_actions={fate: actions for fate, (_, actions) in FATES.items()},
            pause_ms=SLOW_PAUSE_MS if slow else 0,
            max_poll_records=3 if slow else 50,
            idle_ms=CONSUMER_DEADLINE_MS,
            deadline_ms=deadline_ms or CONSUMER_DEADLINE_MS,
            poll_ms=500,
        )

    def _launch(self, slot: int) -> None:
        slow = slot == len(self.slots) - 1
        client_id = f"{'slow' if slow else 'c' + str(slot)}-{self.launches}"
        self.launches += 1
        self.slots[slot] = DriverProcess("python", self.spec(client_id, slow=slow), self.log_dir)

    def start(self) -> None:
        with self.lock:
            for slot in range(len(self.slots)):
                self._launch(slot)
        self.thread.start()

    def _supervise(self) -> None:
        while not self.stop.wait(0.5):
            with self.lock:
                for slot, driver in enumerate(self.slots):
                    if driver is not None and driver.proc.poll() is not None:
                        self.exits += 1
                        self.retired.append(driver)
                        self._launch(slot)

    def kill(self, rng: random.Random) -> str:
        with self.lock:
            slot = rng.randrange(len(self.slots))
            driver = self.slots[slot]
            assert driver is not None
            killed_ms = now_ms()
            driver.kill()
            self.log.add_event(
                {"event": "killed", "consumer": driver.spec.client_id, "t_ms": killed_ms}
            )
            self.retired.append(driver)
            self._launch(slot)
            return f"killed consumer {driver.spec.client_id}"

    def accepts(self) -> int:
        """Acknowledgements answered without error so far (a measure of progress)."""
        return sum(
            len(e.get("offsets") or [])
            for e in self.all_events()
            if e["event"] == "ack_result" and e.get("error") is None
        )

    def all_events(self) -> list[dict[str, Any]]:
        """The events of every consumer so far, running or not."""
        with self.lock:
            drivers = [*self.retired, *(d for d in self.slots if d is not None)]
        return [e for d in drivers for e in d.snapshot()]

    def close(self) -> None:
        """SIGKILLs every consumer (each a `killed` event)."""
        self.stop.set()
        self.thread.join(timeout=10)
        with self.lock:
            for driver in self.slots:
                if driver is not None:
                    killed_ms = now_ms()
                    driver.kill()
                    self.log.add_event(
                        {"event": "killed", "consumer": driver.spec.client_id, "t_ms": killed_ms}
                    )
                    self.retired.append(driver)
            self.slots = [None] * len(self.slots)

    def events(self) -> list[dict[str, Any]]:
        with self.lock:
            return [e for d in self.retired for e in d.snapshot()]


class LeaderWatch:
    """Notes leadership changes of the source partitions outside the faults (none are
    expected: automatic rebalancing is off); each is a `failover` event when seen."""

    def __init__(self, cluster: WeirCluster, topic: str, log: RunLog) -> None:
        self.cluster, self.topic, self.log = cluster, topic, log
        self.lock = threading.Lock()
        self.quiet = False  # outside faults
        self.generation = 0  # a fault's start or end: a look begun before is dropped
        self.leaders: dict[int, int] = {}
        self.unannounced: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.resume()
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(WATCH_INTERVAL_S):
            with self.lock:
                generation, quiet = self.generation, self.quiet
            if not quiet:
                continue
            try:
                seen = leaders(self.cluster, self.topic)
            except Exception:  # noqa: BLE001 - a broker may be down: look again
                continue
            with self.lock:
                if generation != self.generation:
                    continue
                moved = [p for p, leader in seen.items() if self.leaders.get(p) != leader]
                if moved:
                    self.log.failovers(moved, now_ms(), "watch")
                    self.unannounced.append(f"{moved} to {[seen[p] for p in moved]}")
                self.leaders = seen

    def fault(self) -> None:
        with self.lock:
            self.quiet = False
            self.generation += 1

    def resume(self) -> None:
        seen = leaders(self.cluster, self.topic)
        with self.lock:
            self.leaders, self.quiet = seen, True
            self.generation += 1


# -- the cluster ------------------------------------------------------------------------


def topic_id(cluster: WeirCluster, topic: str) -> uuid.UUID:
    admin = cluster.admin()
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=10)
    raw = described.topic_id
    high = raw.get_most_significant_bits() & (2**64 - 1)
    low = raw.get_least_significant_bits() & (2**64 - 1)
    return uuid.UUID(int=(high << 64) | low)


def leaders(cluster: WeirCluster, topic: str) -> dict[int, int]:
    return {p: int(meta.leader) for p, meta in cluster.partitions(topic).items()}


def replica_lists(brokers: list[int], partitions: int, shift: int = 0) -> list[list[int]]:
    """Partition p's replicas, its preferred leader rotating over the brokers (from the
    `shift`-th one)."""
    count = len(brokers)
    return [[brokers[(p + shift + i) % count] for i in range(count)] for p in range(partitions)]


# The dead-letter topic's replica lists are the source's rotated by this: each
# dead-letter partition is led by another broker than its source partition.
DLQ_SHIFT = 1


def create_topics(cluster: WeirCluster, queue: Queue) -> None:
    source, dlq, partitions = queue.source, queue.dlq, queue.partitions
    brokers = sorted(cluster.brokers)
    topics = [
        NewTopic(
            source,
            partitions,
            replica_assignment=replica_lists(brokers, partitions),
            config={"min.insync.replicas": "2"},
        ),
        NewTopic(
            dlq,
            partitions,
            replica_assignment=replica_lists(brokers, partitions, DLQ_SHIFT),
            config={"min.insync.replicas": "2", "errors.deadletterqueue.group.enable": "true"},
        ),
    ]
    admin = cluster.admin()
    for future in admin.create_topics(topics, operation_timeout=10, request_timeout=15).values():
        future.result(timeout=20)
    for topic in (source, dlq):
        cluster.wait_full_isr(topic)


def set_group_configs(cluster: WeirCluster, group: str, dlq: str) -> None:
    configs = {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": str(LOCK_MS),
        "share.delivery.count.limit": str(DELIVERY_LIMIT),
        "share.session.timeout.ms": "6000",
        "share.heartbeat.interval.ms": "500",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.copy.record.enable": "true",
        "weir.share.record.headers.enable": "true",
        "weir.share.release.backoff.initial.ms": str(RELEASE_BACKOFF_INITIAL_MS),
        "weir.share.release.backoff.max.ms": str(RELEASE_BACKOFF_MAX_MS),
    }
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()
        ],
    )
    admin = cluster.admin()
    admin.incremental_alter_configs([resource])[resource].result(timeout=20)


@dataclass
class Queue:
    """The run's topics and group."""

    source: str
    dlq: str
    group: str
    partitions: int
    topic_id: uuid.UUID | None = None

    def coordinator(self, cluster: WeirCluster, partition: int) -> int:
        assert self.topic_id is not None
        key = ShareKey(self.group, self.topic_id, partition)
        state_partition = share_state_partition(key, STATE_PARTITIONS)
        return cluster.leader_of(SHARE_GROUP_STATE_TOPIC_NAME, state_partition)


def kill_broker(cluster: WeirCluster, queue: Queue, log: RunLog, victim: int, why: str) -> None:
    """SIGKILLs `victim`, each source partition it led a failover."""
    led = [p for p, leader in leaders(cluster, queue.source).items() if leader == victim]
    killed_ms = now_ms()
    cluster.brokers[victim].kill()
    log.failovers(led, killed_ms, why)


def kill_and_restart(
    cluster: WeirCluster, queue: Queue, log: RunLog, victim: int, moved: Any, rng: random.Random
) -> None:
    kill_broker(cluster, queue, log, victim, "kill")
    cluster.wait_until(moved, HEAL_TIMEOUT_S, f"broker {victim}'s partitions moved")
    time.sleep(rng.uniform(1, 4))  # down a while after its partitions moved
    cluster.brokers[victim].start(ready_timeout_s=HEAL_TIMEOUT_S)


def inject(
    kind: str,
    cluster: WeirCluster,
    queue: Queue,
    log: RunLog,
    pool: ConsumerPool,
    rng: random.Random,
) -> str:
    """One fault and its end; returns what was done."""
    if kind == "consumer":
        return pool.kill(rng)
    if kind == "leader":
        partition = rng.randrange(queue.partitions)
        victim = cluster.leader_of(queue.source, partition)
        kill_and_restart(
            cluster, queue, log, victim,
            lambda: cluster.leader_of(queue.source, partition) not in (victim, -1), rng,
        )  # fmt: skip
        return f"killed broker {victim}, the leader of {queue.source}-{partition}"
    if kind == "coordinator":
        partition = rng.randrange(queue.partitions)
        victim = queue.coordinator(cluster, partition)
        kill_and_restart(
            cluster, queue, log, victim,
            lambda: queue.coordinator(cluster, partition) not in (victim, -1), rng,
        )  # fmt: skip
        return f"killed broker {victim}, the share coordinator of partition {partition}"
    if kind == "pause":
        victim = rng.choice(sorted(cluster.brokers))
        led = [p for p, leader in leaders(cluster, queue.source).items() if leader == victim]
        pause_s = rng.uniform(4, 7)
        paused_ms = now_ms()
        os.kill(cluster.brokers[victim].pid, signal.SIGSTOP)
        log.failovers(led, paused_ms, "pause")
        try:
            time.sleep(pause_s)
        finally:
            os.kill(cluster.brokers[victim].pid, signal.SIGCONT)
        return f"paused broker {victim} for {pause_s:.1f} s"
    raise AssertionError(kind)


def heal(cluster: WeirCluster, queue: Queue, log: RunLog) -> float:
    """Every broker running, every partition in full ISR, the source and dead-letter
    partitions led by their preferred replicas; returns the seconds taken."""
    started = time.monotonic()
    for broker in cluster.brokers.values():
        if not broker.is_running():
            broker.start(ready_timeout_s=HEAL_TIMEOUT_S)
    for topic in (queue.source, queue.dlq, SHARE_GROUP_STATE_TOPIC_NAME):
        cluster.wait_full_isr(topic, timeout_s=HEAL_TIMEOUT_S)
    brokers = sorted(cluster.brokers)
    preferred = {p: r[0] for p, r in enumerate(replica_lists(brokers, queue.partitions))}
    dlq_lists = replica_lists(brokers, queue.partitions, DLQ_SHIFT)
    dlq_preferred = {p: r[0] for p, r in enumerate(dlq_lists)}
    before = leaders(cluster, queue.source)
    if before != preferred or leaders(cluster, queue.dlq) != dlq_preferred:
        elect_preferred(cluster, queue)
        cluster.wait_until(
            lambda: (
                leaders(cluster, queue.source) == preferred
                and leaders(cluster, queue.dlq) == dlq_preferred
            ),
            HEAL_TIMEOUT_S,
            "the preferred replicas lead the source and dead-letter partitions",
        )
        log.failovers([p for p in before if before[p] != preferred[p]], now_ms(), "elect")
    return time.monotonic() - started


def elect_preferred(cluster: WeirCluster, queue: Queue) -> None:
    admin: AdminClient = cluster.admin()
    partitions = [
        TopicPartition(t, p) for t in (queue.source, queue.dlq) for p in range(queue.partitions)
    ]
    # some are led so already (ELECTION_NOT_NEEDED): the wait after decides
    with contextlib.suppress(KafkaException):
        admin.elect_leaders(ElectionType.PREFERRED, partitions).result(timeout=30)


# -- the run ----------------------------------------------------------------------------


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    summary: dict[str, Any] = {"seed": args.seed, "faults": [], "stalls": [], "unhealed": []}
    log = RunLog()
    suffix = uuid.uuid4().hex[:8]
    name = f"qfault-{suffix}"
    queue = Queue(name, f"dlq.{name}", f"{name}-g", args.partitions)
    try:
        with running_cluster(work / "cluster", settings=SETTINGS) as cluster:
            _run_on(cluster, args, rng, log, queue, summary, work)
    except AssertionError as exc:  # the cluster's stop found tracebacks: in the summary
        if not summary.get("tracebacks"):
            raise
        print(f"stopping the cluster: {str(exc)[:2000]}", file=sys.stderr)
    return summary


def _run_on(
    cluster: WeirCluster,
    args: argparse.Namespace,
    rng: random.Random,
    log: RunLog,
    queue: Queue,
    summary: dict[str, Any],
    work: Path,
) -> None:
    create_topics(cluster, queue)
    set_group_configs(cluster, queue.group, queue.dlq)
    queue.topic_id = topic_id(cluster, queue.source)
    producer = ProduceLoad(
        cluster.bootstrap, queue.source, queue.partitions, log, random.Random(args.seed)
    )
    tail = DeadLetterTail(cluster.bootstrap, queue, log)
    pool = ConsumerPool(
        cluster.bootstrap, queue.group, queue.source, log, args.consumers, work / "consumers"
    )
    watch = LeaderWatch(cluster, queue.source, log)
    pool.start()
    producer.start()
    tail.start()
    started = time.monotonic()
    try:
        cluster.wait_full_isr(SHARE_GROUP_STATE_TOPIC_NAME, timeout_s=60)
        _progress(pool, summary, "start")
        watch.start()
        while _more(args, summary, started):
            sequence = args.sequence
            kind = sequence[len(summary["faults"])] if sequence else rng.choice(args.kinds)
            fault_started = time.monotonic()
            watch.fault()
            what = inject(kind, cluster, queue, log, pool, rng)
            try:
                heal_s = heal(cluster, queue, log)
            except AssertionError as exc:  # noted; the run goes on
                summary["unhealed"].append({"after": what, "error": str(exc)})
                heal_s = HEAL_TIMEOUT_S
            watch.resume()
            progress_s = _progress(pool, summary, kind)
            summary["faults"].append({
                "kind": kind, "what": what, "at_s": round(fault_started - started, 1),
                "heal_s": round(heal_s, 1), "next_accepts_s": round(progress_s, 1),
            })  # fmt: skip
            print(json.dumps(summary["faults"][-1]), flush=True)
    finally:
        phase("stopping the producer")
        producer.finish()
        phase("draining")
        _drain(log, pool, summary)
        pool.close()
        watch.stop.set()
        watch.thread.join(timeout=10)
    summary["duration_s"] = round(time.monotonic() - started, 1)
    phase("the final drain")
    drain_events = final_drain(pool, work / "consumers")
    summary["drain_empty"] = not any(e["event"] == "delivered" for e in drain_events)
    phase("reading the dead letters")
    tail.read_to_end(60)
    phase("checking")
    consumer_events = [*pool.events(), *drain_events]
    report = check(log, consumer_events, summary["drain_empty"])
    summarize(summary, log, report, pool, watch, tail)
    summary["tracebacks"] = [str(path) for path, _ in cluster.tracebacks()]
    dump_history(work / "history.json", log, consumer_events)


def phase(what: str) -> None:
    print(f"-- {what}", file=sys.stderr, flush=True)


def dump_history(path: Path, log: RunLog, consumer_events: list[dict[str, Any]]) -> None:
    """Everything the checker read, for a look at an anomaly."""
    with log.lock:
        history = {
            "produced": {k: [v, asdict(r)] for k, (v, r) in log.produced.items()},
            "dead_letters": [asdict(letter) for letter in log.letters],
            "events": sorted([*consumer_events, *log.events], key=lambda e: int(e["t_ms"])),
        }
    path.write_text(json.dumps(history) + "\n")


def _more(args: argparse.Namespace, summary: dict[str, Any], started: float) -> bool:
    if args.sequence:
        return len(summary["faults"]) < len(args.sequence)
    if args.faults is not None:
        return len(summary["faults"]) < args.faults
    return time.monotonic() - started < args.duration_minutes * 60


def _progress(pool: ConsumerPool, summary: dict[str, Any], kind: str) -> float:
    """Seconds until `PROGRESS_ACCEPTS` more acknowledgements are answered without
    error (a stall is noted)."""
    started = time.monotonic()
    target = pool.accepts() + PROGRESS_ACCEPTS
    while pool.accepts() < target:
        if time.monotonic() - started > PROGRESS_TIMEOUT_S:
            summary["stalls"].append({"after": kind, "accepts": pool.accepts()})
            break
        time.sleep(1.0)  # other processes: nothing to wait on
    return time.monotonic() - started


def _resolved(letters: list[DeadLetterSeen], events: list[dict[str, Any]]) -> set[str]:
    """Records with an ACCEPT answered without error, or a dead letter."""
    done = {letter.key for letter in letters}
    last_type: dict[tuple[str, str], str] = {}
    for event in events:
        consumer = str(event.get("consumer"))
        if event["event"] == "acknowledge":
            last_type[(consumer, record_key(event["partition"], event["offset"]))] = event["type"]
        elif event["event"] == "ack_result" and event.get("error") is None:
            for offset in event.get("offsets") or []:
                key = record_key(event["partition"], offset)
                if last_type.get((consumer, key)) == "ACCEPT":
                    done.add(key)
    return done


def _drain(log: RunLog, pool: ConsumerPool, summary: dict[str, Any]) -> None:
    """Until every produced record is resolved, or none was for DRAIN_QUIET_S (an
    ACCEPT whose answer was lost is never seen resolved), at most DRAIN_TIMEOUT_S."""
    started = last_change = time.monotonic()
    open_count = -1
    while True:
        with log.lock:
            produced = set(log.produced)
            letters = list(log.letters)
        open_keys = produced - _resolved(letters, pool.all_events())
        now = time.monotonic()
        if len(open_keys) != open_count:
            open_count, last_change = len(open_keys), now
        if not open_keys or now - started > DRAIN_TIMEOUT_S or now - last_change > DRAIN_QUIET_S:
            break
        time.sleep(1.0)  # other processes: nothing to wait on
    summary["drain_s"] = round(time.monotonic() - started, 1)
    summary["open_after_drain"] = sorted(open_keys)[:20]


def final_drain(pool: ConsumerPool, log_dir: Path) -> list[dict[str, Any]]:
    """A fresh consumer of the group for longer than a lock: its events."""
    spec = pool.spec(f"drain-{uuid.uuid4().hex[:6]}", deadline_ms=FINAL_DRAIN_MS)
    driver = DriverProcess("python", spec, log_dir)
    try:
        driver.proc.wait(timeout=FINAL_DRAIN_MS / 1000 + 30)
    finally:
        driver.kill()
    return driver.snapshot()


def check(log: RunLog, consumer_events: list[dict[str, Any]], drain_empty: bool) -> HistoryReport:
    with log.lock:
        records = {key: record for key, (_, record) in log.produced.items()}
        events = [*consumer_events, *log.events]
        letters = list(log.letters)
    return check_share_history(
        records,
        events,
        delivery_limit=DELIVERY_LIMIT,
        lock_ms=LOCK_MS,
        strict_counts=False,
        dead_letters=letters,
        records=records,
        drain_empty=drain_empty,
    )


def summarize(
    summary: dict[str, Any],
    log: RunLog,
    report: HistoryReport,
    pool: ConsumerPool,
    watch: LeaderWatch,
    tail: DeadLetterTail,
) -> None:
    fate_of = {key: value.split("/", 1)[0] for key, (value, _) in log.produced.items()}
    summary["faults_by_kind"] = dict(Counter(f["kind"] for f in summary["faults"]))
    summary["produced"] = len(log.produced)
    summary["produce_errors"] = log.produce_errors[:10]
    summary["records_by_fate"] = dict(Counter(fate_of.values()))
    by_fate: dict[str, Counter[str]] = {}
    for key, resolution in report.resolutions.items():
        by_fate.setdefault(fate_of.get(key, "?"), Counter())[resolution] += 1
    summary["resolutions"] = report.counts()
    summary["resolutions_by_fate"] = {fate: dict(c) for fate, c in sorted(by_fate.items())}
    summary["dead_letters_by_reason"] = dict(Counter(str(letter.reason) for letter in log.letters))
    summary["dead_letters_foreign"] = tail.foreign
    summary["delayed_delivered_late_ms"] = _delay_lateness(log, report)
    summary["deliveries"] = sum(len(h) for h in report.holdings.values())
    summary["redeliveries"] = sum(max(0, len(h) - 1) for h in report.holdings.values())
    summary["failover_events"] = dict(
        Counter(str(e.get("why")) for e in log.events if e["event"] == "failover")
    )
    summary["consumer_exits"] = pool.exits
    summary["unannounced_leader_changes"] = watch.unannounced
    summary["anomalies"] = len(report.violations)
    summary["anomaly_examples"] = report.violations[:20]


def _delay_lateness(log: RunLog, report: HistoryReport) -> dict[str, int]:
    """How late after its delay each delayed record was first delivered (ms)."""
    late = []
    for key, (value, record) in log.produced.items():
        held = report.holdings.get(key)
        if value.startswith("delay/") and held and record.visible_ms is not None:
            late.append(held[0].start_ms - record.visible_ms)
    if not late:
        return {}
    late.sort()
    return {"count": len(late), "min": late[0], "median": late[len(late) // 2], "max": late[-1]}


def failed(summary: dict[str, Any]) -> bool:
    return bool(
        summary["anomalies"] or summary["stalls"] or summary["tracebacks"] or summary["unhealed"]
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.queue_fault_run")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--duration-minutes", type=float, default=10.0)
    limit.add_argument("--faults", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=PARTITIONS)
    parser.add_argument("--kinds", type=lambda s: s.split(","), default=list(KINDS))
    # these faults in this order instead (then --faults and --duration-minutes are moot)
    parser.add_argument("--sequence", type=lambda s: s.split(","), default=[])
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("queue-fault-run.json"))
    args = parser.parse_args(argv)
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 PID: every thread's stack
    unknown = (set(args.kinds) | set(args.sequence)) - set(KINDS)
    if args.partitions > args.consumers:
        # then each partition is shared (share_assignor, rule 2): the slow consumer
        # never has one to itself
        parser.error("--partitions must be at most --consumers (the slow one is one more)")
    if unknown:
        parser.error(f"unknown kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        summary = run(args, args.work_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="weir-queue-fault-run-") as work:
            summary = run(args, Path(work))
    text = json.dumps(summary, indent=2)
    print(text)
    args.out.write_text(text + "\n")
    return 1 if failed(summary) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
