"""Push subscriptions against the real `weir serve` (docs/http-push.md): records
POSTed to a real local HTTP receiver (compat_tests/push_receiver.py) that answers
slowly, fails with 500, hangs past the timeout and flaps; created, paused and deleted
with httpx and `weir push`; records produced with confluent-kafka."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer

from compat_tests.harness import WeirProcess, create_topic, run_cli, unique_topic_name
from compat_tests.push_receiver import PushReceiver

pytestmark = pytest.mark.timeout(120)

WAIT_S = 40.0


@pytest.fixture(scope="module")
def weir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess(tmp_path_factory.mktemp("push") / "data", tmp_path_factory.mktemp("logs"))
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture
def receiver() -> Iterator[PushReceiver]:
    started = PushReceiver().start()
    try:
        yield started
    finally:
        started.stop()


def api(weir: WeirProcess) -> httpx.Client:
    return httpx.Client(base_url=weir.http_url, trust_env=False, timeout=10)


def subscribe(weir: WeirProcess, receiver: PushReceiver, **fields: Any) -> dict[str, Any]:
    with api(weir) as client:
        response = client.post("/v1/subscriptions", json={"url": receiver.url, **fields})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    receiver.secret = created["secret"]
    return created


def produce(
    weir: WeirProcess,
    topic: str,
    values: list[str],
    *,
    key: Callable[[str], str | None] = lambda v: None,
    headers: Callable[[str], list[tuple[str, bytes]]] = lambda v: [],
    partition: int | None = None,
) -> None:
    producer = Producer({"bootstrap.servers": weir.bootstrap, "linger.ms": 5})
    for value in values:
        extra = {} if partition is None else {"partition": partition}
        producer.produce(
            topic, value=value.encode(), key=key(value), headers=headers(value), **extra
        )
    assert producer.flush(15) == 0


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def status(weir: WeirProcess, name: str) -> dict[str, Any]:
    with api(weir) as client:
        response = client.get(f"/v1/subscriptions/{name}")
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


def totals(weir: WeirProcess, name: str) -> Counter[str]:
    counted: Counter[str] = Counter()
    for row in status(weir, name)["partitions"]:
        for field in ("delivered", "filtered", "failed", "dead_lettered"):
            counted[field] += row[field]
    return counted


def dead_letters(weir: WeirProcess, topic: str, count: int) -> list[dict[str, str]]:
    consumer = Consumer(
        {
            "bootstrap.servers": weir.bootstrap,
            "group.id": unique_topic_name("dlq-reader"),
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    letters: list[dict[str, str]] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and len(letters) < count:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            headers = {k: (v or b"").decode() for k, v in message.headers() or []}
            headers["value"] = (message.value() or b"").decode()
            letters.append(headers)
        time.sleep(1)  # none more than expected
        while (message := consumer.poll(0.5)) is not None:
            if not message.error():
                letters.append({"value": (message.value() or b"").decode()})
    finally:
        consumer.close()
    return letters


class Faults:
    """poison-*: always 500; slow-*: 200 after 0.2 s; hang-*: its first attempt
    hangs past the 400 ms timeout; flap-*: 500 and 200 in turn; the others 200."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(
        self, receiver: PushReceiver, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, float]:
        value = str(body["records"][0]["value"])
        with self.lock:
            self.attempts[value] += 1
            attempt = self.attempts[value]
        if value.startswith("poison"):
            return 500, 0.0
        if value.startswith("slow"):
            return 200, 0.2
        if value.startswith("hang") and attempt == 1:
            return 599, 1.0  # the broker gave up after 400 ms: never an acceptance
        if value.startswith("flap") and attempt % 2 == 1:
            return 500, 0.0
        return 200, 0.0


def test_every_record_is_accepted_at_least_once_or_dead_lettered(
    weir: WeirProcess, receiver: PushReceiver
) -> None:
    topic, dlq = unique_topic_name("push-faults"), unique_topic_name("dlq.push-faults")
    create_topic(weir.bootstrap, topic, partitions=2)
    create_topic(weir.bootstrap, dlq, config={"errors.deadletterqueue.group.enable": "true"})
    faults = Faults()
    receiver.behaviour = faults
    name = unique_topic_name("faults")
    subscribe(
        weir, receiver, name=name, topic=topic, start="earliest", timeout_ms=400,
        retry={"min_backoff_ms": 50, "max_backoff_ms": 400, "max_attempts": 4},
        dead_letter_topic=dlq, concurrency=4,
    )  # fmt: skip
    kinds = ("ok", "slow", "hang", "flap", "poison")
    values = [f"{kind}-{i}" for kind in kinds for i in range(6)]
    produce(weir, topic, values)
    good = {v for v in values if not v.startswith("poison")}
    poison = {v for v in values if v.startswith("poison")}
    wait_until(lambda: good <= set(receiver.accepted_values()), "every good record accepted")
    wait_until(lambda: totals(weir, name)["dead_lettered"] == len(poison), "the poison archived")
    letters = dead_letters(weir, dlq, len(poison))
    assert sorted(letter["value"] for letter in letters) == sorted(poison)
    for letter in letters:
        assert letter["__dlq.errors.topic"] == topic
        assert letter["__dlq.errors.group"] == f"weir-push-{name}"
        assert letter["__dlq.errors.delivery.count"] == "4"
    assert not poison & set(receiver.accepted_values())
    deliveries = receiver.snapshot()
    assert all(d.verified for d in deliveries), "every delivery's signature verifies"
    assert {faults.attempts[v] for v in poison} == {4}
    counts = [int(d.headers["Weir-Delivery-Count"]) for d in deliveries if "poison" in str(d.body)]
    assert sorted(set(counts)) == [1, 2, 3, 4]


def test_header_filters_deliver_only_matching_records_and_accept_the_others(
    weir: WeirProcess, receiver: PushReceiver
) -> None:
    topic = unique_topic_name("push-filter")
    create_topic(weir.bootstrap, topic)
    name = unique_topic_name("filter")
    subscribe(
        weir, receiver, name=name, topic=topic, start="earliest", batch_size=5,
        header_filters=[{"name": "type", "values": ["order", "refund"]}],
    )  # fmt: skip
    values = [f"{kind}-{i}" for kind in ("order", "refund", "audit", "none") for i in range(5)]

    def type_header(value: str) -> list[tuple[str, bytes]]:
        kind = value.split("-")[0]
        return [] if kind == "none" else [("type", kind.encode())]

    produce(weir, topic, values, headers=type_header)
    wanted = {v for v in values if v.startswith(("order", "refund"))}
    wait_until(lambda: totals(weir, name)["filtered"] == 10, "the others accepted undelivered")
    wait_until(lambda: set(receiver.accepted_values()) == wanted, "the matching records")
    assert sorted(receiver.accepted_values()) == sorted(wanted)
    _, body = weir.http_get(f"/v1/queues/weir-push-{name}")
    (row,) = json.loads(body)["share_partitions"]
    assert row["start_offset"] == row["high_watermark"] == len(values)


def test_pause_holds_deliveries_and_resume_delivers_what_waited(
    weir: WeirProcess, receiver: PushReceiver
) -> None:
    topic = unique_topic_name("push-pause")
    create_topic(weir.bootstrap, topic)
    name = unique_topic_name("pause")
    subscribe(weir, receiver, name=name, topic=topic, start="earliest")
    produce(weir, topic, ["a", "b"])
    wait_until(lambda: sorted(receiver.accepted_values()) == ["a", "b"], "the first records")
    with api(weir) as client:
        paused = client.post(f"/v1/subscriptions/{name}/pause")
        assert paused.status_code == 200 and paused.json()["paused"] is True
        wait_until(
            lambda: not any(p["delivering"] for p in status(weir, name)["partitions"]), "stopped"
        )
        produce(weir, topic, ["c", "d"])
        time.sleep(2)
        assert sorted(receiver.accepted_values()) == ["a", "b"]
        assert client.post(f"/v1/subscriptions/{name}/resume").json()["paused"] is False
    wait_until(lambda: sorted(receiver.accepted_values()) == ["a", "b", "c", "d"], "the rest")


class KeyOrderWatch:
    """Fails one attempt in three (by a hash of value and attempt); notes when a
    key's delivery arrives while another of the same key is being answered."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy: Counter[str] = Counter()
        self.overlaps: list[str] = []
        self.attempts: Counter[str] = Counter()

    def __call__(
        self, receiver: PushReceiver, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, float]:
        keys = {str(r["key"]) for r in body["records"]}
        with self.lock:
            for key in keys:
                if self.busy[key]:
                    self.overlaps.append(key)
                self.busy[key] += 1
            value = str(body["records"][0]["value"])
            self.attempts[value] += 1
            attempt = self.attempts[value]
        time.sleep(0.02)
        with self.lock:
            for key in keys:
                self.busy[key] -= 1
        return (500 if hash((value, attempt)) % 3 == 0 else 200), 0.0


def test_ordered_by_key_delivers_each_keys_records_in_order_under_failures(
    weir: WeirProcess, receiver: PushReceiver
) -> None:
    topic = unique_topic_name("push-ordered")
    create_topic(weir.bootstrap, topic)
    watch = KeyOrderWatch()
    receiver.behaviour = watch
    name = unique_topic_name("ordered")
    subscribe(
        weir, receiver, name=name, topic=topic, start="earliest", ordered_by_key=True,
        concurrency=8, retry={"min_backoff_ms": 20, "max_backoff_ms": 100, "max_attempts": 10},
    )  # fmt: skip
    values = [f"k{i % 4}-{i // 4:03d}" for i in range(80)]
    produce(weir, topic, values, key=lambda v: v.split("-")[0])
    wait_until(lambda: len(set(receiver.accepted_values())) == len(values), "every record")
    assert watch.overlaps == [], "a key was in two deliveries at once"
    by_key: dict[str, list[str]] = {}
    for delivery in receiver.snapshot():  # every attempt, accepted or not, in arrival order
        for record in delivery.body["records"]:
            by_key.setdefault(str(record["key"]), []).append(str(record["value"]))
    for key, seen in by_key.items():
        assert seen == sorted(seen), f"key {key} went out of order: {seen}"
    assert totals(weir, name)["failed"] > 0, "some deliveries failed and were retried"


def test_hostile_and_invalid_requests_get_a_4xx(weir: WeirProcess, receiver: PushReceiver) -> None:
    topic = unique_topic_name("push-hostile")
    create_topic(weir.bootstrap, topic)
    base = {"name": unique_topic_name("h"), "topic": topic, "url": receiver.url}
    with api(weir) as client:
        too_big = client.post("/v1/subscriptions", content=b"{" + b" " * 70_000 + b"}")
        assert too_big.status_code == 413
        assert client.post("/v1/subscriptions", content=b"{nope").status_code == 400
        assert client.post("/v1/subscriptions", content=b"[" * 100_000).status_code in (400, 413)
        assert client.post("/v1/subscriptions", json=[1]).status_code == 400
        assert (
            client.post("/v1/subscriptions", json={**base, "topic": "missing-x"}).status_code == 404
        )
        bad_dlq = client.post("/v1/subscriptions", json={**base, "dead_letter_topic": "orders-dlq"})
        assert bad_dlq.status_code == 400 and "dlq." in bad_dlq.json()["message"]
        limit = client.post("/v1/subscriptions", json={**base, "retry": {"max_attempts": 50}})
        assert limit.status_code == 400 and "share.delivery.count.limit" in limit.json()["message"]
        assert (
            client.post("/v1/subscriptions", json={**base, "url": "file:///etc/passwd"}).status_code
            == 400
        )
        assert client.post("/v1/subscriptions", json=base).status_code == 201
        assert client.post("/v1/subscriptions", json=base).status_code == 409
        assert client.get("/v1/subscriptions/none-such").status_code == 404
        assert client.post("/v1/subscriptions/none-such/pause").status_code == 404
        assert client.delete("/v1/subscriptions/none-such").status_code == 404
        listed = client.get("/v1/subscriptions").json()["subscriptions"]
        assert all("secret" not in s for s in listed)


def test_weir_push_cli_creates_lists_describes_pauses_and_deletes(
    weir: WeirProcess, receiver: PushReceiver
) -> None:
    topic = unique_topic_name("push-cli")
    create_topic(weir.bootstrap, topic)
    name = unique_topic_name("cli")
    http = ("--http", weir.http_url)
    created = run_cli(
        "push", "create", name, "--topic", topic, "--url", receiver.url, "--start", "earliest",
        "--filter", "type=order", "--max-attempts", "3", "--format", "json", *http,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    receiver.secret = json.loads(created.stdout)["secret"]
    produce(weir, topic, ["x", "y"], headers=lambda v: [("type", b"order" if v == "x" else b"no")])
    wait_until(lambda: receiver.accepted_values() == ["x"], "the matching record")
    listed = run_cli("push", "list", *http)
    assert listed.returncode == 0 and name in listed.stdout and "active" in listed.stdout
    described = run_cli("push", "describe", name, "--format", "json", *http)
    document = json.loads(described.stdout)
    assert document["header_filters"] == [{"name": "type", "values": ["order"]}]
    assert (
        document["partitions"][0]["delivered"] == 1 and document["partitions"][0]["filtered"] == 1
    )
    assert "paused" in run_cli("push", "pause", name, *http).stdout
    assert "active" in run_cli("push", "resume", name, *http).stdout
    assert run_cli("push", "delete", name, *http).returncode == 0
    missing = run_cli("push", "describe", name, *http)
    assert missing.returncode != 0 and "404" in missing.stderr
    assert all(d.verified for d in receiver.snapshot())
