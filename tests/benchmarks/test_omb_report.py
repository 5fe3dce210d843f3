"""benchmarks/omb_report.py: the ratio table's arithmetic (each round's pair, the
spread over rounds) and its text, with samples written by hand (no broker, no Go)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import omb_report  # noqa: E402  (benchmarks/ is not a package)


def sample(broker: str, round_no: int, records_per_s: float, cpu_us: float) -> dict[str, Any]:
    return {
        "broker": broker,
        "round": round_no,
        "workload": "max-rate",
        "phase": "produce",
        "value_bytes": 1024,
        "partitions": 16,
        "records_per_s": records_per_s,
        "mb_per_s": records_per_s * 1024 / 1e6,
        "broker_cpu_us_per_msg": cpu_us,
        "latency": {"p99_ms": 4.0, "mean_ms": 2.0},
        "fsync": {"mean_ms": 1.0} if broker == "weir" else None,
    }


def test_ratios_pair_each_round_and_spread_over_rounds() -> None:
    samples = [
        sample("weir", 1, 200_000, 1.0),
        sample("kafka", 1, 100_000, 4.0),
        sample("weir", 2, 300_000, 1.0),
        sample("kafka", 2, 100_000, 2.0),
    ]
    summary = omb_report.summarize(samples, ["weir", "kafka"])
    cell = summary[omb_report.cell_key("max-rate", "produce", 1024, 16)]
    assert cell["weir"]["records_per_s"] == {"median": 250_000, "min": 200_000, "max": 300_000}
    assert cell["weir/kafka"]["records_per_s"] == {"median": 2.5, "min": 2.0, "max": 3.0}
    assert cell["weir/kafka"]["broker_cpu_us_per_msg"] == {"median": 0.375, "min": 0.25, "max": 0.5}
    assert cell["weir"]["fsync_share"] == {"median": 0.5, "min": 0.5, "max": 0.5}
    assert cell["kafka"]["fsync_share"] is None


def test_error_samples_and_a_missing_round_stay_out() -> None:
    samples = [
        sample("weir", 1, 200_000, 1.0),
        sample("kafka", 1, 100_000, 4.0),
        sample("weir", 2, 300_000, 1.0),
        {"broker": "kafka", "round": 2, "error": "BrokerError: gone"},
    ]
    cell = omb_report.summarize(samples, ["weir", "kafka"])["max-rate/produce/1024B/16p"]
    assert cell["kafka"]["rounds"] == 1
    assert cell["weir/kafka"]["records_per_s"] == {"median": 2.0, "min": 2.0, "max": 2.0}


def test_fio_share_is_per_round() -> None:
    samples = [sample("weir", 1, 100_000, 1.0), sample("weir", 2, 100_000, 1.0)]
    omb_report.add_fio_shares(samples, {1: 204.8, 2: 409.6})
    assert [round(s["fio_share"], 3) for s in samples] == [0.5, 0.25]


def test_range_text_is_compact() -> None:
    assert omb_report.range_text({"median": 2.5e6, "min": 2.37e6, "max": 2.61e6}) == "2.37–2.61 M"
    assert omb_report.range_text({"median": 220e3, "min": 219e3, "max": 221e3}) == "219–221k"
    assert omb_report.range_text({"median": 0.8, "min": 0.8, "max": 0.8}, 2) == "0.80"
    assert omb_report.range_text(None) == "—"


def test_goal_table_has_a_row_per_goal_and_a_ratio_column_per_peer() -> None:
    samples = [sample("weir", 1, 200_000, 1.0), sample("kafka", 1, 100_000, 4.0)]
    summary = omb_report.summarize(samples, ["weir", "kafka"])
    lines = omb_report.goal_table(summary, ["weir", "kafka"], omb_report.goal_rows([1024], 16))
    assert lines[0] == "|  | Weir | Kafka 4.4 | Weir/Kafka 4.4 |"
    row = next(line for line in lines if line.startswith("| produce 1 KiB, msg/s"))
    assert row == "| produce 1 KiB, msg/s | 200k | 100k | 2.00× |"
