"""A long randomized fault-injection run against a real three-broker cluster.

    sudo .venv/bin/python -m compat_tests.fault_run [--faults 20] [--seed 1]
                                                    [--out fault-run.json]

Each broker runs in a network namespace of its own (compat_tests/netns.py), etcd
and the clients in the root namespace. One idempotent acks=all producer writes
unique values to a 3-partition, replication-factor-3 topic the whole time, and a
reader reads everything while it happens. Faults are drawn at random, one at a
time, each followed by healing and a wait for every partition's full ISR:

- kill: SIGKILL a partition leader, restart it after 1-4 s;
- pause: SIGSTOP a broker for 4-7 s (past its 3 s session), then SIGCONT;
- isolate: cut a broker off from the other brokers and etcd for 3-6 s;
- controller: SIGKILL the active controller, restart it;
- restart: SIGTERM a broker and start it again (a rolling-restart step).

At the end the history checker (history_checker.py) reads everything back and
reports lost, duplicated, reordered, offset-mismatched, vanished and unexpected
records; the run prints a JSON summary (also written to --out) with the faults,
the anomalies and the failover times (kill to the first acknowledged write on a
partition the killed broker led). Exit code 0 only with zero anomalies.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from compat_tests.cluster_harness import WeirCluster, running_cluster
from compat_tests.history_checker import ConcurrentReader, ProduceLoad, check, read_everything
from compat_tests.netns import NetworkLab

TOPIC = "faults"
PARTITIONS = 3
HEAL_TIMEOUT_S = 90.0
FAULT_KINDS = ("kill", "pause", "isolate", "controller", "restart")


def first_ack_after(load: ProduceLoad, since_s: float, partitions: set[int]) -> float | None:
    """Seconds from `since_s` to the first acknowledgement on `partitions` (polling)."""
    seen = len(load.acks.acked)
    deadline = since_s + HEAL_TIMEOUT_S
    while time.monotonic() < deadline:
        items = list(load.acks.acked.items())[seen:]
        seen += len(items)
        if any(partition in partitions for _, (partition, _) in items):
            return time.monotonic() - since_s
        time.sleep(0.01)
    return None


def inject(kind: str, cluster: WeirCluster, lab: NetworkLab, load: ProduceLoad,
           rng: random.Random) -> dict[str, object]:  # fmt: skip
    record: dict[str, object] = {"kind": kind}
    if kind in ("kill", "controller"):
        if kind == "kill":
            victim = cluster.leader_of(TOPIC, rng.randrange(PARTITIONS))
        else:
            victim = cluster.controller_id()
        led = {p for p, d in cluster.partitions(TOPIC).items() if d.leader == victim}
        killed_at = time.monotonic()
        cluster.brokers[victim].kill()
        record |= {"broker": victim, "led": sorted(led)}
        if led:
            record["failover_s"] = first_ack_after(load, killed_at, led)
        time.sleep(rng.uniform(1, 4))
        cluster.brokers[victim].start(ready_timeout_s=HEAL_TIMEOUT_S)
    elif kind == "pause":
        victim = rng.choice(list(cluster.brokers))
        os.kill(cluster.brokers[victim].pid, signal.SIGSTOP)
        time.sleep(rng.uniform(4, 7))
        os.kill(cluster.brokers[victim].pid, signal.SIGCONT)
        record["broker"] = victim
    elif kind == "isolate":
        victim = rng.choice(list(cluster.brokers))
        lab.isolate(victim - 1)
        time.sleep(rng.uniform(3, 6))
        lab.heal(victim - 1)
        record["broker"] = victim
    else:
        victim = rng.choice(list(cluster.brokers))
        cluster.brokers[victim].stop()
        cluster.brokers[victim].start(ready_timeout_s=HEAL_TIMEOUT_S)
        record["broker"] = victim
    started = time.monotonic()
    cluster.wait_full_isr(TOPIC, timeout_s=HEAL_TIMEOUT_S)
    record["heal_s"] = round(time.monotonic() - started, 2)
    load.acked_since(50, timeout_s=HEAL_TIMEOUT_S)
    return record


def run(faults: int, seed: int, base: Path) -> dict[str, object]:
    rng = random.Random(seed)
    with NetworkLab(3) as lab:
        placement = lambda n: (lab.addresses[n - 1], lab.prefix(n - 1))  # noqa: E731
        with running_cluster(base, etcd_host=lab.root_address, placement=placement) as cluster:
            cluster.create_topic(TOPIC, PARTITIONS, 3)
            cluster.wait_full_isr(TOPIC)
            records = []
            with (
                ConcurrentReader(cluster.bootstrap, TOPIC, PARTITIONS) as reader,
                ProduceLoad(cluster.bootstrap, TOPIC) as load,
            ):
                load.acked_since(200, timeout_s=30)
                for index in range(faults):
                    kind = rng.choice(FAULT_KINDS)
                    record = inject(kind, cluster, lab, load, rng)
                    print(f"fault {index + 1}/{faults}: {record}", flush=True)
                    records.append(record)
            time.sleep(1)
            bootstrap = ",".join(b.bootstrap for b in cluster.running())
            final = read_everything(bootstrap, TOPIC, PARTITIONS)
            anomalies = check(load.acks, load.sent, final, reader.reads)
    failovers = [r["failover_s"] for r in records if isinstance(r.get("failover_s"), float)]
    return {
        "seed": seed,
        "faults": records,
        "faults_by_kind": {k: sum(1 for r in records if r["kind"] == k) for k in FAULT_KINDS},
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
        "ok": anomalies.ok,
        "failover_s": {
            "count": len(failovers),
            "median": round(statistics.median(failovers), 2) if failovers else None,
            "worst": round(max(failovers), 2) if failovers else None,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="weir-fault-run-") as tmp:
        summary = run(args.faults, args.seed, Path(tmp))
    text = json.dumps(summary, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
