"""What one broker has done lately, for the console's overview and topic list
(`GET /v3/clusters/{c}/brokers/{id}/stats`): a ring of samples of its own
counters (weir.broker.metrics) taken every SAMPLE_INTERVAL_S over the last
HISTORY_S — bytes and records produced to it and fetched from it, requests, the
event loop's worst lag — plus what it holds now (replicas, replicas led, bytes
on disk) and, for the topics asked about, their sizes and rates here.

The ring is a few hundred numbers (90 samples of 6), whatever the number of
topics: per-topic rates are taken against one snapshot of the per-topic totals
kept per sample for the last TOPIC_RATE_WINDOW_S only. Sampling runs on the
Trio thread and reads plain counters: nothing is added to the request path.
"""

from __future__ import annotations

import collections
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import trio

from weir.broker.broker import Broker
from weir.broker.cluster.cluster_member import ClusterMember
from weir.broker.config import BrokerConfig
from weir.broker.metrics import Metrics

SAMPLE_INTERVAL_S = 10.0
HISTORY_S = 15 * 60
SAMPLES_MAX = int(HISTORY_S / SAMPLE_INTERVAL_S)
TOPIC_RATE_WINDOW_S = 60.0
TOPIC_SNAPSHOTS_MAX = int(TOPIC_RATE_WINDOW_S / SAMPLE_INTERVAL_S) + 1


@dataclass(frozen=True)
class Totals:
    """The broker's counters at one moment (monotonic seconds, wall-clock ms)."""

    at_s: float
    wall_ms: int
    produced_bytes: int
    produced_records: int
    fetched_bytes: int
    fetched_records: int
    requests: int


# (produced bytes, produced records, fetched bytes, fetched records) per topic.
TopicTotals = dict[str, tuple[int, int, int, int]]


def totals_of(metrics: Metrics, at_s: float, wall_ms: int) -> Totals:
    traffic = metrics.topic_traffic.values()
    return Totals(
        at_s=at_s,
        wall_ms=wall_ms,
        produced_bytes=metrics.produced_bytes_total,
        produced_records=sum(t.produced_records for t in traffic),
        fetched_bytes=sum(t.fetched_bytes for t in traffic),
        fetched_records=sum(t.fetched_records for t in traffic),
        requests=sum(metrics.requests_total.values()),
    )


def topic_totals_of(metrics: Metrics) -> TopicTotals:
    return {
        name: (t.produced_bytes, t.produced_records, t.fetched_bytes, t.fetched_records)
        for name, t in metrics.topic_traffic.items()
    }


def rate_sample(before: Totals, after: Totals, loop_lag_worst_ms: float) -> dict[str, Any]:
    """The rates per second between two readings of the counters, stamped with
    the later one's wall-clock time."""
    elapsed_s = max(after.at_s - before.at_s, 1e-3)

    def per_s(now: int, then: int) -> float:
        return round(max(now - then, 0) / elapsed_s, 3)

    return {
        "time_ms": after.wall_ms,
        "produced_bytes_per_s": per_s(after.produced_bytes, before.produced_bytes),
        "produced_records_per_s": per_s(after.produced_records, before.produced_records),
        "fetched_bytes_per_s": per_s(after.fetched_bytes, before.fetched_bytes),
        "fetched_records_per_s": per_s(after.fetched_records, before.fetched_records),
        "requests_per_s": per_s(after.requests, before.requests),
        "loop_lag_worst_ms": round(loop_lag_worst_ms, 1),
    }


def topic_rates(
    before: TopicTotals, after: TopicTotals, elapsed_s: float, topics: Iterable[str]
) -> dict[str, dict[str, float]]:
    """Per topic asked about: records and bytes per second produced and fetched."""
    elapsed_s = max(elapsed_s, 1e-3)
    rates: dict[str, dict[str, float]] = {}
    for name in topics:
        now = after.get(name, (0, 0, 0, 0))
        then = before.get(name, (0, 0, 0, 0))
        pb, pr, fb, fr = (
            round(max(n - t, 0) / elapsed_s, 3) for n, t in zip(now, then, strict=True)
        )
        rates[name] = {
            "produced_bytes_per_s": pb,
            "produced_records_per_s": pr,
            "fetched_bytes_per_s": fb,
            "fetched_records_per_s": fr,
        }
    return rates


class TrafficHistory:
    """The ring of samples of one broker; `run` takes them until cancelled."""

    def __init__(
        self,
        broker: Broker,
        clock_s: Callable[[], float] = trio.current_time,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._broker = broker
        self._clock_s = clock_s
        self._wall_ms = wall_ms
        self.samples: collections.deque[dict[str, Any]] = collections.deque(maxlen=SAMPLES_MAX)
        self._last: Totals | None = None
        # (monotonic seconds, per-topic totals), oldest first.
        self._topic_snapshots: collections.deque[tuple[float, TopicTotals]] = collections.deque(
            maxlen=TOPIC_SNAPSHOTS_MAX
        )

    def _read(self) -> Totals:
        return totals_of(self._broker.metrics, self._clock_s(), self._wall_ms())

    def take_sample(self) -> None:
        now = self._read()
        if self._last is not None:
            window_s = now.at_s - self._last.at_s
            lag_s = self._broker.loop_lag.worst_since_s(now.at_s, window_s)
            self.samples.append(rate_sample(self._last, now, lag_s * 1000))
        self._last = now
        self._topic_snapshots.append((now.at_s, topic_totals_of(self._broker.metrics)))

    def current(self) -> dict[str, Any] | None:
        """The interval in progress (since the last sample), as a sample: the
        chart moves at once, not only every SAMPLE_INTERVAL_S."""
        if self._last is None:
            return None
        now = self._read()
        if now.at_s - self._last.at_s < 0.5:
            return self.samples[-1] if self.samples else None
        lag_s = self._broker.loop_lag.worst_since_s(now.at_s, now.at_s - self._last.at_s)
        return rate_sample(self._last, now, lag_s * 1000)

    def topic_rates(self, topics: Iterable[str]) -> dict[str, dict[str, float]]:
        """Rates over the last TOPIC_RATE_WINDOW_S (or since the broker started)."""
        now_s = self._clock_s()
        after = topic_totals_of(self._broker.metrics)
        if not self._topic_snapshots:
            return topic_rates(after, after, 1.0, topics)
        then_s, before = self._topic_snapshots[0]
        return topic_rates(before, after, now_s - then_s, topics)

    async def run(self) -> None:
        self.take_sample()
        while True:
            await trio.sleep(SAMPLE_INTERVAL_S)
            self.take_sample()


_HISTORIES: weakref.WeakKeyDictionary[Broker, TrafficHistory] = weakref.WeakKeyDictionary()


def traffic_history_of(broker: Broker) -> TrafficHistory:
    """The broker's one history, made on first use (`run` started by the app)."""
    history = _HISTORIES.get(broker)
    if history is None:
        history = _HISTORIES[broker] = TrafficHistory(broker)
    return history


def holdings(broker: Broker) -> dict[str, int]:
    """What the broker holds now: replicas, the ones it leads, bytes on disk."""
    replicas = list(broker.partitions.values())
    return {
        "replicas": len(replicas),
        "partitions_led": sum(1 for r in replicas if r.is_leader),
        "disk_bytes": sum(r.log.size_bytes for r in replicas),
    }


def topic_sizes(broker: Broker, topics: Iterable[str]) -> dict[str, dict[str, int]]:
    """Per topic asked about: bytes of its replicas here, and of those led here."""
    wanted = set(topics)
    sizes = {name: {"replica_bytes": 0, "leader_bytes": 0} for name in wanted}
    for (topic, _), replica in broker.partitions.items():
        if topic in wanted:
            size = replica.log.size_bytes
            sizes[topic]["replica_bytes"] += size
            if replica.is_leader:
                sizes[topic]["leader_bytes"] += size
    return sizes


def isr_shrinks_total(broker: Broker) -> int:
    member = broker.cluster
    return member.isr_shrinks_total if isinstance(member, ClusterMember) else 0


WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


def advertised_http_url(config: BrokerConfig, http_port: int) -> str:
    """The base URL the other brokers reach this one's HTTP API at: the HTTP
    listener's host, or the advertised Kafka host when it listens on every address."""
    host = config.http_listen.host
    if host in WILDCARD_HOSTS:
        host = config.advertised.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    scheme = "https" if config.security.http_tls else "http"
    return f"{scheme}://{host}:{http_port}"
