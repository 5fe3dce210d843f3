"""`scale_broker.py`'s results as PNGs (docs/benchmarks/scale-*.png) and markdown
tables: each measure against the size, and the memory each thing costs (the
slope of the RSS step it causes, fitted over the sizes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

# (RSS step, the stage before it, the size's count it is divided by)
MEMORY_STEPS = (
    ("topics", "empty", "partitions", "partition"),
    ("segments", "topics", "segments_on_disk", "segment"),
    ("groups", "data", "groups", "group"),
    ("connections", "groups", "connections", "connection"),
)
# (title, unit, [(label, value getter)])
PANELS: tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...] = (
    ("Start-up", "s", (
        ("empty data dir", lambda r: r["start_empty_s"]),
        ("restart on the data (recovery)", lambda r: r["recovery_start_s"]),
    )),
    ("Shutdown (SIGTERM to exit)", "s", (
        ("loaded, connections open", lambda r: r["shutdown_s"]),
        ("after the restart", lambda r: r["shutdown_after_restart_s"]),
    )),
    ("RSS", "MiB", (
        ("empty", lambda r: r["rss_mb"]["empty"]),
        ("+ partitions", lambda r: r["rss_mb"]["topics"]),
        ("+ segments", lambda r: r["rss_mb"]["segments"]),
        ("+ groups", lambda r: r["rss_mb"]["groups"]),
        ("+ connections", lambda r: r["rss_mb"]["connections"]),
        ("after the restart", lambda r: r["rss_mb"]["after_restart"]),
    )),
    ("Idle CPU", "% of a core", (
        ("loaded, connections open", lambda r: 100 * r["idle_cpu_util"]),
        ("after the restart", lambda r: 100 * r["idle_cpu_util_after_restart"]),
    )),
    ("Throughput over every partition", "msg/s (1,000 B)", (
        ("produce (acks=all)", lambda r: r["produce"]["msgs_per_s"]),
        ("fetch (one consumer, every partition)", lambda r: r["fetch"]["msgs_per_s"]),
    )),
    ("Broker CPU per message", "µs", (
        ("produce", lambda r: r["produce"]["broker_cpu_us_per_message"]),
        ("fetch", lambda r: r["fetch"]["broker_cpu_us_per_message"]),
    )),
    ("Metadata, every topic (v1)", "ms", (
        ("loaded, connections open", lambda r: r["metadata"]["median_ms"]),
        ("after the restart", lambda r: r["metadata_after_restart"]["median_ms"]),
    )),
    ("GET /metrics", "ms", (
        ("median", lambda r: r["metrics"]["median_ms"]),
    )),
    ("Set-up (not a target)", "s", (
        ("create topics", lambda r: r["create_topics_s"]),
        ("fill segments", lambda r: r["fill_s"]),
        ("make groups", lambda r: r["groups_s"]),
    )),
)  # fmt: skip


def _size_label(result: dict[str, Any]) -> str:
    size = result["size"]
    return (f"{size['partitions']:,} p / {size['connections']:,} c / {size['groups']:,} g / "
            f"{result['segments_on_disk']:,} s")  # fmt: skip


def plot_results(results: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """One grid (every measure against partitions) and one memory plot."""
    out_dir.mkdir(parents=True, exist_ok=True)
    xs = [r["size"]["partitions"] for r in results]
    figure, axes = plt.subplots(3, 3, figsize=(15, 12))
    for axis, (title, unit, series) in zip(axes.flat, PANELS, strict=True):
        for label, value in series:
            axis.plot(xs, [value(r) for r in results], marker="o", label=label)
        axis.set_title(title)
        axis.set_ylabel(unit)
        axis.set_xlabel("partitions (connections, groups, segments in proportion)")
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    figure.suptitle(
        "One Weir broker at growing size: partitions, 0.5 connections, 0.1 groups and "
        "10 segments per partition"
    )
    figure.tight_layout()
    grid = out_dir / "scale-broker.png"
    figure.savefig(grid, dpi=80)
    plt.close(figure)

    figure, axes = plt.subplots(1, len(MEMORY_STEPS), figsize=(16, 4))
    for axis, (stage, before, count_key, unit) in zip(axes, MEMORY_STEPS, strict=True):
        counts, steps = _memory_points(results, stage, before, count_key)
        axis.plot(counts, steps, marker="o")
        slope, _ = _fit(counts, steps)
        axis.set_title(f"RSS step: {slope * 1024:.1f} KiB a {unit}")
        axis.set_xlabel(f"{unit}s")
        axis.set_ylabel("MiB")
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    figure.tight_layout()
    memory = out_dir / "scale-memory.png"
    figure.savefig(memory, dpi=80)
    plt.close(figure)
    return [grid, memory]


def _count(result: dict[str, Any], key: str) -> int:
    return int(result.get(key, result["size"].get(key, 0)))


def _memory_points(
    results: list[dict[str, Any]], stage: str, before: str, count_key: str
) -> tuple[list[int], list[float]]:
    counts = [_count(r, count_key) for r in results]
    steps = [r["rss_mb"][stage] - r["rss_mb"][before] for r in results]
    return counts, steps


def _fit(counts: list[int], steps: list[float]) -> tuple[float, float]:
    """Least-squares slope (MiB per unit) and intercept; the step itself over one point."""
    if len(counts) < 2:
        return (steps[0] / counts[0] if counts and counts[0] else 0.0), 0.0
    slope, intercept = np.polyfit(counts, steps, 1)
    return float(slope), float(intercept)


def _row(name: str, values: list[str]) -> str:
    return f"| {name} | " + " | ".join(values) + " |"


def print_tables(results: list[dict[str, Any]]) -> None:
    def fmt(value: Any, spec: str) -> list[str]:
        return [format(v, ",.0f" if spec == "auto" and v >= 1000 else spec.replace("auto", ",.2f"))
                for v in (value(r) for r in results)]  # fmt: skip

    header = [_size_label(r) for r in results]
    print(_row("", header))
    print("|---|" + "---:|" * len(results))
    for title, unit, series in PANELS:
        for label, value in series:
            print(_row(f"{title}, {label} ({unit})", fmt(value, "auto")))
    print(_row("Metadata response (bytes)", fmt(lambda r: r["metadata"]["response_bytes"], ",.0f")))
    print(_row("/metrics response (bytes)", fmt(lambda r: r["metrics"]["response_bytes"], ",.0f")))
    print(_row("Open descriptors, loaded", fmt(lambda r: r["open_files"], ",")))
    print()
    print("| RSS step | per unit, each size | fitted slope over the sizes |")
    print("|---|---|---:|")
    for stage, before, count_key, unit in MEMORY_STEPS:
        counts, steps = _memory_points(results, stage, before, count_key)
        each = ", ".join(f"{s * 1024 / c:.1f}" for c, s in zip(counts, steps, strict=True) if c)
        slope, intercept = _fit(counts, steps)
        print(f"| {stage} (KiB per {unit}) | {each} | {slope * 1024:.1f} "
              f"(intercept {intercept:.1f} MiB) |")  # fmt: skip
    print()


def plot_idle_connections(runs: list[dict[str, Any]], out_dir: Path, labels: list[str]) -> Path:
    """Idle CPU and RSS against open client connections, one line a source tree."""
    figure, (cpu_axis, rss_axis) = plt.subplots(1, 2, figsize=(12, 4))
    for run, label in zip(runs, labels, strict=True):
        counts = [p["connections"] for p in run["points"]]
        cpu_axis.plot(counts, [100 * p["idle_cpu_util"] for p in run["points"]],
                      marker="o", label=label)  # fmt: skip
        rss_axis.plot(counts, [p["rss_mb"] for p in run["points"]], marker="o", label=label)
    cpu_axis.set_title("Idle CPU of an empty broker against idle connections")
    cpu_axis.set_ylabel("% of a core")
    rss_axis.set_title("RSS against idle connections")
    rss_axis.set_ylabel("MiB")
    for axis in (cpu_axis, rss_axis):
        axis.set_xlabel("open client connections (one ApiVersions each)")
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    path = out_dir / "scale-connections.png"
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


def plot_metadata_steps(data: dict[str, Any], out_dir: Path) -> Path:
    """Metadata (every topic) and GET /metrics against partitions, topics alone."""
    points = data["points"]
    counts = [p["partitions"] for p in points]
    figure, (meta_axis, metrics_axis) = plt.subplots(1, 2, figsize=(12, 4))
    meta_axis.plot(counts, [p["metadata"]["median_ms"] for p in points], marker="o")
    meta_axis.set_title("Metadata v1, every topic (median)")
    meta_axis.set_ylabel("ms")
    metrics_axis.plot(counts, [p["metrics"]["median_ms"] for p in points], marker="o")
    metrics_axis.set_title("GET /metrics (median)")
    metrics_axis.set_ylabel("ms")
    for axis in (meta_axis, metrics_axis):
        axis.set_xlabel("partitions (topics of 50; no data, groups or connections)")
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    figure.tight_layout()
    path = out_dir / "scale-metadata.png"
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


def print_side_tables(runs: list[dict[str, Any]], labels: list[str], steps: dict[str, Any]) -> None:
    if runs:
        print("| idle connections | " + " | ".join(labels) + " |")
        print("|---:|" + "---:|" * len(labels))
        for index, point in enumerate(runs[0]["points"]):
            cells = [f"{100 * r['points'][index]['idle_cpu_util']:.1f} % / "
                     f"{r['points'][index]['rss_mb']:.0f} MiB" for r in runs]  # fmt: skip
            print(f"| {point['connections']:,} | " + " | ".join(cells) + " |")
        print()
    if steps:
        print("| partitions | Metadata (ms) | bytes | /metrics (ms) | bytes | RSS (MiB) |")
        print("|---:|---:|---:|---:|---:|---:|")
        for p in steps["points"]:
            print(f"| {p['partitions']:,} | {p['metadata']['median_ms']:.1f} | "
                  f"{p['metadata']['response_bytes']:,.0f} | {p['metrics']['median_ms']:.0f} | "
                  f"{p['metrics']['response_bytes']:,.0f} | {p['rss_mb']:.0f} |")  # fmt: skip
