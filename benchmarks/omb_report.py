"""`omb.py`'s report: every sample's figures per workload and broker over the rounds
(median, min and max), each round's Weir / peer ratios, and the markdown tables:
the goal table (one row a goal metric, Weir / Kafka / Tansu and the ratios), every
workload, and the generator's CPU next to the broker's."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Sample = dict[str, Any]
NAMES = {"weir": "Weir", "kafka": "Kafka 4.4", "tansu": "Tansu"}


def cell_key(workload: str, phase: str, size: int, partitions: int) -> str:
    return f"{workload}/{phase}/{size}B/{partitions}p"


def key_of(sample: Sample) -> str:
    return cell_key(
        sample["workload"], sample["phase"], sample["value_bytes"], sample["partitions"]
    )


def _latency(name: str, field: str) -> Callable[[Sample], float | None]:
    def get(sample: Sample) -> float | None:
        latency = sample.get(name) or {}
        value = latency.get(field)
        return float(value) if value is not None else None

    return get


def _fsync_share(sample: Sample) -> float | None:
    """Weir's mean fsync round over its mean send -> acknowledgement latency."""
    fsync, latency = sample.get("fsync"), sample.get("latency")
    if not fsync or not latency or not latency.get("mean_ms"):
        return None
    return float(fsync["mean_ms"]) / float(latency["mean_ms"])


def _plain(field: str) -> Callable[[Sample], float | None]:
    def get(sample: Sample) -> float | None:
        value = sample.get(field)
        return float(value) if value is not None else None

    return get


METRICS: dict[str, Callable[[Sample], float | None]] = {
    "records_per_s": _plain("records_per_s"),
    "mb_per_s": _plain("mb_per_s"),
    "broker_cpu_us_per_msg": _plain("broker_cpu_us_per_msg"),
    "broker_cpu_util": _plain("broker_cpu_util"),
    "generator_cpu_util": _plain("generator_cpu_util"),
    "generator_cpu_us_per_msg": _plain("generator_cpu_us_per_msg"),
    "machine_idle_util": _plain("machine_idle_util"),
    "fio_share": _plain("fio_share"),
    "p50_ms": _latency("latency", "p50_ms"),
    "p99_ms": _latency("latency", "p99_ms"),
    "p99_9_ms": _latency("latency", "p99_9_ms"),
    "max_ms": _latency("latency", "max_ms"),
    "mean_ms": _latency("latency", "mean_ms"),
    "e2e_p50_ms": _latency("e2e_latency", "p50_ms"),
    "e2e_p99_ms": _latency("e2e_latency", "p99_ms"),
    "e2e_p99_9_ms": _latency("e2e_latency", "p99_9_ms"),
    "fsync_mean_ms": _latency("fsync", "mean_ms"),
    "fsync_share": _fsync_share,
}


def spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def add_fio_shares(samples: list[Sample], fio_mb_per_s: dict[int, float]) -> None:
    """Each max-rate produce's MB/s as a share of its round's fio fdatasync MB/s."""
    for sample in samples:
        disk = fio_mb_per_s.get(sample.get("round", 0))
        if disk and sample.get("workload") == "max-rate" and sample.get("mb_per_s"):
            sample["fio_share"] = sample["mb_per_s"] / disk


def summarize(samples: list[Sample], brokers: list[str]) -> dict[str, Any]:
    """{cell: {broker: {metric: spread}, "weir/peer": {metric: spread of ratios}}}."""
    ok = [s for s in samples if "error" not in s and "phase" in s]
    out: dict[str, Any] = {}
    for key in dict.fromkeys(key_of(s) for s in ok):
        mine = [s for s in ok if key_of(s) == key]
        entry: dict[str, Any] = {}
        for broker in brokers:
            theirs = [s for s in mine if s["broker"] == broker]
            entry[broker] = {
                name: spread([v for s in theirs if (v := get(s)) is not None])
                for name, get in METRICS.items()
            }
            entry[broker]["rounds"] = len(theirs)
        if "weir" in brokers:
            for peer in (b for b in brokers if b != "weir"):
                entry[f"weir/{peer}"] = ratios(mine, "weir", peer)
        out[key] = entry
    return out


def ratios(samples: list[Sample], broker: str, peer: str) -> dict[str, Any]:
    """Per round, broker's figure over peer's; the spread of those ratios."""
    by_round: dict[int, dict[str, Sample]] = {}
    for s in samples:
        by_round.setdefault(s["round"], {})[s["broker"]] = s
    pairs = [(r[broker], r[peer]) for r in by_round.values() if broker in r and peer in r]
    out: dict[str, Any] = {}
    for name, get in METRICS.items():
        values = []
        for a, b in pairs:
            va, vb = get(a), get(b)
            if va is not None and vb:
                values.append(va / vb)
        out[name] = spread(values)
    return out


def number(value: float, digits: int | None = None) -> str:
    """Compact: 2.37 M, 221k, 952, 0.82."""
    if digits is not None:
        return f"{value:,.{digits}f}"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f} M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.0f}k"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def range_text(cell: dict[str, float] | None, digits: int | None = None, scale: float = 1) -> str:
    """min–max over the rounds (one value when they agree at this precision)."""
    if not cell:
        return "—"
    low, high = number(cell["min"] * scale, digits), number(cell["max"] * scale, digits)
    if low == high:
        return low
    unit = ""
    for suffix in (" M", "k"):
        if low.endswith(suffix) and high.endswith(suffix):
            low, unit = low.removesuffix(suffix), suffix
            high = high.removesuffix(suffix)
    return f"{low}–{high}{unit}"


@dataclass(frozen=True)
class Row:
    label: str
    key: str
    metric: str
    digits: int | None = None
    scale: float = 1
    ratio: bool = True


def goal_rows(
    sizes: list[int], partitions: int, fixed_fraction: float = 0.5, e2e_fraction: float = 0.25
) -> list[Row]:
    def size_text(size: int) -> str:
        return "1 KiB" if size == 1024 else f"{size} B"

    rows: list[Row] = []
    for size in sizes:
        produce = cell_key("max-rate", "produce", size, partitions)
        rows.append(Row(f"produce {size_text(size)}, msg/s", produce, "records_per_s"))
        rows.append(Row(f"produce {size_text(size)}, MB/s", produce, "mb_per_s", 0))
        rows.append(Row(f"produce {size_text(size)}, broker CPU µs/msg", produce,
                        "broker_cpu_us_per_msg", 2))  # fmt: skip
    large = max(sizes)
    rows.append(
        Row(f"produce {size_text(large)}, % of fio fdatasync MB/s (1 MiB writes)",
            cell_key("max-rate", "produce", large, partitions), "fio_share", 0, 100, False)
    )  # fmt: skip
    for size in sizes:
        fixed = cell_key("fixed-rate", "produce", size, partitions)
        half = f"produce {size_text(size)} at {fixed_fraction:.0%} of max rate"
        rows += [
            Row(f"{half}, p99 ms (send → ack)", fixed, "p99_ms", 1),
            Row(f"{half}, p99.9 ms", fixed, "p99_9_ms", 1),
            Row(f"{half}, Weir's mean fsync round ms", fixed, "fsync_mean_ms", 2, ratio=False),
            Row(f"{half}, fsync share of mean latency %", fixed, "fsync_share", 0, 100, False),
        ]
    for size in sizes:
        e2e = cell_key("e2e", "produce", size, partitions)
        rows.append(Row(f"end to end {size_text(size)} at {e2e_fraction:.0%} of max rate, "
                        "p99 ms (send → receive)", e2e, "e2e_p99_ms", 1))  # fmt: skip
    for size in sizes:
        drain = cell_key("backlog", "drain", size, partitions)
        rows.append(Row(f"consume {size_text(size)} (backlog drain), msg/s", drain,
                        "records_per_s"))  # fmt: skip
        rows.append(Row(f"consume {size_text(size)}, broker CPU µs/msg", drain,
                        "broker_cpu_us_per_msg", 2))  # fmt: skip
    return rows


def goal_table(summary: dict[str, Any], brokers: list[str], rows: list[Row]) -> list[str]:
    peers = [b for b in brokers if b != "weir"] if "weir" in brokers else []
    header = ["", *(NAMES.get(b, b) for b in brokers), *(f"Weir/{NAMES[p]}" for p in peers)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for row in rows:
        entry = summary.get(row.key, {})
        cells = [range_text(entry.get(b, {}).get(row.metric), row.digits, row.scale)
                 for b in brokers]  # fmt: skip
        for peer in peers:
            ratio = entry.get(f"weir/{peer}", {}).get(row.metric) if row.ratio else None
            cells.append(range_text(ratio, 2) + "×" if ratio else "—")
        lines.append(f"| {row.label} | " + " | ".join(cells) + " |")
    return lines


def median_text(cell: dict[str, float] | None, digits: int | None = None, scale: float = 1) -> str:
    return number(cell["median"] * scale, digits) if cell else "—"


def workload_table(summary: dict[str, Any], brokers: list[str]) -> list[str]:
    lines = [
        "| workload | phase | value | partitions | broker | msg/s | MB/s | broker CPU µs/msg "
        "| broker CPU | generator CPU | machine idle | p50 ms | p99 ms | p99.9 ms | max ms "
        "| e2e p99 ms | rounds |",
        "|---|---|---:|---:|---|" + "---:|" * 12,
    ]
    for key, entry in summary.items():
        workload, phase, size, partitions = key.split("/")
        for broker in brokers:
            c = entry.get(broker)
            if not c or not c["rounds"]:
                continue
            figures = [
                median_text(c["records_per_s"]),
                median_text(c["mb_per_s"], 0),
                median_text(c["broker_cpu_us_per_msg"], 2),
                median_text(c["broker_cpu_util"], 0, 100) + "%",
                median_text(c["generator_cpu_util"], 0, 100) + "%",
                median_text(c["machine_idle_util"], 0, 100) + "%",
                *(median_text(c[m], 1) for m in ("p50_ms", "p99_ms", "p99_9_ms", "max_ms")),
                median_text(c["e2e_p99_ms"], 1),
                str(c["rounds"]),
            ]
            lines.append(
                f"| {workload} | {phase} | {size.removesuffix('B')} B "
                f"| {partitions.removesuffix('p')} | {NAMES.get(broker, broker)} | "
                + " | ".join(figures)
                + " |"
            )
    return lines


def markdown(result: dict[str, Any]) -> str:
    args = result["args"]
    brokers, summary = args["brokers"], result["summary"]
    fio = result.get("fio", [])
    fio_text = ", ".join(f"{f['write_MBps']:.0f}" for f in fio if "write_MBps" in f) or "—"
    lines = [
        f"Weir / Kafka / Tansu, {args['rounds']} rounds, {args['main_partitions']} partitions "
        f"unless stated; min–max over the rounds; ratios are each round's pair "
        f"(msg/s above 1: Weir faster; CPU and latency below 1: Weir cheaper or faster). "
        f"fio sequential write, fdatasync per 1 MiB block: {fio_text} MB/s per round.",
        "",
        *goal_table(
            summary,
            brokers,
            goal_rows(
                args["sizes"],
                args["main_partitions"],
                args["fixed_rate_fraction"],
                args["e2e_rate_fraction"],
            ),
        ),
        "",
        "Every workload, medians over the rounds (CPU: % of one core; machine idle: "
        f"% of one core left idle on the {result['machine']['cpus']}-CPU machine):",
        "",
        *workload_table(summary, brokers),
    ]
    return "\n".join(lines)
