"""Prometheus text exposition of the broker's counters and gauges."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

GaugeSample = tuple[dict[str, str], float]


@dataclass
class HistogramSample:
    """A cumulative histogram: (upper bound, observations <= it) per bucket."""

    buckets: list[tuple[float, int]]
    sum: float
    count: int


@dataclass
class Metrics:
    requests_total: Counter[str] = field(default_factory=Counter)
    request_errors_total: Counter[str] = field(default_factory=Counter)
    connections_closed_by_broker_total: Counter[str] = field(default_factory=Counter)
    connections_open: int = 0
    connections_total: int = 0
    connections_rejected_total: int = 0
    connections_rejected_per_address_total: int = 0
    http_connections_evicted_total: int = 0
    bytes_received_total: int = 0
    bytes_sent_total: int = 0
    produced_batches_total: int = 0
    produced_bytes_total: int = 0
    produced_duplicate_batches_total: int = 0
    producer_ids_allocated_total: int = 0
    cold_read_bytes_total: int = 0
    cold_reads_on_loop_total: int = 0
    gauges: dict[str, tuple[str, Callable[[], Iterable[GaugeSample]]]] = field(default_factory=dict)
    counters: dict[str, tuple[str, Callable[[], float]]] = field(default_factory=dict)
    counter_families: dict[str, tuple[str, str, Callable[[], Mapping[str, int]]]] = field(
        default_factory=dict
    )
    histograms: dict[str, tuple[str, Callable[[], HistogramSample]]] = field(default_factory=dict)

    def register_gauge(
        self, name: str, help_text: str, sample: Callable[[], Iterable[GaugeSample]]
    ) -> None:
        self.gauges[name] = (help_text, sample)

    def register_counter(self, name: str, help_text: str, sample: Callable[[], float]) -> None:
        """A counter owned elsewhere (read at each scrape)."""
        self.counters[name] = (help_text, sample)

    def register_counter_family(
        self, name: str, help_text: str, label: str, counts: Callable[[], Mapping[str, int]]
    ) -> None:
        """Counters owned elsewhere, one per value of `label` (read at each scrape)."""
        self.counter_families[name] = (help_text, label, counts)

    def register_histogram(
        self, name: str, help_text: str, sample: Callable[[], HistogramSample]
    ) -> None:
        self.histograms[name] = (help_text, sample)

    def render(self) -> str:
        lines: list[str] = []
        _counter_family(
            lines, "weir_requests_total", "Requests handled, by API.", "api", self.requests_total
        )
        _counter_family(
            lines,
            "weir_request_errors_total",
            "Requests that failed or closed the connection, by API.",
            "api",
            self.request_errors_total,
        )
        _counter_family(
            lines,
            "weir_connections_closed_by_broker_total",
            "Kafka connections the broker closed, by reason: request (a request it "
            "could not answer), timeout (idle or mid-frame), frame_size.",
            "reason",
            self.connections_closed_by_broker_total,
        )
        scalars: list[tuple[str, str, str, float]] = [
            ("weir_connections_open", "gauge", "Open Kafka connections.", self.connections_open),
            (
                "weir_connections_total",
                "counter",
                "Accepted Kafka connections.",
                self.connections_total,
            ),
            (
                "weir_connections_rejected_total",
                "counter",
                "Connections closed at once because connections_max was reached.",
                self.connections_rejected_total,
            ),
            (
                "weir_connections_rejected_per_address_total",
                "counter",
                "Connections closed at once because their address already had "
                "connections_per_address_max open.",
                self.connections_rejected_per_address_total,
            ),
            (
                "weir_http_connections_evicted_total",
                "counter",
                "Idle HTTP connections closed to make room for a new one (http_connections_max).",
                self.http_connections_evicted_total,
            ),
            (
                "weir_bytes_received_total",
                "counter",
                "Kafka request bytes received.",
                self.bytes_received_total,
            ),
            (
                "weir_bytes_sent_total",
                "counter",
                "Kafka response bytes sent.",
                self.bytes_sent_total,
            ),
            (
                "weir_produced_batches_total",
                "counter",
                "Record batches appended.",
                self.produced_batches_total,
            ),
            (
                "weir_produced_bytes_total",
                "counter",
                "Record batch bytes appended.",
                self.produced_bytes_total,
            ),
            (
                "weir_produced_duplicate_batches_total",
                "counter",
                "Idempotent producers' retries answered from the log, not appended again.",
                self.produced_duplicate_batches_total,
            ),
            (
                "weir_producer_ids_allocated_total",
                "counter",
                "Producer ids handed out by InitProducerId.",
                self.producer_ids_allocated_total,
            ),
            (
                "weir_cold_read_bytes_total",
                "counter",
                "Log bytes Fetch found outside the page cache, read in on the disk executor.",
                self.cold_read_bytes_total,
            ),
            (
                "weir_cold_reads_on_loop_total",
                "counter",
                "Fetches whose read waited on the disk on the event loop (the page cache "
                "dropped what the disk executor had read in, COLD_READ_ATTEMPTS_MAX times).",
                self.cold_reads_on_loop_total,
            ),
        ]
        scalars += [
            (name, "counter", help_text, sample())
            for name, (help_text, sample) in sorted(self.counters.items())
        ]
        for name, (help_text, label, counts) in sorted(self.counter_families.items()):
            _counter_family(lines, name, help_text, label, counts())
        for name, kind, help_text, value in scalars:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]
        for name, (help_text, histogram) in sorted(self.histograms.items()):
            _histogram(lines, name, help_text, histogram())
        for name, (help_text, sample) in sorted(self.gauges.items()):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
            for labels, sample_value in sample():
                lines.append(f"{name}{_labels(labels)} {sample_value}")
        return "\n".join(lines) + "\n"


def _histogram(lines: list[str], name: str, help_text: str, sample: HistogramSample) -> None:
    lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for bound, count in sample.buckets:
        lines.append(f'{name}_bucket{{le="{bound:g}"}} {count}')
    lines.append(f'{name}_bucket{{le="+Inf"}} {sample.count}')
    lines += [f"{name}_sum {sample.sum}", f"{name}_count {sample.count}"]


def _counter_family(
    lines: list[str], name: str, help_text: str, label: str, counts: Mapping[str, int]
) -> None:
    lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
    for key, value in sorted(counts.items()):
        lines.append(f"{name}{_labels({label: key})} {value}")


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
