"""OpenMessaging-Benchmark-style workloads: Weir (durable: an fsync before every
acknowledgement), Apache Kafka 4.4 and Tansu in one run, with a compiled generator.

    .venv/bin/python benchmarks/omb.py --rounds 2

The generator is `benchmarks/loadgen` (Go, franz-go 1.22.2 for connections and
request encoding, built here into `.cache/go/loadgen`, as `share_consume.py` builds its
own), `--producers` and `--consumers` clients in one process, a goroutine each. By
default it builds its Produce requests itself (`-raw`: RecordBatch v2, acks=all, no
compression, no producer id, batches of 128 KiB, requests of at most 1 MiB as the Java
client's max.request.size, `--inflight` requests per connection) and counts fetched
records from the batch headers: franz-go's own producer and consumer spend about
0.5-0.9 µs of CPU on each record, more than a broker spends on a 100 B record, so they
would measure themselves on this 2-core machine (`--client-produce` uses them, for
comparison). Fetches are the Java consumer's sizes (50 MiB, 1 MiB a partition, 500 ms wait),
one in flight per consumer, without fetch sessions. Every broker gets the same request
versions (`--max-versions`, Kafka 3.9's: Tansu 0.6 hangs up on newer ApiVersions).
Each round first runs fio (sequential write,
fdatasync after every 1 MiB block: the durable-append ceiling of the disk that holds
the brokers' data), then each broker in turn (the order reversed every other round),
started fresh on free loopback ports with its defaults (`side_by_side/brokers.py`:
Weir on a fresh data dir, Kafka one KRaft node through `kafka_peer.py`, Tansu with
memory storage), each workload on a fresh topic:

1. warm-up (not measured): a backlog fill and drain of `--warmup-records` of the
   smallest size (Kafka's JIT compiles its hot paths), then its idle CPU;
2. max-rate produce, every size x every `--partitions` count, `--produce-seconds`
   each: records/s, MB/s, send -> acknowledgement latency;
3. backlog drain, every size at `--main-partitions`: `--backlog-records` produced at
   max rate, then drained from the start by `--consumers` assigned consumers. The
   default backlogs (about 210 MB) stay within Weir's page-cache window (16 MiB a
   partition, `page_cache_window_bytes`: older synced bytes are evicted), so every
   broker serves them from the page cache; larger ones are read from disk on Weir;
4. fixed rate: a produce at `--fixed-rate-fraction` of this broker's own max rate
   (step 2, same round, same size, `--main-partitions`) for `--fixed-seconds` after
   `--fixed-warmup-seconds`: every 5 ms (linger) each producer sends the records that
   fell due, each with its due time in its payload, and latency counts from that due
   time (the linger wait and any backlog included): send -> acknowledgement,
   p50/p99/p99.9/max. On Weir, the fsync rounds of that window from its `/metrics`
   (`weir_fsync_round_seconds`): their mean beside the mean latency is the fsync's share;
5. end to end: the same at `--e2e-rate-fraction` of the max rate, consumers reading
   along (each record's due time read from its bytes): send -> receipt. A broker then
   serves each record twice, so it runs at a lower fraction than step 4.

Broker CPU is the broker's process tree (threads and children: Weir's syncfs helper,
every JVM thread) from /proc at the generator's window marks, divided by the window's
records; the generator's CPU and the machine's idle CPU over the same window show
whether the generator or the broker is the bottleneck. Results:
`benchmarks/results/omb-<stamp>.json` and markdown on stdout: the goal table first
(Weir / Kafka / Tansu, one row a goal metric of issue 26, with Weir's ratios), then
every workload.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import kafka_peer  # benchmarks/ is on sys.path when this script runs
import omb_phases
import omb_report
from side_by_side.brokers import BROKERS, REPO_ROOT, ensure_tansu
from side_by_side.limits import ensure_tools, run_fio
from side_by_side.progress import log
from side_by_side.report import machine_facts

FIO_DIR_PREFIX = "fio-omb-"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="weir,kafka,tansu")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sizes", default="100,1024", help="value bytes")
    parser.add_argument("--partitions", default="1,16,100", help="max-rate produce topics")
    parser.add_argument("--main-partitions", type=int, default=16, help="backlog, fixed rate")
    parser.add_argument("--produce-seconds", type=float, default=4)
    parser.add_argument(
        "--backlog-records",
        default="2000000,200000",
        help="one count, or one per size (default: within Weir's page-cache window)",
    )
    parser.add_argument("--warmup-records", type=int, default=1_000_000)
    parser.add_argument("--fixed-rate-fraction", type=float, default=0.5)
    parser.add_argument("--e2e-rate-fraction", type=float, default=0.25)
    parser.add_argument("--fixed-seconds", type=float, default=5)
    parser.add_argument("--fixed-warmup-seconds", type=float, default=1)
    parser.add_argument("--producers", type=int, default=4, help="producer clients")
    parser.add_argument("--consumers", type=int, default=4, help="consumer clients")
    parser.add_argument("--inflight", type=int, default=10, help="requests per connection")
    parser.add_argument(
        "--max-versions",
        default="v3.9.0",
        help="the generator's request versions, for every broker (Tansu 0.6 hangs up on newer)",
    )
    parser.add_argument(
        "--client-produce",
        action="store_true",
        help="max-rate produce through franz-go's producer, not prebuilt batches",
    )
    parser.add_argument("--linger-ms", type=float, default=5)
    parser.add_argument("--batch-bytes", type=int, default=131_072)
    parser.add_argument("--idle-seconds", type=float, default=1)
    parser.add_argument("--fio-block-size", default="1m")
    parser.add_argument("--fio-runtime", type=int, default=4)
    parser.add_argument("--fio-size", default="2g")
    parser.add_argument("--no-fio", action="store_true")
    parser.add_argument("--no-install", action="store_true", help="never apt-get install fio")
    parser.add_argument("--phase-timeout", type=float, default=120)
    parser.add_argument("--startup-timeout", type=float, default=90)
    parser.add_argument("--java", default=os.environ.get("JAVA", "java"))
    parser.add_argument("--weir-bin", default=str(REPO_ROOT / ".venv" / "bin" / "weir"))
    parser.add_argument("--weir-extra-args", default="", help="appended to `weir serve`")
    parser.add_argument("--tansu-bin", default=os.environ.get("TANSU_BIN"))
    parser.add_argument("--data-root", default=tempfile.gettempdir())
    parser.add_argument("--results-dir", default=str(REPO_ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    args.brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    for broker in args.brokers:
        if broker not in BROKERS:
            parser.error(f"unknown broker {broker!r} ({', '.join(BROKERS)})")
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if min(args.sizes) < 8:
        parser.error("--sizes: at least 8 bytes (the fixed-rate payload carries its send time)")
    args.partitions = [int(p) for p in args.partitions.split(",")]
    if args.main_partitions not in args.partitions:
        parser.error("--main-partitions must be one of --partitions (its max rate paces)")
    counts = [int(n) for n in args.backlog_records.split(",")]
    if len(counts) not in (1, len(args.sizes)):
        parser.error("--backlog-records: one count, or one per size")
    args.backlog_records = dict(zip(args.sizes, counts * len(args.sizes), strict=False))
    args.data_root = Path(args.data_root)
    args.generators = []  # side_by_side.report.machine_facts asks
    args.no_limits = args.no_fio  # side_by_side.limits.ensure_tools asks
    return args


def fio_round(args: argparse.Namespace, round_no: int) -> dict[str, Any]:
    if shutil.which("fio") is None:
        return {"round": round_no, "error": "fio is not installed"}
    directory = Path(tempfile.mkdtemp(prefix=FIO_DIR_PREFIX, dir=args.data_root))
    log(f"round {round_no}: fio bs={args.fio_block_size}, fdatasync per block")
    try:
        fio = run_fio(args.fio_block_size, directory, args.fio_runtime, args.fio_size)
    finally:
        for leftover in directory.iterdir():
            leftover.unlink(missing_ok=True)
        directory.rmdir()
    fio["round"] = round_no
    if "write_MBps" in fio:
        log(f"  fio: {fio['write_MBps']:.0f} MB/s, {fio['write_iops']:.0f} fdatasyncs/s")
    return fio


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    """SIGTERM unwinds like an error, so the running broker is stopped."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    args = parse_args(argv)
    omb_phases.build_generator()
    ensure_tools(args)
    args.tansu_bin = ensure_tansu(args) if "tansu" in args.brokers else None
    args.kafka_jars = kafka_peer.ensure_jars(log) if "kafka" in args.brokers else None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results_dir = Path(args.results_dir)
    run_dir = results_dir / f"omb-run-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    out_path = results_dir / f"omb-{stamp}.json"
    result: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "args": {k: v for k, v in vars(args).items() if k != "kafka_jars"},
        "machine": machine_facts(args),
        "loadavg_start": os.getloadavg(),
        "fio": [],
        "samples": [],
    }
    log(f"machine: {result['machine']}; load average {result['loadavg_start']}")
    for round_no in range(1, args.rounds + 1):
        if not args.no_fio:
            result["fio"].append(fio_round(args, round_no))
        order = args.brokers if round_no % 2 else list(reversed(args.brokers))
        for name in order:
            result["samples"] += omb_phases.broker_pass(name, args, run_dir, round_no)
            omb_phases.write_json(out_path, result)  # so far
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    result["loadavg_end"] = os.getloadavg()
    fio_mb_per_s = {f["round"]: f["write_MBps"] for f in result["fio"] if "write_MBps" in f}
    omb_report.add_fio_shares(result["samples"], fio_mb_per_s)
    result["summary"] = omb_report.summarize(result["samples"], args.brokers)
    result["markdown"] = omb_report.markdown(result)
    omb_phases.write_json(out_path, result)
    print(result["markdown"])
    errors = [s for s in result["samples"] if "error" in s]
    for sample in errors:
        print(f"\nround {sample['round']} {sample['broker']}: {sample['error']}")
    print(
        f"\nLoad average {result['loadavg_start'][0]:.1f} at the start, "
        f"{result['loadavg_end'][0]:.1f} at the end."
    )
    log(f"results: {out_path} (broker logs in {run_dir})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
