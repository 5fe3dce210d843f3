"""Per-key ordering on share groups (`weir.share.key.ordering.enable`, Weir's own;
docs/queues.md "Per-key ordering"), against the real `weir serve`, with
confluent-kafka's producer and several ShareConsumers (compat_tests/share_clients'
python driver, explicit acknowledgement, as an ordered consumer: a record it releases
takes the rest of its key in that poll back with it).

What is checked, from the drivers' events (wall-clock times of this machine, which
the broker and the drivers share):

- per key, the accepted values come out in produce order, though some records are
  released (and redelivered, perhaps to another consumer) on their first delivery;
- no two consumers hold records of one key at once (from a delivery to its
  acknowledgement);
- different keys are worked on by different consumers at the same time.

Every wait is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer

from compat_tests.harness import WeirProcess
from compat_tests.share_clients import scenarios
from compat_tests.share_clients.scenarios import (
    ADMIN_TIMEOUT_S,
    DRIVER_EXIT_S,
    JOIN_S,
    ScenarioError,
    ScenarioRun,
    scenario_run,
)
from compat_tests.test_share_groups_clients import weir_settings

pytestmark = pytest.mark.timeout(150)

KEY_ORDERING = {
    "weir.share.key.ordering.enable": "true",
    # releases are spread over consumers: a record may be released once by each
    "share.delivery.count.limit": "10",
}
KEYS = ("red", "green", "blue", "gold")
PER_KEY = 6
CONSUMERS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    base = tmp_path_factory.mktemp("share-key-ordering")
    proc = WeirProcess.configured(base, weir_settings(scenarios.BROKER_MINIMUMS))
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def produce_keyed(bootstrap: str, topic: str) -> list[tuple[str, str]]:
    """PER_KEY records of each key, keys interleaved, one record a batch; every
    third record of a key is to be released on its first delivery ("rel/..."). Returns
    (key, value) in produce order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    produced: list[tuple[str, str]] = []
    errors: list[Any] = []
    for seq in range(PER_KEY):
        for key in KEYS:
            action = "rel" if seq % 3 == 1 else "ok"
            value = f"{action}/{key}/{seq}"
            producer.produce(
                topic,
                key=key,
                value=value,
                partition=0,
                on_delivery=lambda err, _msg: errors.append(err) if err else None,
            )
            produced.append((key, value))
            producer.flush(ADMIN_TIMEOUT_S)  # a batch each: a fetch of 2 takes 2 records
    if producer.flush(ADMIN_TIMEOUT_S) != 0 or errors:
        raise ScenarioError(f"produce failed: {errors}")
    return produced


def holdings(events: list[dict[str, Any]]) -> list[tuple[str, str, int, int]]:
    """(consumer, key, delivered at, acknowledged at) of each delivery that was
    acknowledged, in ms."""
    open_: dict[tuple[str, int], tuple[str, int]] = {}
    held = []
    for event in events:
        where = (event["consumer"], event.get("offset", -1))
        if event["event"] == "delivered":
            open_[where] = (event["key"], event["t_ms"])
        elif event["event"] == "acknowledge" and where in open_:
            key, since_ms = open_.pop(where)
            held.append((event["consumer"], key, since_ms, event["t_ms"]))
    return held


def overlap(a: tuple[str, str, int, int], b: tuple[str, str, int, int]) -> bool:
    return a[2] < b[3] and b[2] < a[3]


def run_ordered_consumers(run: ScenarioRun) -> list[tuple[str, str]]:
    drivers = [
        run.start(
            run.spec(
                f"c{i + 1}",
                max_poll_records=2,
                pause_ms=150,
                idle_ms=5_000,
                deadline_ms=60_000,
                value_actions={"rel": ["RELEASE", "ACCEPT"]},
                ordered_by_key=True,
            )
        )
        for i in range(CONSUMERS)
    ]
    for driver in drivers:
        driver.wait_for(lambda ev: any(e["event"] == "started" for e in ev), JOIN_S)
    time.sleep(4.0)  # joined: a heartbeat or two (share.heartbeat.interval.ms=1000)
    produced = produce_keyed(run.bootstrap, run.topic)
    for driver in drivers:
        driver.wait_exit(DRIVER_EXIT_S + 30)
    return produced


def test_each_keys_records_are_accepted_in_produce_order_by_one_consumer_at_a_time(
    broker: WeirProcess, tmp_path: Path
) -> None:
    with scenario_run(broker.bootstrap, "python", tmp_path, group_configs=KEY_ORDERING) as run:
        produced = run_ordered_consumers(run)
        events = run.events
    values_of = {e["offset"]: e["value"] for e in events if e["event"] == "delivered"}
    accepted = [
        values_of[e["offset"]]
        for e in events
        if e["event"] == "acknowledge" and e["type"] == "ACCEPT"
    ]
    assert sorted(accepted) == sorted(value for _key, value in produced)  # each once
    for key in KEYS:
        of_key = [value for value in accepted if value.split("/")[1] == key]
        assert of_key == [value for k, value in produced if k == key], (key, of_key)
    released = [e for e in events if e["event"] == "acknowledge" and e["type"] == "RELEASE"]
    assert released, "no record was released: the test proves nothing about redelivery"

    held = holdings(events)
    same_key_at_once = [
        (a, b) for a in held for b in held if a[0] < b[0] and a[1] == b[1] and overlap(a, b)
    ]
    assert not same_key_at_once, same_key_at_once
    consumers = {consumer for consumer, *_ in held}
    assert len(consumers) >= 2, consumers
    parallel = [(a, b) for a in held for b in held if a[0] < b[0] and overlap(a, b)]
    assert parallel, "no two consumers ever worked at once: keys did not proceed in parallel"


# -- a restart: the new leader has no keys ------------------------------------------

BACKOFF_MS = 10_000


def share_consumer(bootstrap: str, group: str, topic: str, max_poll_records: int) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": max_poll_records,
        }
    )
    consumer.subscribe([topic])
    return consumer


def poll_until(
    consumer: ShareConsumer, done: Callable[[list[Message]], bool], timeout_s: float
) -> list[tuple[Message, float]]:
    """Accept everything delivered until `done(all delivered)`: (message, when seen)."""
    seen: list[tuple[Message, float]] = []
    stop = time.monotonic() + timeout_s
    while not done([m for m, _ in seen]) and time.monotonic() < stop:
        for message in consumer.poll(0.5):
            if message.error() is None:
                seen.append((message, time.monotonic()))
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.commit_sync(10.0)
    return seen


def first_delivered(consumer: ShareConsumer) -> Message:
    stop = time.monotonic() + JOIN_S
    while time.monotonic() < stop:
        messages = [m for m in consumer.poll(0.5) if m.error() is None]
        if messages:
            return messages[0]
    raise AssertionError("nothing delivered")


def test_after_a_restart_a_released_record_still_comes_before_the_rest_of_its_key(
    broker: WeirProcess, tmp_path: Path
) -> None:
    """a0 is released with a 10 s backoff, then the broker is killed. The restarted
    broker's share partition knows no keys; it reads a0 again (delayed as it is) to
    learn its key, so a1 and a2 wait for a0 while the b records go at once."""
    configs = {
        **KEY_ORDERING,
        "weir.share.release.backoff.initial.ms": str(BACKOFF_MS),
        "weir.share.release.backoff.max.ms": str(BACKOFF_MS),
    }
    with scenario_run(broker.bootstrap, "python", tmp_path, group_configs=configs) as run:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for seq in range(3):
            for key in ("a", "b"):
                producer.produce(run.topic, key=key, value=f"{key}{seq}", partition=0)
                producer.flush(ADMIN_TIMEOUT_S)  # a batch each
        del producer  # closed before the broker is killed
        first = share_consumer(broker.bootstrap, run.group, run.topic, max_poll_records=1)
        try:
            a0 = first_delivered(first)
            assert a0.value() == b"a0", a0.value()
            first.acknowledge(a0, AcknowledgeType.RELEASE)
            first.commit_sync(10.0)
            released_at = time.monotonic()
        finally:
            first.close()  # anything else it fetched goes back (no backoff)

        broker.kill()
        broker.restart()

        second = share_consumer(broker.bootstrap, run.group, run.topic, max_poll_records=10)
        try:
            seen = poll_until(second, lambda ms: len(ms) >= 6, BACKOFF_MS / 1000 + JOIN_S)
        finally:
            second.close()
    order = [m.value().decode() for m, _ in seen]
    assert [v for v in order if v.startswith("a")] == ["a0", "a1", "a2"], order
    assert sorted(order) == ["a0", "a1", "a2", "b0", "b1", "b2"], order
    a0_again = next(t for m, t in seen if m.value() == b"a0")
    assert a0_again - released_at >= BACKOFF_MS / 1000 - 1, "a0 came back before its backoff"
    b_done = max(t for m, t in seen if m.key() == b"b")
    assert b_done < a0_again, "the b records waited for a0: keys were not learnt"
