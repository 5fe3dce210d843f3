"""The real broker never makes its clients wait on the disk (issue 9).

A pinging client (ApiVersions v0 every 10 ms over its own connection) must see
round trips under 100 ms (all but one, and that one under 250 ms) while one
CreateTopics makes 1,000 partitions and DeleteTopics removes them, and while a
consumer reads a few hundred MiB that are not in the page cache. The broker's own
meter (`weir_event_loop_lag_seconds`, counted over the same window) must agree;
`/health/ready` reports its worst lag of the last minute."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.loop_pinger import LoopPinger

ROUND_TRIP_MS_MAX = 100.0
MANY_PARTITIONS = 1000
COLD_BYTES = 256 * 1024 * 1024
MESSAGE_BYTES = 64 * 1024


def ready_document(broker: WeirProcess) -> dict[str, object]:
    status, body = broker.http_get("/health/ready")
    assert status == 200
    document: dict[str, object] = json.loads(body)
    return document


def metric(broker: WeirProcess, name: str) -> float:
    text = broker.http_get("/metrics")[1].decode()
    line = next(row for row in text.splitlines() if row.startswith(name + " "))
    return float(line.rsplit(" ", 1)[1])


def broker_worst_lag_ms(broker: WeirProcess) -> float:
    worst_ms = ready_document(broker)["event_loop_lag_worst_last_minute_ms"]
    assert isinstance(worst_ms, float)
    return worst_ms


def test_ready_reports_the_worst_loop_lag_and_metrics_count_the_probes(
    own_broker: WeirProcess,
) -> None:
    document = ready_document(own_broker)
    assert document["status"] == "ready"
    assert isinstance(document["event_loop_lag_worst_last_minute_ms"], float)
    first = metric(own_broker, "weir_event_loop_lag_seconds_count")
    time.sleep(0.2)
    assert metric(own_broker, "weir_event_loop_lag_seconds_count") > first


def probes_later_than_round_trip_max(broker: WeirProcess) -> float:
    """How many of the broker's loop-lag probes so far woke over ROUND_TRIP_MS_MAX late:
    its histogram's count less its bucket at that bound, both from one scrape."""
    samples = dict(
        row.rsplit(" ", 1)
        for row in broker.http_get("/metrics")[1].decode().splitlines()
        if row.startswith("weir_event_loop_lag_seconds")
    )
    within = samples[f'weir_event_loop_lag_seconds_bucket{{le="{ROUND_TRIP_MS_MAX / 1000}"}}']
    return float(samples["weir_event_loop_lag_seconds_count"]) - float(within)


def assert_no_stall_seen(broker: WeirProcess, pinger: LoopPinger, late_before: float) -> None:
    """The broker's own meter saw no loop stall of 100 ms since `late_before` was read
    (the window the pinger ran in, not the broker's start-up or the test's set-up);
    from outside, no two round trips took that long and none took 2.5 times that (one
    may be the pinger's own process waiting for a core: CI ran a 109 ms round trip
    once, with the loop fine)."""
    assert probes_later_than_round_trip_max(broker) == late_before
    assert pinger.second_worst_ms < ROUND_TRIP_MS_MAX, pinger.slowest_ms
    assert pinger.worst_ms < 2.5 * ROUND_TRIP_MS_MAX, pinger.slowest_ms


def delete_topic(bootstrap: str, name: str, timeout_s: float = 60.0) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([name], request_timeout=timeout_s)[name].result(timeout=timeout_s)


def test_creating_and_deleting_a_thousand_partitions_never_stalls_a_pinging_client(
    own_broker: WeirProcess,
) -> None:
    late_before = probes_later_than_round_trip_max(own_broker)
    with LoopPinger(own_broker.bootstrap) as pinger:
        create_topic(own_broker.bootstrap, "many", partitions=MANY_PARTITIONS, timeout_s=60)
        created = [p for p in os.listdir(own_broker.data_dir) if p.startswith("many-")]
        assert len(created) == MANY_PARTITIONS
        delete_topic(own_broker.bootstrap, "many")
        time.sleep(0.1)
    pinger.check()
    assert not [p for p in os.listdir(own_broker.data_dir) if p.startswith("many-")]
    assert_no_stall_seen(own_broker, pinger, late_before)
    assert metric(own_broker, "weir_disk_executor_partitions_create_jobs_total") >= 1
    assert metric(own_broker, "weir_disk_executor_partitions_remove_jobs_total") >= 1


def produce_durably(bootstrap: str, topic: str, total_bytes: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 1_000_000, "compression.type": "none"})  # fmt: skip
    failures: list[object] = []
    payload = os.urandom(MESSAGE_BYTES)
    for _ in range(total_bytes // MESSAGE_BYTES):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=lambda e, _m: e and failures.append(e))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failures, failures


def evict_from_page_cache(partition_dir: Path) -> int:
    """Drop the (fsynced, so clean) segment pages: POSIX_FADV_DONTNEED, no root needed."""
    evicted = 0
    for path in partition_dir.glob("*.log"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            evicted += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return evicted


def consume_all(bootstrap: str, topic: str, total_bytes: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cold-reader",
                         "enable.auto.commit": False, "fetch.max.bytes": 8 << 20,
                         "max.partition.fetch.bytes": 8 << 20})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = 0
    deadline_s = time.monotonic() + 60
    try:
        while received < total_bytes and time.monotonic() < deadline_s:
            for message in consumer.consume(500, timeout=1.0):
                assert message.error() is None, message.error()
                received += len(message.value() or b"")
    finally:
        consumer.close()
    return received


def test_a_consumer_reading_records_not_in_the_page_cache_never_stalls_a_pinging_client(
    own_broker: WeirProcess,
) -> None:
    create_topic(own_broker.bootstrap, "cold", partitions=1)
    produce_durably(own_broker.bootstrap, "cold", COLD_BYTES)
    assert evict_from_page_cache(own_broker.data_dir / "cold-0") >= COLD_BYTES
    cold_before = metric(own_broker, "weir_disk_executor_cold_read_jobs_total")
    late_before = probes_later_than_round_trip_max(own_broker)
    with LoopPinger(own_broker.bootstrap) as pinger:
        received = consume_all(own_broker.bootstrap, "cold", COLD_BYTES)
    pinger.check()
    assert received == COLD_BYTES
    # The reads really missed the page cache: the executor read ranges in (the
    # kernel's readahead, started by those reads, brings in much of the rest),
    # and no read waited on the loop.
    assert metric(own_broker, "weir_disk_executor_cold_read_jobs_total") > cold_before
    assert metric(own_broker, "weir_cold_read_bytes_total") > 0
    assert metric(own_broker, "weir_cold_reads_on_loop_total") == 0
    assert_no_stall_seen(own_broker, pinger, late_before)
