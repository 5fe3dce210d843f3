"""Delayed delivery, release backoff and expiry on share groups (Weir's own, beyond
Kafka's queues; docs/queues.md "Delays and expiry"), against the real `weir serve`,
with confluent-kafka's producer and ShareConsumer (compat_tests/share_clients'
python driver, explicit acknowledgement).

Times are the wall clock of this machine, which the broker, the producer's record
timestamps and the driver's events all share. Every wait is bounded.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests.harness import WeirProcess
from compat_tests.share_clients import scenarios
from compat_tests.share_clients.scenarios import ADMIN_TIMEOUT_S, ScenarioError, scenario_run
from compat_tests.test_share_groups_clients import weir_settings

pytestmark = pytest.mark.timeout(120)

HEADERS_ON = {"weir.share.record.headers.enable": "true"}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("share-delays")
    proc = WeirProcess.configured(base, weir_settings(scenarios.BROKER_MINIMUMS))
    proc.start()
    try:
        yield proc.bootstrap
    finally:
        proc.close()


def produce(
    bootstrap: str, topic: str, records: list[tuple[dict[str, str], int | None]]
) -> dict[int, int]:
    """Records (headers, timestamp or None: now) to partition 0, in one batch;
    offset -> the record's timestamp (ms)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    stamped: dict[int, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            raise ScenarioError(f"produce failed: {err}")
        stamped[msg.offset()] = msg.timestamp()[1]

    for i, (headers, timestamp_ms) in enumerate(records):
        extra = {} if timestamp_ms is None else {"timestamp": timestamp_ms}
        producer.produce(
            topic,
            key=f"k{i}",
            value=f"v{i}",
            partition=0,
            headers=list(headers.items()),
            on_delivery=delivered,
            **extra,
        )
    if producer.flush(ADMIN_TIMEOUT_S) != 0 or len(stamped) != len(records):
        raise ScenarioError(f"produced {len(stamped)} of {len(records)}")
    return stamped


def delivered(events: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """(offset, delivery count, time seen in ms) of each delivery, in order."""
    return [
        (e["offset"], e["delivery_count"], e["t_ms"]) for e in events if e["event"] == "delivered"
    ]


def test_a_delayed_record_arrives_no_earlier_than_its_time_and_those_behind_it_first(
    bootstrap: str, tmp_path: Path
) -> None:
    with scenario_run(bootstrap, "python", tmp_path, group_configs=HEADERS_ON) as run:
        deliver_at_ms = int(time.time() * 1000) + 2_000
        stamped = produce(
            bootstrap,
            run.topic,
            [
                ({"weir.delay.ms": "2500"}, None),
                ({}, None),
                ({"weir.deliver.at.ms": str(deliver_at_ms)}, None),
                ({}, None),
            ],
        )
        run.start(run.spec("c1", idle_ms=3_500, deadline_ms=25_000)).wait_exit(40)
        seen = {offset: t_ms for offset, _count, t_ms in delivered(run.events)}
    assert sorted(seen) == [0, 1, 2, 3]
    assert seen[0] >= stamped[0] + 2_500, (seen, stamped)
    assert seen[2] >= deliver_at_ms, (seen, deliver_at_ms)
    assert max(seen[1], seen[3]) < min(seen[0], seen[2]), seen  # the queue went on


def test_release_backoff_spaces_redeliveries_more_each_time(bootstrap: str, tmp_path: Path) -> None:
    configs = {
        "weir.share.release.backoff.initial.ms": "500",
        "weir.share.release.backoff.max.ms": "1500",
        "share.delivery.count.limit": "5",
    }
    with scenario_run(bootstrap, "python", tmp_path, group_configs=configs) as run:
        produce(bootstrap, run.topic, [({}, None), ({}, None)])
        actions = {"0:0": ["RELEASE", "RELEASE", "RELEASE", "ACCEPT"]}
        run.start(run.spec("c1", actions=actions, idle_ms=3_000, deadline_ms=30_000)).wait_exit(45)
        record0 = [(count, t_ms) for offset, count, t_ms in delivered(run.events) if offset == 0]
    assert [count for count, _ in record0] == [1, 2, 3, 4], record0
    gaps = [later - earlier for (_, earlier), (_, later) in itertools.pairwise(record0)]
    # 0.5 s, 1 s, then the 1.5 s cap (2 s uncapped), each counted from the RELEASE,
    # which follows the delivery; the slack above is the client's poll and commit
    for gap, backoff_ms in zip(gaps, (500, 1_000, 1_500), strict=True):
        assert backoff_ms <= gap < backoff_ms + 2_000, gaps


def test_an_expired_record_is_never_delivered(bootstrap: str, tmp_path: Path) -> None:
    configs = {**HEADERS_ON, "weir.share.record.ttl.ms": "30000"}
    with scenario_run(bootstrap, "python", tmp_path, group_configs=configs) as run:
        now_ms = int(time.time() * 1000)
        produce(
            bootstrap,
            run.topic,
            [
                ({}, now_ms - 60_000),  # older than the group's TTL
                ({"weir.ttl.ms": "1000"}, now_ms - 5_000),  # older than its own TTL
                ({}, None),
                (
                    {"weir.ttl.ms": "600000"},
                    now_ms - 20_000,
                ),  # not expired yet (the group TTL is sooner)
                ({}, None),
            ],
        )
        run.start(run.spec("c1", idle_ms=3_000, deadline_ms=20_000)).wait_exit(35)
        offsets = sorted({offset for offset, _, _ in delivered(run.events)})
    assert offsets == [2, 3, 4]


def test_a_topics_ttl_expires_records_for_every_share_group(bootstrap: str, tmp_path: Path) -> None:
    with scenario_run(bootstrap, "python", tmp_path) as run:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        entry = ConfigEntry(
            "weir.share.record.ttl.ms", "30000", incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource(ResourceType.TOPIC, run.topic, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(ADMIN_TIMEOUT_S)
        now_ms = int(time.time() * 1000)
        produce(bootstrap, run.topic, [({}, now_ms - 60_000), ({}, None), ({}, now_ms - 40_000)])
        run.start(run.spec("c1", idle_ms=3_000, deadline_ms=20_000)).wait_exit(35)
        offsets = sorted({offset for offset, _, _ in delivered(run.events)})
    assert offsets == [1]  # no group config: the topic's TTL alone
