"""The broker's metrics, exposed through prometheus_client's registry and
exposition (Prometheus text, or OpenMetrics when the scraper's Accept asks).

The hot paths only add to plain ints and dicts here (`Metrics`' fields,
`TopicTraffic`, `RequestLatency`); everything is read at scrape time by one
custom collector (`MetricsCollector`), as are the values other modules
register (`register_gauge`, `register_counter`, ...: callables read at each
scrape). No prometheus_client metric object is touched per request.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

GaugeSample = tuple[dict[str, str], float]
# A /metrics page of more samples is encoded on a worker thread (about 5 ms).
SAMPLES_ON_LOOP_MAX = 1000
# Per Trio run (a CapacityLimiter belongs to one).
_ENCODE_LIMITER: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("encode_limiter")
# A Kafka request's time in the broker, from its frame read to its response
# ready to send (a Fetch's wait for records and an acks=all Produce's wait for
# its followers included).
REQUEST_SECONDS_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


@dataclass
class HistogramSample:
    """A cumulative histogram: (upper bound, observations <= it) per bucket."""

    buckets: list[tuple[float, int]]
    sum: float
    count: int


class RequestLatency:
    """One API's request times: observations per bucket (not cumulative: one
    increment per request), their sum and count."""

    __slots__ = ("bucket_counts", "count", "seconds_total")

    def __init__(self) -> None:
        self.bucket_counts = [0] * (len(REQUEST_SECONDS_BUCKETS) + 1)  # the last: +Inf
        self.seconds_total = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.bucket_counts[bisect.bisect_left(REQUEST_SECONDS_BUCKETS, seconds)] += 1
        self.seconds_total += seconds
        self.count += 1

    def sample(self) -> HistogramSample:
        cumulative, running = [], 0
        for bound, count in zip(REQUEST_SECONDS_BUCKETS, self.bucket_counts, strict=False):
            running += count
            cumulative.append((bound, running))
        return HistogramSample(cumulative, self.seconds_total, self.count)


class TopicTraffic:
    """What clients produced to and fetched from one topic on this broker.
    Fetched records count the offsets each fetch moved a consumer over."""

    __slots__ = ("fetched_bytes", "fetched_records", "produced_bytes", "produced_records")

    def __init__(self) -> None:
        self.produced_bytes = 0
        self.produced_records = 0
        self.fetched_bytes = 0
        self.fetched_records = 0


@dataclass
class Metrics:
    requests_total: Counter[str] = field(default_factory=Counter)
    request_errors_total: Counter[str] = field(default_factory=Counter)
    connections_closed_by_broker_total: Counter[str] = field(default_factory=Counter)
    # SASL logins by result: success, failure.
    sasl_authentications_total: Counter[str] = field(default_factory=Counter)
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
    request_latency: dict[str, RequestLatency] = field(default_factory=dict)
    topic_traffic: dict[str, TopicTraffic] = field(default_factory=dict)
    gauges: dict[str, tuple[str, Callable[[], Iterable[GaugeSample]]]] = field(default_factory=dict)
    counters: dict[str, tuple[str, Callable[[], float]]] = field(default_factory=dict)
    counter_families: dict[str, tuple[str, str, Callable[[], Mapping[str, int]]]] = field(
        default_factory=dict
    )
    histograms: dict[str, tuple[str, Callable[[], HistogramSample]]] = field(default_factory=dict)
    collectors: list[Callable[[], Iterable[Metric]]] = field(default_factory=list)
    registry: CollectorRegistry = field(init=False)

    def __post_init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(MetricsCollector(self))
        # The standard process_* metrics (CPU seconds, resident memory, open fds).
        ProcessCollector(registry=self.registry)

    # -- the hot path --------------------------------------------------------------

    def observe_request(self, api: str, seconds: float) -> None:
        latency = self.request_latency.get(api)
        if latency is None:
            latency = self.request_latency[api] = RequestLatency()
        latency.observe(seconds)

    def forget_topic(self, topic: str) -> None:
        """The topic is no longer served here (deleted, or its replicas moved away):
        its traffic families go, as Kafka removes a deleted topic's metrics."""
        self.topic_traffic.pop(topic, None)

    def traffic(self, topic: str) -> TopicTraffic:
        traffic = self.topic_traffic.get(topic)
        if traffic is None:
            traffic = self.topic_traffic[topic] = TopicTraffic()
        return traffic

    # -- values owned elsewhere, read at each scrape -------------------------------

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

    def register_collector(self, collect: Callable[[], Iterable[Metric]]) -> None:
        """Metric families built at each scrape (prometheus_client's own types)."""
        self.collectors.append(collect)

    # -- exposition ----------------------------------------------------------------

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The body and content type answering a scrape with this Accept header."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    async def exposition_off_loop(self, accept: str) -> tuple[bytes, str]:
        """`exposition`, with the values read on the Trio thread (the collectors
        read broker state) and, for a page of more than SAMPLES_ON_LOOP_MAX
        samples, the text encoded on a worker thread: encoding is most of a
        scrape's time (about 5 µs a sample), which would otherwise stall every
        connection for as long (a broker with thousands of partitions). A small
        page is encoded on the loop: the thread hand-off would cost more."""
        encoder, content_type = choose_encoder(accept)
        snapshot = _Snapshot(list(self.registry.collect()))
        if sum(len(family.samples) for family in snapshot.families) <= SAMPLES_ON_LOOP_MAX:
            return encoder(snapshot), content_type
        # One scrape encoded at a time: one thread, one page being built.
        try:
            limiter = _ENCODE_LIMITER.get()
        except LookupError:
            limiter = trio.CapacityLimiter(1)
            _ENCODE_LIMITER.set(limiter)
        return await trio.to_thread.run_sync(encoder, snapshot, limiter=limiter), content_type

    def render(self) -> str:
        """The Prometheus text format."""
        return self.exposition("")[0].decode()


class _Snapshot(Collector):
    """Metric families already collected (plain values: safe on any thread)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


class MetricsCollector(Collector):
    """Every family of `Metrics`, read when scraped."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        metrics = self.metrics
        yield _counters(
            "weir_requests_total", "Requests handled, by API.", "api", metrics.requests_total
        )
        yield _counters(
            "weir_request_errors_total",
            "Requests that failed or closed the connection, by API.",
            "api",
            metrics.request_errors_total,
        )
        yield _counters(
            "weir_connections_closed_by_broker_total",
            "Kafka connections the broker closed, by reason: request (a request it "
            "could not answer), timeout (idle or mid-frame), frame_size, tls_handshake.",
            "reason",
            metrics.connections_closed_by_broker_total,
        )
        yield _counters(
            "weir_sasl_authentications_total",
            "SASL logins (and KIP-368 re-authentications), by result: success, failure.",
            "result",
            metrics.sasl_authentications_total,
        )
        yield GaugeMetricFamily(
            "weir_connections_open", "Open Kafka connections.", value=metrics.connections_open
        )
        for name, help_text, value in _scalar_counters(metrics):
            yield CounterMetricFamily(name, help_text, value=value)
        for name, (help_text, sample) in sorted(metrics.counters.items()):
            yield CounterMetricFamily(name, help_text, value=sample())
        for name, (help_text, label, counts) in sorted(metrics.counter_families.items()):
            yield _counters(name, help_text, label, counts())
        yield _request_latency(metrics.request_latency)
        yield from _topic_traffic(metrics.topic_traffic)
        for name, (help_text, histogram) in sorted(metrics.histograms.items()):
            yield histogram_family(name, help_text, histogram())
        for name, (help_text, gauge) in sorted(metrics.gauges.items()):
            yield _gauge(name, help_text, gauge())
        for collect in metrics.collectors:
            yield from collect()


def _scalar_counters(metrics: Metrics) -> list[tuple[str, str, float]]:
    return [
        ("weir_connections_total", "Accepted Kafka connections.", metrics.connections_total),
        (
            "weir_connections_rejected_total",
            "Connections closed at once because connections_max was reached.",
            metrics.connections_rejected_total,
        ),
        (
            "weir_connections_rejected_per_address_total",
            "Connections closed at once because their address already had "
            "connections_per_address_max open.",
            metrics.connections_rejected_per_address_total,
        ),
        (
            "weir_http_connections_evicted_total",
            "Idle HTTP connections closed to make room for a new one (http_connections_max).",
            metrics.http_connections_evicted_total,
        ),
        (
            "weir_bytes_received_total",
            "Kafka request bytes received.",
            metrics.bytes_received_total,
        ),
        ("weir_bytes_sent_total", "Kafka response bytes sent.", metrics.bytes_sent_total),
        ("weir_produced_batches_total", "Record batches appended.", metrics.produced_batches_total),
        ("weir_produced_bytes_total", "Record batch bytes appended.", metrics.produced_bytes_total),
        (
            "weir_produced_duplicate_batches_total",
            "Idempotent producers' retries answered from the log, not appended again.",
            metrics.produced_duplicate_batches_total,
        ),
        (
            "weir_producer_ids_allocated_total",
            "Producer ids handed out by InitProducerId.",
            metrics.producer_ids_allocated_total,
        ),
        (
            "weir_cold_read_bytes_total",
            "Log bytes Fetch found outside the page cache, read in on the disk executor.",
            metrics.cold_read_bytes_total,
        ),
        (
            "weir_cold_reads_on_loop_total",
            "Fetches whose read waited on the disk on the event loop (the page cache "
            "dropped what the disk executor had read in, COLD_READ_ATTEMPTS_MAX times).",
            metrics.cold_reads_on_loop_total,
        ),
    ]


def _counters(name: str, help_text: str, label: str, counts: Mapping[str, int]) -> Metric:
    family = CounterMetricFamily(name, help_text, labels=[label])
    for key, value in sorted(counts.items()):
        family.add_metric([key], value)
    return family


def _gauge(name: str, help_text: str, samples: Iterable[GaugeSample]) -> Metric:
    family: GaugeMetricFamily | None = None
    for labels, value in samples:
        names = sorted(labels)
        if family is None:
            family = GaugeMetricFamily(name, help_text, labels=names)
        family.add_metric([labels[n] for n in names], value)
    return family if family is not None else GaugeMetricFamily(name, help_text, labels=[])


def histogram_family(
    name: str,
    help_text: str,
    sample: HistogramSample,
    label_names: tuple[str, ...] = (),
    label_values: tuple[str, ...] = (),
    family: HistogramMetricFamily | None = None,
) -> HistogramMetricFamily:
    if family is None:
        family = HistogramMetricFamily(name, help_text, labels=list(label_names))
    buckets = [(floatToGoString(bound), float(count)) for bound, count in sample.buckets]
    buckets.append(("+Inf", float(sample.count)))
    family.add_metric(list(label_values), buckets, sample.sum)
    return family


def _request_latency(latencies: Mapping[str, RequestLatency]) -> Metric:
    family = HistogramMetricFamily(
        "weir_request_duration_seconds",
        "Kafka requests' time in the broker, by API: from the request read to its "
        "response ready to send (a Fetch's wait for records and an acks=all "
        "Produce's wait for replication included).",
        labels=["api"],
    )
    for api, latency in sorted(latencies.items()):
        histogram_family("", "", latency.sample(), ("api",), (api,), family)
    return family


def _topic_traffic(traffic: Mapping[str, TopicTraffic]) -> Iterator[Metric]:
    families = {
        "produced_bytes": "Record batch bytes appended for producers, by topic.",
        "produced_records": "Records appended for producers, by topic.",
        "fetched_bytes": "Record batch bytes sent to consumers, by topic.",
        "fetched_records": "Offsets consumers' fetches moved over, by topic.",
    }
    for attribute, help_text in families.items():
        family = CounterMetricFamily(f"weir_topic_{attribute}_total", help_text, labels=["topic"])
        for topic, counts in sorted(traffic.items()):
            family.add_metric([topic], getattr(counts, attribute))
        yield family
