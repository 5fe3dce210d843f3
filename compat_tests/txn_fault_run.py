"""A long randomized run of transactions under kills, against a real three-broker cluster.

    .venv/bin/python -m compat_tests.txn_fault_run [--duration-minutes 10 | --faults 20]
        [--seed 1] [--producers 3] [--work-dir DIR] [--out txn-fault-run.json]

Two topics of three partitions (replication factor 3, min.insync.replicas 2).
`--producers` transactional producers (threads, compat_tests/txn_load.py) run
transactions over random subsets of the six partitions, a fifth of them aborted;
one more producer runs as a process of its own, holding each transaction open
briefly before committing, with a 5 s transaction.timeout.ms. A read_committed and
a read_uncommitted consumer record every poll. Faults, one at a time, drawn at
random, each followed by healing (every broker running, every partition of the
topics and of __transaction_state in full ISR) and a check that every producer
commits again:

- coordinator: SIGKILL the transaction coordinator of a producer's transactional
  id (the leader of its __transaction_state partition), restart it 1-4 s after its
  partition moved;
- leader: SIGKILL the leader of a random partition, restart it 1-4 s after the
  partition moved;
- pause: SIGSTOP a random broker for 4-7 s (past its 3 s session), then SIGCONT;
- producer: SIGKILL the producer process (its open transaction is aborted by its
  timeout, or by its successor: half the time the next process takes the same
  transactional.id and fences it, else a new one).

At the end the transaction history checker (compat_tests/txn_history.py) reads
every partition back at both isolation levels and reports its anomalies. The run
prints a JSON summary (also written to --out): faults by kind, transactions by
outcome, anomalies, producers that stalled, faults not healed within 90 s (the run
goes on), the brokers' tracebacks. Exit code 0 only with none of those.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from compat_tests.cluster_harness import WeirCluster, running_cluster
from compat_tests.txn_history import READ_COMMITTED, READ_UNCOMMITTED, TopicPartition, Txn, check
from compat_tests.txn_load import Journal, TxnConsumer, TxnProducer, final_scans
from weir.broker.coordinators.transaction_service import transaction_partition
from weir.controller.controller import TRANSACTION_STATE_TOPIC_NAME

KINDS = ("coordinator", "leader", "pause", "producer")
STATE_PARTITIONS = 50
HEAL_TIMEOUT_S = 90.0
PROGRESS_TIMEOUT_S = 60.0
PROCESS_TRANSACTION_TIMEOUT_MS = 5_000
REPO_ROOT = Path(__file__).resolve().parents[1]


class ProducerProcess:
    """The producer run as a process, killed and started again by the faults."""

    def __init__(self, cluster: WeirCluster, partitions: list[TopicPartition], work: Path) -> None:
        self._cluster = cluster
        self._partitions = partitions
        self._work = work
        self._launches = 0
        self._process: subprocess.Popen[bytes] | None = None
        self.transactional_id = f"process-{uuid.uuid4().hex[:8]}"
        self.journals: list[Path] = []

    def start(self, same_id: bool) -> None:
        if not same_id:
            self.transactional_id = f"process-{uuid.uuid4().hex[:8]}"
        journal = self._work / f"process-{self._launches}.jsonl"
        self.journals.append(journal)
        command = [
            sys.executable, "-m", "compat_tests.txn_load", "produce",
            "--bootstrap", self._cluster.bootstrap,
            "--transactional-id", self.transactional_id, "--name", f"k{self._launches}",
            "--partitions", ",".join(f"{t}:{p}" for t, p in self._partitions),
            "--journal", str(journal),
            "--transaction-timeout-ms", str(PROCESS_TRANSACTION_TIMEOUT_MS),
            "--pause-before-commit-s", "0.3", "--seed", str(self._launches),
        ]  # fmt: skip
        self._launches += 1
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        with open(journal.with_suffix(".stderr"), "wb") as stderr:
            self._process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stderr=stderr)

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()

    def txns(self) -> list[Txn]:
        return [txn for path in self.journals if path.exists() for txn in Journal.read(path).txns()]


def coordinator_of(cluster: WeirCluster, transactional_id: str) -> int:
    partition = transaction_partition(transactional_id, STATE_PARTITIONS)
    return cluster.leader_of(TRANSACTION_STATE_TOPIC_NAME, partition)


def heal(cluster: WeirCluster, topics: list[str]) -> float:
    """Every broker running, every partition in full ISR; returns the seconds taken."""
    started = time.monotonic()
    for broker in cluster.brokers.values():
        if not broker.is_running():
            broker.start(ready_timeout_s=HEAL_TIMEOUT_S)
    for topic in [*topics, TRANSACTION_STATE_TOPIC_NAME]:
        cluster.wait_full_isr(topic, timeout_s=HEAL_TIMEOUT_S)
    return time.monotonic() - started


def kill_and_restart(cluster: WeirCluster, victim: int, moved: Any, rng: random.Random) -> None:
    cluster.brokers[victim].kill()
    cluster.wait_until(moved, HEAL_TIMEOUT_S, f"broker {victim}'s partitions moved")
    time.sleep(rng.uniform(1, 4))  # down a while after its partitions moved
    cluster.brokers[victim].start(ready_timeout_s=HEAL_TIMEOUT_S)


def inject(
    kind: str,
    cluster: WeirCluster,
    partitions: list[TopicPartition],
    producers: list[TxnProducer],
    process: ProducerProcess,
    rng: random.Random,
) -> str:
    """One fault and its end; returns what was done."""
    if kind == "coordinator":
        transactional_id = rng.choice(producers).transactional_id
        victim = coordinator_of(cluster, transactional_id)
        kill_and_restart(
            cluster,
            victim,
            lambda: coordinator_of(cluster, transactional_id) not in (victim, -1),
            rng,
        )
        return f"killed broker {victim}, the coordinator of {transactional_id}"
    if kind == "leader":
        tp = rng.choice(partitions)
        victim = cluster.leader_of(*tp)
        kill_and_restart(cluster, victim, lambda: cluster.leader_of(*tp) not in (victim, -1), rng)
        return f"killed broker {victim}, the leader of {tp[0]}-{tp[1]}"
    if kind == "pause":
        victim = rng.choice(sorted(cluster.brokers))
        pause_s = rng.uniform(4, 7)
        os.kill(cluster.brokers[victim].pid, signal.SIGSTOP)
        try:
            time.sleep(pause_s)
        finally:
            os.kill(cluster.brokers[victim].pid, signal.SIGCONT)
        return f"paused broker {victim} for {pause_s:.1f} s"
    if kind == "producer":
        time.sleep(rng.uniform(0, 1))  # somewhere in a transaction
        process.kill()
        same_id = rng.random() < 0.5
        process.start(same_id=same_id)
        return "killed the producer process; restarted " + (
            "with the same transactional.id" if same_id else "with a new transactional.id"
        )
    raise AssertionError(kind)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    summary: dict[str, Any] = {"seed": args.seed, "faults": [], "stalls": []}
    with running_cluster(work / "cluster") as cluster:
        topics = [f"txn-faults-{kind}" for kind in ("a", "b")]
        for topic in topics:
            cluster.create_topic(topic, 3, 3, **{"min.insync.replicas": "2"})
            cluster.wait_full_isr(topic)
        partitions = [(topic, p) for topic in topics for p in range(3)]
        producers = [
            TxnProducer(
                cluster.bootstrap,
                f"thread-{i}-{uuid.uuid4().hex[:6]}",
                f"p{i}",
                partitions,
                seed=args.seed * 100 + i,
            )  # fmt: skip
            for i in range(args.producers)
        ]
        consumers = [
            TxnConsumer(cluster.bootstrap, "rc", READ_COMMITTED, partitions),
            TxnConsumer(cluster.bootstrap, "ru", READ_UNCOMMITTED, partitions),
        ]
        process = ProducerProcess(cluster, partitions, work)
        for consumer in consumers:
            consumer.__enter__()
        for producer in producers:
            producer.__enter__()
        process.start(same_id=True)
        started = time.monotonic()
        try:
            for producer in producers:
                producer.committed_since(3, PROGRESS_TIMEOUT_S)
            while _more(args, summary, started):
                kind = rng.choice(args.kinds)
                fault_started = time.monotonic()
                what = inject(kind, cluster, partitions, producers, process, rng)
                try:
                    heal_s = heal(cluster, topics)
                except AssertionError as exc:  # noted; the run goes on
                    summary.setdefault("unhealed", []).append({"after": what, "error": str(exc)})
                    heal_s = HEAL_TIMEOUT_S
                progress_s = _progress(producers, summary, kind)
                summary["faults"].append({
                    "kind": kind, "what": what, "at_s": round(fault_started - started, 1),
                    "heal_s": round(heal_s, 1), "next_commits_s": round(progress_s, 1),
                })  # fmt: skip
                print(json.dumps(summary["faults"][-1]), flush=True)
        finally:
            process.kill()
            for producer in producers:
                producer.stop()
            time.sleep(2)  # the consumers read what was committed last
            for consumer in consumers:
                consumer.__exit__(None, None, None)
        summary["duration_s"] = round(time.monotonic() - started, 1)
        committed, uncommitted = final_scans(cluster.bootstrap, partitions, HEAL_TIMEOUT_S)
        txns = [txn for producer in producers for txn in producer.journal.txns()]
        txns += process.txns()
        found = check(txns, [c.log for c in consumers], committed, uncommitted)
        summary["faults_by_kind"] = dict(Counter(f["kind"] for f in summary["faults"]))
        summary["counts"] = found.counts
        summary["producer_recreated"] = sum(p.recreated for p in producers)
        summary["producer_errors"] = dict(
            Counter(e.split(":")[0] for p in producers for e in p.errors).most_common(10)
        )
        summary["anomalies"] = {kind: len(items) for kind, items in found.found().items()}
        summary["anomaly_examples"] = {k: repr(v[:5]) for k, v in found.found().items()}
        summary["tracebacks"] = [str(path) for path, _ in cluster.tracebacks()]
    return summary


def _more(args: argparse.Namespace, summary: dict[str, Any], started: float) -> bool:
    if args.faults is not None:
        return len(summary["faults"]) < args.faults
    return time.monotonic() - started < args.duration_minutes * 60


def _progress(producers: list[TxnProducer], summary: dict[str, Any], kind: str) -> float:
    """Seconds until every producer commits again after the fault (a stall is noted)."""
    started = time.monotonic()
    for producer in producers:
        try:
            producer.committed_since(1, PROGRESS_TIMEOUT_S)
        except AssertionError as exc:
            summary["stalls"].append({"after": kind, "error": str(exc)})
    return time.monotonic() - started


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.txn_fault_run")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--duration-minutes", type=float, default=10.0)
    limit.add_argument("--faults", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--kinds", type=lambda s: s.split(","), default=list(KINDS))
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("txn-fault-run.json"))
    args = parser.parse_args(argv)
    unknown = set(args.kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        summary = run(args, args.work_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="weir-txn-fault-run-") as work:
            summary = run(args, Path(work))
    text = json.dumps(summary, indent=2)
    print(text)
    args.out.write_text(text + "\n")
    ok = not (summary["anomalies"] or summary["stalls"] or summary["tracebacks"]
              or summary.get("unhealed"))  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
