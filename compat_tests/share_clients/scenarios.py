"""Share-group scenarios run with stock clients against any broker, each reduced to an outcome.

    PYTHONPATH=$PWD .venv/bin/python -m compat_tests.share_clients.scenarios \\
        --bootstrap 127.0.0.1:19192 --client java release

A scenario creates its own topic and share group, sets the group's configs through
IncrementalAlterConfigs (`GROUP_CONFIGS`), produces with confluent-kafka, runs one or
more driver processes of one client (driver_spec.py; `python`, `java` or `go`) and
returns a JSON-able outcome that compares across brokers:

- ``deliveries``: ``"P:O"`` -> the delivery counts consumers saw, in the order seen (a
  record a consumer saw again with the same count, as kafka-clients returns a renewed
  record, counts once);
- ``acks``: ``"P:O"`` -> ``[type, error]`` per acknowledgement, `error` being the
  acknowledgement callback's error name (None: accepted by the broker; "NO_RESULT": the
  client reported none);
- scenario-specific fields (which consumer got what, timings in `timing_ms`, which are
  not compared exactly).

Every wait is bounded; a driver is killed at the end whatever happened. The events of
every driver are in `ScenarioRun.events` (and `share_history.py` checks them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat_tests.share_clients.driver_spec import UNSUPPORTED_EXIT_CODE, DriverSpec
from compat_tests.share_history import check_share_history

REPO_ROOT = Path(__file__).resolve().parents[2]
JAVA_DRIVER_DIR = REPO_ROOT / ".cache" / "share-consumer"
JAVA_DRIVER_MAIN = "dev.weir.share.ShareConsumerDriver"
GO_DRIVER = REPO_ROOT / ".cache" / "go" / "share-consumer"
CLIENTS = ("python", "java", "go")
ADMIN_TIMEOUT_S = 30.0

# The group configs every scenario sets (IncrementalAlterConfigs on the GROUP resource).
# Kafka 4.4 refuses a lock under group.share.min.record.lock.duration.ms (15 s by
# default), a session timeout under group.share.min.session.timeout.ms (45 s) and a
# heartbeat under group.share.min.heartbeat.interval.ms (5 s): the broker must be started
# with BROKER_MINIMUMS (kafka_peer.py --broker-property) for these to be accepted.
LOCK_MS = 2000
DELIVERY_LIMIT = 3
GROUP_CONFIGS = {
    "share.auto.offset.reset": "earliest",
    "share.record.lock.duration.ms": str(LOCK_MS),
    "share.delivery.count.limit": str(DELIVERY_LIMIT),
    "share.heartbeat.interval.ms": "1000",
    "share.session.timeout.ms": "6000",
}
BROKER_MINIMUMS = (
    "group.share.min.record.lock.duration.ms=1000",
    "group.share.min.session.timeout.ms=6000",
    "group.share.min.heartbeat.interval.ms=500",
)


class ScenarioError(RuntimeError):
    pass


class UnsupportedByClientError(ScenarioError):
    """The client cannot do what the scenario needs (e.g. confluent-kafka and RENEW)."""


# --------------------------------------------------------------------------- admin


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"share-{uuid.uuid4().hex[:10]}"
    client = admin(bootstrap)
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=ADMIN_TIMEOUT_S)
    return name


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()
        ],
    )
    client = admin(bootstrap)
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=ADMIN_TIMEOUT_S)


@dataclass(frozen=True)
class Produced:
    topic: str
    partition: int
    offset: int
    key: str
    value: str

    @property
    def key_text(self) -> str:
        return f"{self.partition}:{self.offset}"


def produce(bootstrap: str, topic: str, count: int, *, one_batch: bool = True) -> list[Produced]:
    """`count` records to partition 0, keys k0.., values v0..; in one batch, or one batch
    each (`one_batch=False`: a flush after every record)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    produced: list[Produced] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            raise ScenarioError(f"produce failed: {err}")
        produced.append(
            Produced(
                msg.topic(), msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()
            )
        )

    for i in range(count):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", partition=0, on_delivery=delivered)
        if not one_batch:
            producer.flush(ADMIN_TIMEOUT_S)
    if producer.flush(ADMIN_TIMEOUT_S) != 0 or len(produced) != count:
        raise ScenarioError(f"produced {len(produced)} of {count}")
    return sorted(produced, key=lambda p: (p.partition, p.offset))


# --------------------------------------------------------------------------- drivers


def driver_command(client: str) -> list[str]:
    if client == "python":
        return [sys.executable, "-m", "compat_tests.share_clients.python_consumer"]
    if client == "java":
        jar = JAVA_DRIVER_DIR / "app.jar"
        if not jar.exists():
            raise ScenarioError(
                f"{jar} is missing: mvn -o -Dmaven.repo.local=.cache/maven "
                "-f compat_tests/java/share-consumer/pom.xml package (scripts/test does it)"
            )
        classpath = f"{jar}:{JAVA_DRIVER_DIR / 'lib'}/*"
        return ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", classpath, JAVA_DRIVER_MAIN]
    if client == "go":
        if not GO_DRIVER.exists():
            raise ScenarioError(
                f"{GO_DRIVER} is missing: (cd compat_tests/go && go build -o "
                "../../.cache/go/share-consumer ./share-consumer) (scripts/test does it)"
            )
        return [str(GO_DRIVER)]
    raise ValueError(f"unknown client {client!r}: one of {CLIENTS}")


class DriverProcess:
    """One driver process: its spec on stdin, its events parsed from stdout by a thread."""

    def __init__(self, client: str, spec: DriverSpec, log_dir: Path) -> None:
        self.client = client
        self.spec = spec
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = log_dir / f"{spec.client_id}.stderr"
        self.events: list[dict[str, Any]] = []
        self.raw_lines: list[str] = []
        self._changed = threading.Condition()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        with self.stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                driver_command(client),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=REPO_ROOT,
                env=env,
            )
        assert self.proc.stdin is not None
        self.proc.stdin.write(spec.to_json().encode())
        self.proc.stdin.close()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            with self._changed:
                self.raw_lines.append(line)
                # a client's stray stdout line is kept in raw_lines only
                with contextlib.suppress(json.JSONDecodeError):
                    self.events.append(json.loads(line))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def snapshot(self) -> list[dict[str, Any]]:
        with self._changed:
            return list(self.events)

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not predicate(self.events):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    return predicate(self.events)
                self._changed.wait(min(remaining, 0.2))
            return True

    def deliveries(self) -> int:
        return sum(1 for e in self.snapshot() if e["event"] == "delivered")

    def wait_exit(self, timeout_s: float) -> int:
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ScenarioError(
                f"{self.client} driver {self.spec.client_id} still running after {timeout_s}s; "
                f"stderr tail:\n{self.stderr_tail()}"
            ) from None
        self._reader.join(timeout=5)
        if code == UNSUPPORTED_EXIT_CODE:
            what = [e.get("what") for e in self.snapshot() if e["event"] == "unsupported"]
            raise UnsupportedByClientError(f"{self.client}: {what}")
        if code != 0:
            raise ScenarioError(
                f"{self.client} driver {self.spec.client_id} exited {code}; "
                f"stderr tail:\n{self.stderr_tail()}"
            )
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stderr_tail(self, chars: int = 4000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@dataclass
class ScenarioRun:
    """What one scenario did: its topic and group, what it produced, its drivers."""

    bootstrap: str
    client: str
    log_dir: Path
    topic: str = ""
    group: str = ""
    produced: list[Produced] = field(default_factory=list)
    drivers: list[DriverProcess] = field(default_factory=list)
    # events the scenario itself adds (a driver it killed: {"event": "killed", ...})
    extra_events: list[dict[str, Any]] = field(default_factory=list)
    lock_ms: int = LOCK_MS
    delivery_limit: int = DELIVERY_LIMIT

    def spec(self, client_id: str, **fields: Any) -> DriverSpec:
        return DriverSpec(
            bootstrap=self.bootstrap,
            group=self.group,
            topics=[self.topic],
            client_id=client_id,
            **fields,
        )

    def start(self, spec: DriverSpec) -> DriverProcess:
        driver = DriverProcess(self.client, spec, self.log_dir)
        self.drivers.append(driver)
        return driver

    @property
    def events(self) -> list[dict[str, Any]]:
        merged = [e for d in self.drivers for e in d.snapshot()] + self.extra_events
        return sorted(merged, key=lambda e: e["t_ms"])

    def kill(self, driver: DriverProcess) -> int:
        """SIGKILLs `driver`; the kill is in `events` (the history checker needs it)."""
        killed_ms = int(time.time() * 1000)
        driver.kill()
        self.extra_events.append(
            {"event": "killed", "consumer": driver.spec.client_id, "t_ms": killed_ms}
        )
        return killed_ms


@contextmanager
def scenario_run(
    bootstrap: str,
    client: str,
    log_dir: Path,
    *,
    partitions: int = 1,
    group_configs: dict[str, str] | None = None,
) -> Iterator[ScenarioRun]:
    run = ScenarioRun(bootstrap, client, log_dir)
    run.topic = create_topic(bootstrap, partitions)
    run.group = f"sg-{uuid.uuid4().hex[:10]}"
    configs = {**GROUP_CONFIGS, **(group_configs or {})}
    run.lock_ms = int(configs["share.record.lock.duration.ms"])
    run.delivery_limit = int(configs["share.delivery.count.limit"])
    set_group_configs(bootstrap, run.group, configs)
    try:
        yield run
    finally:
        for driver in run.drivers:
            driver.kill()


# --------------------------------------------------------------------------- outcomes


def deliveries_by_record(events: list[dict[str, Any]]) -> dict[str, list[int]]:
    """ "P:O" -> delivery counts in the order seen; one consumer seeing a record again with
    the same count (a renewed record kafka-clients returns again) counts once."""
    seen: dict[str, list[int]] = {}
    last: dict[tuple[str, str], int] = {}
    for event in events:
        if event["event"] != "delivered":
            continue
        key = f"{event['partition']}:{event['offset']}"
        count = int(event["delivery_count"])
        if last.get((event["consumer"], key)) == count:
            continue
        last[(event["consumer"], key)] = count
        seen.setdefault(key, []).append(count)
    return dict(sorted(seen.items(), key=lambda kv: tuple(map(int, kv[0].split(":")))))


def acks_by_record(events: list[dict[str, Any]]) -> dict[str, list[list[Any]]]:
    """ "P:O" -> [type, error] per acknowledgement: each callback result is matched to the
    oldest unanswered acknowledgement of that offset by that consumer."""
    pending: dict[tuple[str, str], list[list[Any]]] = {}
    acks: dict[str, list[list[Any]]] = {}
    for event in events:
        if event["event"] == "acknowledge":
            key = f"{event['partition']}:{event['offset']}"
            entry = [event["type"], "NO_RESULT"]
            acks.setdefault(key, []).append(entry)
            pending.setdefault((event["consumer"], key), []).append(entry)
        elif event["event"] == "ack_result":
            for offset in event["offsets"] or []:
                waiting = pending.get((event["consumer"], f"{event['partition']}:{offset}"))
                if waiting:
                    waiting.pop(0)[1] = event["error"]
    return dict(sorted(acks.items(), key=lambda kv: tuple(map(int, kv[0].split(":")))))


def errors_seen(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(where, error name) of every error event, once each."""
    return sorted({(str(e["where"]), str(e["error"])) for e in events if e["event"] == "error"})


def outcome(run: ScenarioRun, *, strict_counts: bool = True, **extra: Any) -> dict[str, Any]:
    """The comparable outcome, with the history checker's verdict (`history`)."""
    events = run.events
    report = check_share_history(
        [p.key_text for p in run.produced],
        events,
        delivery_limit=run.delivery_limit,
        lock_ms=run.lock_ms,
        strict_counts=strict_counts,
    )
    return {
        "deliveries": deliveries_by_record(events),
        "acks": acks_by_record(events),
        "errors": [list(pair) for pair in errors_seen(events)],
        "history": {"resolutions": report.resolutions, "violations": report.violations},
        **extra,
    }


def consumer_of(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    """ "P:O" -> the consumers it was delivered to, in order."""
    owners: dict[str, list[str]] = {}
    for event in events:
        if event["event"] == "delivered":
            key = f"{event['partition']}:{event['offset']}"
            if event["consumer"] not in owners.get(key, [])[-1:]:
                owners.setdefault(key, []).append(event["consumer"])
    return owners


# --------------------------------------------------------------------------- scenarios

RECORDS = 6
DRIVER_EXIT_S = 60.0
JOIN_S = 30.0  # a consumer's first delivery: JVM start, join, assignment, fetch


def accept_all(bootstrap: str, client: str, log_dir: Path) -> dict[str, Any]:
    """(a) One consumer accepts everything: each offset delivered once, count 1."""
    with scenario_run(bootstrap, client, log_dir) as run:
        run.produced = produce(bootstrap, run.topic, RECORDS)
        run.start(run.spec("c1", idle_ms=2000)).wait_exit(DRIVER_EXIT_S)
        return outcome(run)


def release(bootstrap: str, client: str, log_dir: Path) -> dict[str, Any]:
    """(b) RELEASE offsets 1 and 3 once: they come back with count 2 and are accepted."""
    with scenario_run(bootstrap, client, log_dir) as run:
        run.produced = produce(bootstrap, run.topic, RECORDS)
        actions = {"0:1": ["RELEASE", "ACCEPT"], "0:3": ["RELEASE", "ACCEPT"]}
        run.start(run.spec("c1", actions=actions, idle_ms=2000)).wait_exit(DRIVER_EXIT_S)
        order = [
            [e["offset"], e["delivery_count"]] for e in run.events if e["event"] == "delivered"
        ]
        return outcome(run, order=order)


def reject(bootstrap: str, client: str, log_dir: Path) -> dict[str, Any]:
    """(c) REJECT offsets 1 and 3: they are never delivered again."""
    with scenario_run(bootstrap, client, log_dir) as run:
        run.produced = produce(bootstrap, run.topic, RECORDS)
        actions = {"0:1": ["REJECT"], "0:3": ["REJECT"]}
        run.start(run.spec("c1", actions=actions, idle_ms=LOCK_MS + 1500)).wait_exit(DRIVER_EXIT_S)
        return outcome(run)


def delivery_limit(bootstrap: str, client: str, log_dir: Path) -> dict[str, Any]:
    """(d) RELEASE offset 0 every time: delivered DELIVERY_LIMIT times, then archived."""
    with scenario_run(bootstrap, client, log_dir) as run:
        run.produced = produce(bootstrap, run.topic, 3)
        actions = {"0:0": ["RELEASE"]}
        run.start(run.spec("c1", actions=actions, idle_ms=LOCK_MS + 1500)).wait_exit(DRIVER_EXIT_S)
        return outcome(run)


def lock_expiry(bootstrap: str, client: str, log_dir: Path) -> dict[str, Any]:
    """(e) c1 takes every record and acknowledges them only after 2.5 lock durations; c2,
    started once c1 has them, gets them with count 2 after the lock expires and accepts
    them; c1's late ACCEPTs then fail."""
    with scenario_run(bootstrap, client, log_dir) as run:
        run.produced = produce(bootstrap, run.topic, RECORDS)
        slow = run.start(run.spec("c1", pause_ms=LOCK_MS * 5 // 2, max_deliveries=RECORDS))
        if not slow.wait_for(lambda ev: count_delivered(ev) >= RECORDS, JOIN_S):
            raise ScenarioError(f"c1 got {slow.deliveries()} of {RECORDS} records")
        acquired_ms = first_t(slow.snapshot(), "delivered")
        fast = run.start(run.spec("c2", idle_ms=LOCK_MS * 2))
        slow.wait_exit(DRIVER_EXIT_S)
        fast.wait_exit(DRIVER_EXIT_S)
        events = run.events
        redelivered_ms = first_t(fast.snapshot(), "delivered")
        # franz-go keeps fetching in the background while the application does not poll:
        # c1's client may re-acquire the expired records (count 2) without returning them,
        # and c2 then sees count 3. The counts must still only grow.
        return outcome(
            run,
            strict_counts=client != "go",
            consumers=consumer_of(events),
            timing_ms={"redelivered_after_acquired": redelivered_ms - acquired_ms},
        )


def late_ack(bootstrap: str, client: str, log_dir: Path) -> dict[str, Any]:
    """(e') c1, alone, acknowledges its records 2.5 lock durations late and exits: the
    broker answers INVALID_RECORD_STATE (the records went back to available); c2, started
    afterwards, gets them with count 2."""
    with scenario_run(bootstrap, client, log_dir) as run:
        run.produced = produce(bootstrap, run.topic, RECORDS)
        slow = run.start(run.spec("c1", pause_ms=LOCK_MS * 5 // 2, max_deliveries=RECORDS))
        slow.wait_exit(DRIVER_EXIT_S)
        run.start(run.spec("c2", idle_ms=2000)).wait_exit(DRIVER_EXIT_S)
        # franz-go's c1 may re-acquire the records in the background meanwhile (lock_expiry)
        return outcome(run, strict_counts=client != "go", consumers=consumer_of(run.events))


def member_death(
    bootstrap: str, client: str, log_dir: Path, *, lock_ms: int = 15000
) -> dict[str, Any]:
    """(f) c1 takes every record and holds them; it is killed with SIGKILL; c2 gets them
    (count 2). `timing_ms` says when, against the kill and the lock (`lock_ms`, long by
    default so that a release on the member's death shows apart from lock expiry)."""
    configs = {"share.record.lock.duration.ms": str(lock_ms)}
    with scenario_run(bootstrap, client, log_dir, group_configs=configs) as run:
        run.produced = produce(bootstrap, run.topic, RECORDS)
        doomed = run.start(run.spec("c1", default_action="HOLD", deadline_ms=120_000))
        if not doomed.wait_for(lambda ev: any(e["event"] == "holding" for e in ev), JOIN_S):
            raise ScenarioError(f"c1 never held records; got {doomed.deliveries()}")
        acquired_ms = first_t(doomed.snapshot(), "delivered")
        survivor = run.start(run.spec("c2", idle_ms=2000, deadline_ms=lock_ms + 30_000))
        time.sleep(1.0)  # c2 joins while c1 still holds everything
        killed_ms = run.kill(doomed)
        survivor.wait_exit(lock_ms / 1000 + 40)
        redelivered_ms = first_t(survivor.snapshot(), "delivered")
        return outcome(
            run,
            consumers=consumer_of(run.events),
            timing_ms={
                "redelivered_after_kill": redelivered_ms - killed_ms,
                "redelivered_after_acquired": redelivered_ms - acquired_ms,
                "lock": lock_ms,
            },
        )


def many_consumers(
    bootstrap: str, client: str, log_dir: Path, *, consumers: int = 4, records: int = 40
) -> dict[str, Any]:
    """(g) `consumers` consumers on a one-partition topic, records produced one batch each
    once they have joined, at most 2 records a poll and a short pause per poll: every
    consumer gets work, every record is accepted once."""
    with scenario_run(bootstrap, client, log_dir) as run:
        drivers = [
            run.start(
                run.spec(
                    f"c{i + 1}",
                    acquire_mode="record_limit",
                    max_poll_records=2,
                    pause_ms=150,
                    idle_ms=4000,
                    deadline_ms=60_000,
                )
            )
            for i in range(consumers)
        ]
        for driver in drivers:
            driver.wait_for(lambda ev: any(e["event"] == "started" for e in ev), JOIN_S)
        time.sleep(4.0)  # joined: a heartbeat or two (share.heartbeat.interval.ms=1000)
        run.produced = produce(bootstrap, run.topic, records, one_batch=False)
        for driver in drivers:
            driver.wait_exit(DRIVER_EXIT_S + 30)
        per_consumer = {d.spec.client_id: d.deliveries() for d in drivers}
        return outcome(run, per_consumer=per_consumer)


def renew(bootstrap: str, client: str, log_dir: Path) -> dict[str, Any]:
    """(h) c1 RENEWs every record three times a lock/2 apart (1.5 lock durations in all),
    then accepts; c2, started meanwhile, gets nothing: the renewed locks never expired."""
    with scenario_run(bootstrap, client, log_dir) as run:
        run.produced = produce(bootstrap, run.topic, 2)
        actions = {f"0:{o}": ["RENEW", "RENEW", "RENEW", "ACCEPT"] for o in range(2)}
        holder = run.start(
            run.spec("c1", actions=actions, pause_ms=LOCK_MS // 2, idle_ms=LOCK_MS * 2)
        )
        if not holder.wait_for(lambda ev: count_delivered(ev) >= 1, JOIN_S):
            holder.wait_exit(
                DRIVER_EXIT_S
            )  # raises UnsupportedByClientError for a client without RENEW
            raise ScenarioError("c1 got nothing")
        other = run.start(run.spec("c2", idle_ms=LOCK_MS * 3, deadline_ms=LOCK_MS * 6))
        holder.wait_exit(DRIVER_EXIT_S)
        other.wait_exit(DRIVER_EXIT_S)
        return outcome(run, consumers=consumer_of(run.events))


def count_delivered(events: list[dict[str, Any]]) -> int:
    return sum(1 for e in events if e["event"] == "delivered")


def first_t(events: list[dict[str, Any]], name: str) -> int:
    times = [int(e["t_ms"]) for e in events if e["event"] == name]
    if not times:
        raise ScenarioError(f"no {name} event")
    return min(times)


SCENARIOS: dict[str, Callable[[str, str, Path], dict[str, Any]]] = {
    "accept_all": accept_all,
    "release": release,
    "reject": reject,
    "delivery_limit": delivery_limit,
    "lock_expiry": lock_expiry,
    "late_ack": late_ack,
    "member_death": member_death,
    "many_consumers": many_consumers,
    "renew": renew,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--client", choices=CLIENTS, default="python")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/share-scenarios"))
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    args = parser.parse_args(argv)
    try:
        result = SCENARIOS[args.scenario](args.bootstrap, args.client, args.log_dir)
    except UnsupportedByClientError as exc:
        print(json.dumps({"unsupported": str(exc)}))
        return UNSUPPORTED_EXIT_CODE
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
