"""A three-broker Weir cluster with many partitions: what etcd and the brokers do at
rest, controller failover, and leader movement after a broker's loss.

Run from the repository root (needs etcd: `apt-get install etcd-server`):

    PYTHONPATH=. .venv/bin/python benchmarks/cluster_scale.py --partitions 10000
    PYTHONPATH=. .venv/bin/python benchmarks/cluster_scale.py --partitions 1000
    PYTHONPATH=. .venv/bin/python benchmarks/cluster_scale.py --plot

One etcd member and three `weir serve` on loopback, with the broker defaults
(9 s session, 30 s leader rebalance check); each broker raises its open-files limit
to the hard one (`ulimit -Hn`) itself. The partitions are topics of
`--partitions-per-topic`, `--rf3-share` of them at replication factor 3 and the
rest at replication factor 1: this machine's hard limit of 20,000 descriptors
holds about 5,600 partitions per broker (3 descriptors each while written, the
rest kept for connections), and 10,000 partitions at replication factor 3 would
need 10,000 replicas on every broker. The run:

1. creates the topics (10 per CreateTopics request), timing it, and waits until
   every broker reports every partition led;
2. at rest (nothing produced or consumed) for `--rest-s`: etcd's request counters
   from its own /metrics (gRPC requests by method; the brokers use its JSON
   gateway, which etcd serves through its gRPC server), each broker's CPU and RSS,
   etcd's CPU;
3. SIGKILLs the controller broker and polls etcd every 0.1 s: the time until
   another broker holds the controller key, and until every partition with a live
   replica in its ISR has a live leader (the controller's decisions as etcd holds
   them); how many partitions moved, and how many went offline (replication factor
   1 on the killed broker);
4. starts it again (timing its start), waits until every replication factor 3
   partition has its full ISR again, then SIGKILLs another broker that is not the
   controller and times its leaderships moving in the same way.

Writes benchmarks/results/cluster-scale-<partitions>.json; `--plot` draws every
such file into docs/benchmarks/cluster-*.png (matplotlib: the `bench` extra).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from side_by_side.cpu import proc_cpu_seconds  # noqa: E402
from side_by_side.profiling import py_spy_recording, summarize_py_spy  # noqa: E402

from compat_tests.cluster_harness import WeirCluster, running_cluster  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DOCS_DIR = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
CREATE_BATCH = 10
# A broker admits a new topic only if all its partitions would fit on it (its
# descriptor budget counts the topic's partitions, not its replicas there): topics
# of at most this many partitions still fit next to 5,333 replicas.
PARTITIONS_PER_TOPIC_MAX = 250
POLL_INTERVAL_S = 0.1
MOVE_TIMEOUT_S = 120.0
PROFILE_RATE_HZ = 47
# No settings file lines: the broker defaults (Kafka's session timeout and so on).
DEFAULT_SETTINGS = ""
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# -- etcd, read directly ----------------------------------------------------------------------


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def etcd_range(client_url: str, prefix: bytes) -> list[tuple[bytes, bytes]]:
    """Every (key, value) under `prefix`, through etcd's JSON gateway."""
    range_end = prefix[:-1] + bytes([prefix[-1] + 1])
    body = json.dumps({"key": _b64(prefix), "range_end": _b64(range_end)}).encode()
    request = urllib.request.Request(client_url + "/v3/kv/range", data=body, method="POST")
    with _HTTP.open(request, timeout=10) as response:
        document = json.loads(response.read())
    return [
        (base64.b64decode(kv["key"]), base64.b64decode(kv.get("value", "")))
        for kv in document.get("kvs", [])
    ]


def etcd_metrics(client_url: str) -> dict[str, float]:
    """etcd's /metrics: every sample, labels included in the name."""
    with _HTTP.open(client_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            samples[name] = float(value)
        except ValueError:
            continue
    return samples


def requests_by_method(samples: dict[str, float]) -> Counter[str]:
    """gRPC requests etcd handled, by method (`grpc_server_handled_total`)."""
    counts: Counter[str] = Counter()
    for name, value in samples.items():
        if name.startswith("grpc_server_handled_total{"):
            method = name.split('grpc_method="', 1)[1].split('"', 1)[0]
            counts[method] += int(value)
    return counts


def sample(samples: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in samples.items() if k == prefix or k.startswith(prefix + "{"))


@dataclass(frozen=True)
class PartitionView:
    """The cluster as etcd holds it: every partition's replicas, leader and ISR."""

    controller: int
    brokers: frozenset[int]
    replicas: dict[str, tuple[int, ...]]
    leader: dict[str, int]
    isr: dict[str, tuple[int, ...]]
    metadata_bytes: int
    keys: int


def read_view(client_url: str) -> PartitionView:
    everything = etcd_range(client_url, b"/weir/")
    by_key = dict(everything)
    metadata_value = by_key[b"/weir/metadata"]
    metadata = json.loads(metadata_value)
    controller_value = by_key.get(b"/weir/controller")
    controller = json.loads(controller_value)["node_id"] if controller_value else -1
    brokers = frozenset(
        int(k.rsplit(b"/", 1)[1]) for k in by_key if k.startswith(b"/weir/brokers/")
    )
    replicas: dict[str, tuple[int, ...]] = {}
    leader: dict[str, int] = {}
    isr: dict[str, tuple[int, ...]] = {}
    for topic in metadata["topics"]:
        for index, assigned in enumerate(topic["assignment"]):
            name = f"{topic['topic_id']}/{index}"
            replicas[name] = tuple(assigned)
            stored = by_key.get(b"/weir/partitions/" + name.encode())
            if stored is None:  # never changed: its first replica leads, all in sync
                leader[name], isr[name] = assigned[0], tuple(assigned)
            else:
                state = json.loads(stored)
                leader[name], isr[name] = state["leader"], tuple(state["isr"])
    return PartitionView(
        controller, brokers, replicas, leader, isr, len(metadata_value), len(everything)
    )


# -- the run ----------------------------------------------------------------------------------


def create_topics(bootstrap: str, partitions: int, per_topic: int, rf3_share: float) -> float:
    topics_count = partitions // per_topic
    rf3_topics = round(topics_count * rf3_share)
    topics = [
        NewTopic(f"rf{3 if i < rf3_topics else 1}-{i:04d}", per_topic, 3 if i < rf3_topics else 1)
        for i in range(topics_count)
    ]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.monotonic()
    for start in range(0, len(topics), CREATE_BATCH):
        batch = topics[start : start + CREATE_BATCH]
        futures = admin.create_topics(batch, operation_timeout=240, request_timeout=280)
        for future in futures.values():
            future.result(timeout=300)
    return time.monotonic() - started


def wait_all_reported(cluster: WeirCluster, partitions: int, timeout_s: float = 300.0) -> float:
    """Until every running broker's Metadata answer has every partition with a leader."""
    started = time.monotonic()

    def led(broker: Any) -> bool:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = admin.list_topics(timeout=30).topics
        count = sum(
            1
            for name, topic in topics.items()
            if name.startswith("rf")
            for p in topic.partitions.values()
            if p.leader >= 0
        )
        return count == partitions

    cluster.wait_until(
        lambda: all(led(b) for b in cluster.running()), timeout_s, "every partition led"
    )
    return time.monotonic() - started


def at_rest(cluster: WeirCluster, seconds: float, profile_path: Path | None) -> dict[str, Any]:
    client_url = cluster.etcd.members[0].client_url
    etcd_pid = cluster.etcd.members[0].process.pid  # type: ignore[union-attr]
    brokers = dict(cluster.brokers.items())
    before = etcd_metrics(client_url)
    cpu_before = {n: sum(proc_cpu_seconds(b.pid)) for n, b in brokers.items()}
    etcd_cpu_before = sum(proc_cpu_seconds(etcd_pid))
    if profile_path is None:
        time.sleep(seconds)
    else:  # py-spy samples without pausing the broker (--nonblocking), in its own process
        with py_spy_recording(brokers[1].pid, profile_path, PROFILE_RATE_HZ):
            time.sleep(seconds)
    after = etcd_metrics(client_url)
    cpu_after = {n: sum(proc_cpu_seconds(b.pid)) for n, b in brokers.items()}
    etcd_cpu_after = sum(proc_cpu_seconds(etcd_pid))
    methods = requests_by_method(after)
    methods.subtract(requests_by_method(before))
    rates = {m: c / seconds for m, c in methods.items() if c}
    received = sample(after, "etcd_network_client_grpc_received_bytes_total") - sample(
        before, "etcd_network_client_grpc_received_bytes_total"
    )
    sent = sample(after, "etcd_network_client_grpc_sent_bytes_total") - sample(
        before, "etcd_network_client_grpc_sent_bytes_total"
    )
    return {
        "seconds": seconds,
        "etcd_requests_per_s": sum(rates.values()),
        "etcd_requests_per_s_by_method": rates,
        "etcd_received_bytes_per_s": received / seconds,
        "etcd_sent_bytes_per_s": sent / seconds,
        "etcd_cpu_util": (etcd_cpu_after - etcd_cpu_before) / seconds,
        "etcd_db_bytes": sample(after, "etcd_mvcc_db_total_size_in_bytes"),
        "broker_cpu_util": {str(n): (cpu_after[n] - cpu_before[n]) / seconds for n in brokers},
        "broker_rss_bytes": {str(n): b.rss_bytes() for n, b in brokers.items()},
        "broker_open_files": {str(n): b.open_files_count() for n, b in brokers.items()},
        "broker_data_files": {str(n): files_under(b.data_dir) for n, b in brokers.items()},
    }


def files_under(directory: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(directory))


def time_leaders_moving(cluster: WeirCluster, victim: int) -> dict[str, Any]:
    """SIGKILL `victim`, then poll etcd until another broker is controller and every
    partition with a live ISR member has a live leader."""
    client_url = cluster.etcd.members[0].client_url
    view = read_view(client_url)
    was_controller = view.controller == victim
    led_before = {p for p, leader in view.leader.items() if leader == victim}
    movable = {p for p in led_before if any(r != victim for r in view.isr[p])}
    killed_at = time.monotonic()
    cluster.brokers[victim].kill()
    controller_s: float | None = None
    first_move_s: float | None = None
    deadline = killed_at + MOVE_TIMEOUT_S
    while time.monotonic() < deadline:
        view = read_view(client_url)
        now = time.monotonic() - killed_at
        if was_controller and controller_s is None and view.controller not in (-1, victim):
            controller_s = now
        moved = [p for p in movable if view.leader[p] not in (-1, victim)]
        if moved and first_move_s is None:
            first_move_s = now
        if (controller_s is not None or not was_controller) and len(moved) == len(movable):
            break
        time.sleep(POLL_INTERVAL_S)
    all_moved_s = time.monotonic() - killed_at
    moved_count = sum(1 for p in movable if view.leader[p] not in (-1, victim))
    offline = sum(1 for p in led_before if view.leader[p] in (-1, victim))
    return {
        "victim": victim,
        "was_controller": was_controller,
        "controller_s": controller_s,
        "first_leader_moved_s": first_move_s,
        "all_leaders_moved_s": all_moved_s if moved_count == len(movable) else None,
        "led_before": len(led_before),
        "moved": moved_count,
        "offline": offline,
        "new_leaders": dict(Counter(str(view.leader[p]) for p in movable)),
    }


def wait_full_isr(cluster: WeirCluster, timeout_s: float = 300.0) -> float:
    client_url = cluster.etcd.members[0].client_url
    started = time.monotonic()

    def full() -> bool:
        view = read_view(client_url)
        return len(view.brokers) == len(cluster.brokers) and all(
            sorted(view.isr[p]) == sorted(r) and view.leader[p] in r
            for p, r in view.replicas.items()
        )

    cluster.wait_until(full, timeout_s, "every partition with its full ISR")
    return time.monotonic() - started


def controller_then_loss(
    cluster: WeirCluster, client_url: str, result: dict[str, Any], save: Callable[[], None]
) -> None:
    """Kill the controller, restart it, then kill another broker (not the controller)."""
    view = read_view(client_url)
    result["controller_failover"] = time_leaders_moving(cluster, view.controller)
    print(f"controller killed: {result['controller_failover']}", flush=True)
    save()
    victim = result["controller_failover"]["victim"]
    started = time.monotonic()
    cluster.brokers[victim].start(ready_timeout_s=300)
    result["restart_ready_s"] = time.monotonic() - started
    result["restart_full_isr_s"] = wait_full_isr(cluster)
    print(
        f"restarted broker {victim}: ready in {result['restart_ready_s']:.1f} s, full "
        f"ISR {result['restart_full_isr_s']:.1f} s later",
        flush=True,
    )
    view = read_view(client_url)
    others = [n for n in cluster.brokers if n not in (view.controller, victim)]
    result["broker_loss"] = time_leaders_moving(cluster, others[0])
    print(f"broker killed: {result['broker_loss']}", flush=True)
    save()


def loss_then_controller(
    cluster: WeirCluster, client_url: str, result: dict[str, Any], save: Callable[[], None]
) -> None:
    """Kill a broker that is not the controller, then (two brokers left, no restart:
    quicker at large sizes) the controller."""
    view = read_view(client_url)
    others = [n for n in cluster.brokers if n != view.controller]
    result["broker_loss"] = time_leaders_moving(cluster, others[0])
    print(f"broker killed: {result['broker_loss']}", flush=True)
    save()
    view = read_view(client_url)
    result["controller_failover"] = time_leaders_moving(cluster, view.controller)
    result["controller_failover"]["brokers_left"] = 1
    print(f"controller killed: {result['controller_failover']}", flush=True)
    save()


def run(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    """The measurements, written to `path` after every step (a run cut short by its
    time limit keeps what it measured)."""
    result: dict[str, Any] = {
        "partitions": args.partitions,
        "rf3_share": args.rf3_share,
        "label": args.label,
    }
    per_topic = args.partitions_per_topic or min(args.partitions // 10, PARTITIONS_PER_TOPIC_MAX)

    def save() -> None:
        path.write_text(json.dumps(result, indent=1))

    with (
        tempfile.TemporaryDirectory(prefix="weir-cluster-scale-") as tmp,
        running_cluster(Path(tmp), settings=DEFAULT_SETTINGS) as cluster,
    ):
        client_url = cluster.etcd.members[0].client_url
        result["create_s"] = create_topics(
            cluster.bootstrap, args.partitions, per_topic, args.rf3_share
        )
        print(f"created {args.partitions} partitions in {result['create_s']:.1f} s", flush=True)
        result["all_reported_s"] = wait_all_reported(cluster, args.partitions)
        save()
        time.sleep(args.settle_s)
        view = read_view(client_url)
        result["metadata_bytes"] = view.metadata_bytes
        result["etcd_keys"] = view.keys
        result["replicas_per_broker"] = dict(
            Counter(str(r) for rs in view.replicas.values() for r in rs)
        )
        profile_path = Path(tmp) / "rest-profile.txt" if args.profile_rest else None
        result["rest"] = at_rest(cluster, args.rest_s, profile_path)
        if profile_path is not None:
            result["rest_profile"] = summarize_py_spy(profile_path, 20)
        save()
        print(f"at rest: {json.dumps(result['rest'])}", flush=True)
        if args.loss_first:
            loss_then_controller(cluster, client_url, result, save)
        else:
            controller_then_loss(cluster, client_url, result, save)
    return result


# -- the plots --------------------------------------------------------------------------------


def dig(result: dict[str, Any], *keys: str) -> float:
    """result[k1][k2]..., NaN where a run cut short did not measure it (a gap in a plot)."""
    value: Any = result
    for key in keys:
        if not isinstance(value, dict) or value.get(key) is None:
            return float("nan")
        value = value[key]
    return float(value)


def by_build(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Results per build label ("" first: this tree), each sorted by partitions."""
    builds: dict[str, list[dict[str, Any]]] = {}
    for result in sorted(results, key=lambda r: (r.get("label", ""), r["partitions"])):
        builds.setdefault(result.get("label", ""), []).append(result)
    return builds


def plot(results: list[dict[str, Any]]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    DOCS_DIR.mkdir(parents=True, exist_ok=True)
    written = []
    builds = by_build(results)

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for build, runs in builds.items():
        sizes = [r["partitions"] for r in runs]
        style = "--" if build else "-"
        name = f" ({build})" if build else ""
        for key, label in (("controller_failover", "controller"), ("broker_loss", "other broker")):
            left.plot(
                sizes, [dig(r, key, "all_leaders_moved_s") for r in runs], "o" + style,
                label=f"{label} killed: all moved{name}",
            )  # fmt: skip
        if not build:
            left.plot(
                sizes, [dig(r, "controller_failover", "controller_s") for r in runs], "s:",
                label="controller killed: new controller",
            )  # fmt: skip
            right.plot(sizes, [dig(r, "create_s") for r in runs], "o-", label="create all topics")
            restarts = [dig(r, "restart_ready_s") for r in runs]
            right.plot(sizes, restarts, "o-", label="killed broker restarted")
    left.set(xlabel="partitions (3 brokers)", ylabel="seconds after SIGKILL", xscale="log")
    left.set_title("until every partition with a live ISR member is led", fontsize=10)
    left.set_ylim(bottom=0)
    left.legend(fontsize=8)
    right.set(xlabel="partitions (3 brokers)", ylabel="seconds", xscale="log")
    right.set_title("creating the topics, restarting a broker", fontsize=10)
    right.set_ylim(bottom=0)
    right.legend(fontsize=8)
    figure.tight_layout()
    path = DOCS_DIR / "cluster-failover.png"
    figure.savefig(path, dpi=100)
    written.append(path)

    runs = builds.get("", [])
    sizes = [r["partitions"] for r in runs]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    requests = [dig(r, "rest", "etcd_requests_per_s") for r in runs]
    left.plot(sizes, requests, "o-", label="requests/s")
    left.set(xlabel="partitions (3 brokers)", ylabel="etcd requests/s at rest", xscale="log")
    left.set_title("etcd requests at rest (3 brokers, 60 s)", fontsize=10)
    left.set_ylim(bottom=0)
    for node in ("1", "2", "3"):
        right.plot(
            sizes, [100 * dig(r, "rest", "broker_cpu_util", node) for r in runs], "o-",
            label=f"broker {node}",
        )  # fmt: skip
    right.plot(sizes, [100 * dig(r, "rest", "etcd_cpu_util") for r in runs], "s--", label="etcd")
    right.set(xlabel="partitions (3 brokers)", ylabel="% of one core", xscale="log")
    right.set_title("CPU at rest", fontsize=10)
    right.set_ylim(bottom=0)
    right.legend(fontsize=8)
    figure.tight_layout()
    path = DOCS_DIR / "cluster-rest.png"
    figure.savefig(path, dpi=100)
    written.append(path)
    plt.close("all")
    return written


Cell = Callable[[dict[str, Any]], str]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _each(field: str, fmt: str, scale: float = 1.0) -> Cell:
    """One value per broker of `result["rest"][field]`, in node order."""
    return lambda r: ", ".join(fmt.format(v * scale) for _, v in sorted(r["rest"][field].items()))


def _rows() -> list[tuple[str, Cell]]:
    rows: list[tuple[str, Cell]] = [
        ("replicas per broker",
         lambda r: ", ".join(str(v) for _, v in sorted(r["replicas_per_broker"].items()))),
        ("create all topics", lambda r: _seconds(r["create_s"])),
        ("metadata document in etcd", lambda r: f"{r['metadata_bytes'] / 1024:,.0f} KiB"),
        ("etcd keys at rest", lambda r: f"{r['etcd_keys']:,}"),
        ("etcd requests/s at rest", lambda r: f"{r['rest']['etcd_requests_per_s']:.2f}"),
        ("etcd bytes/s at rest (in / out)",
         lambda r: f"{r['rest']['etcd_received_bytes_per_s']:,.0f} / "
         f"{r['rest']['etcd_sent_bytes_per_s']:,.0f}"),
        ("etcd CPU at rest", lambda r: f"{100 * r['rest']['etcd_cpu_util']:.1f}%"),
        ("broker CPU at rest (each)", _each("broker_cpu_util", "{:.1f}%", 100)),
        ("broker RSS (each)", _each("broker_rss_bytes", "{:,.0f} MiB", 1 / 2**20)),
        ("open files (each)", _each("broker_open_files", "{:,.0f}")),
        ("files in the data dir (each)", _each("broker_data_files", "{:,.0f}")),
    ]  # fmt: skip
    for key, label in (("controller_failover", "controller"), ("broker_loss", "other broker")):
        if key == "controller_failover":
            rows.append(
                (
                    "controller killed: new controller",
                    lambda r: _seconds(r["controller_failover"]["controller_s"]),
                )
            )
        rows += [
            (f"{label} killed: first leader moved",
             lambda r, k=key: _seconds(r[k]["first_leader_moved_s"])),
            (f"{label} killed: all leaders moved",
             lambda r, k=key: _seconds(r[k]["all_leaders_moved_s"])),
            (f"{label} killed: led / moved / offline (RF 1)",
             lambda r, k=key: f"{r[k]['led_before']:,} / {r[k]['moved']:,} / {r[k]['offline']:,}"),
        ]  # fmt: skip
        if key == "controller_failover":
            rows += [
                ("killed broker restarted: ready", lambda r: _seconds(r["restart_ready_s"])),
                ("then full ISR", lambda r: _seconds(r["restart_full_isr_s"])),
            ]
    return rows


def table(results: list[dict[str, Any]]) -> list[str]:
    results = [r for runs in by_build(results).values() for r in runs]

    def heading(result: dict[str, Any]) -> str:
        label = result.get("label", "")
        return f"{result['partitions']:,} partitions" + (f" ({label})" if label else "")

    def safe(cell: Cell, result: dict[str, Any]) -> str:
        try:
            return cell(result)
        except (KeyError, TypeError):  # a run cut short: not measured
            return "-"

    lines = ["| | " + " | ".join(heading(r) for r in results) + " |"]
    lines.append("|---|" + "---:|" * len(results))
    for label, cell in _rows():
        lines.append(f"| {label} | " + " | ".join(safe(cell, r) for r in results) + " |")
    return lines


def load_results() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(RESULTS_DIR.glob("cluster-scale-*.json"))]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument(
        "--partitions-per-topic", type=int, default=0,
        help="default: a tenth of --partitions, at most PARTITIONS_PER_TOPIC_MAX",
    )  # fmt: skip
    parser.add_argument("--rf3-share", type=float, default=0.3)
    parser.add_argument("--rest-s", type=float, default=60.0)
    parser.add_argument("--settle-s", type=float, default=10.0)
    parser.add_argument("--label", default="", help="a name for the build measured")
    parser.add_argument(
        "--loss-first", action="store_true",
        help="kill a broker that is not the controller first, then the controller (no restart)",
    )  # fmt: skip
    parser.add_argument(
        "--no-profile-rest", dest="profile_rest", action="store_false",
        help="no py-spy on broker 1 while at rest",
    )  # fmt: skip
    parser.add_argument("--plot", action="store_true", help="only plot the results so far")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    if not args.plot:
        RESULTS_DIR.mkdir(exist_ok=True)
        suffix = f"-{args.label}" if args.label else ""
        path = RESULTS_DIR / f"cluster-scale-{args.partitions}{suffix}.json"
        run(args, path)
        print(f"wrote {path}")
    results = load_results()
    print("\n".join(table(results)))
    if args.plot:
        for path in plot(results):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
