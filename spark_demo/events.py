"""Page-view events, as a web front end would publish them, and their producer.

Each event is a JSON object keyed by its user id; its event time is both in the body
(`event_time_ms`) and the Kafka record's CreateTime timestamp, and it carries
headers (`event-type`, `schema-version`, `trace-id`). Events arrive slightly out of
order (up to `disorder_ms` of event time), as events from many web servers do.

The end of a run is marked by one `END_PAGE` event far ahead in event time: it moves
the streaming job's watermark past every real window, so each is emitted (append
mode emits a window only once the watermark has passed its end).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass

from confluent_kafka import KafkaError, Message, Producer

PAGES = ("/", "/search", "/product", "/cart", "/checkout", "/account", "/help", "/blog")
# Roughly what a shop sees: the home page and search far more than checkout.
PAGE_WEIGHTS = (30, 22, 20, 10, 5, 6, 3, 4)
COUNTRIES = ("DE", "FR", "US", "GB", "NL", "PL", "ES", "IT")
DEVICES = ("desktop", "mobile", "tablet")
END_PAGE = "/__end_of_run__"
END_OF_RUN_LEAD_MS = 3_600_000
SCHEMA_VERSION = b"1"


@dataclass(frozen=True)
class PageView:
    event_id: str
    user_id: str
    page: str
    event_time_ms: int
    dwell_ms: int
    country: str
    device: str

    def key(self) -> bytes:
        return self.user_id.encode()

    def value(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    def headers(self) -> list[tuple[str, str | bytes | None]]:
        return [
            ("event-type", b"page_view"),
            ("schema-version", SCHEMA_VERSION),
            ("trace-id", self.event_id.encode()),
        ]


def page_views(
    count: int,
    *,
    start_ms: int,
    spacing_ms: int = 10,
    disorder_ms: int = 2_000,
    users: int = 500,
    seed: int = 7,
) -> list[PageView]:
    """`count` page views from `start_ms` on, one every `spacing_ms` of event time on
    average, each displaced by up to `disorder_ms` (never before `start_ms`)."""
    rng = random.Random(seed)
    views = []
    for index in range(count):
        displaced_ms = start_ms + index * spacing_ms - rng.randrange(disorder_ms + 1)
        views.append(
            PageView(
                event_id=f"{seed:04x}-{index:010d}",
                user_id=f"user-{rng.randrange(users):05d}",
                page=rng.choices(PAGES, PAGE_WEIGHTS)[0],
                event_time_ms=max(start_ms, displaced_ms),
                dwell_ms=int(rng.lognormvariate(8.5, 0.8)),
                country=rng.choice(COUNTRIES),
                device=rng.choices(DEVICES, (45, 45, 10))[0],
            )
        )
    return views


def end_of_run(after: Iterable[PageView]) -> PageView:
    """The marker that closes every window of `after` (see the module docstring)."""
    latest_ms = max(view.event_time_ms for view in after)
    return PageView(
        event_id="end-of-run",
        user_id="system",
        page=END_PAGE,
        event_time_ms=latest_ms + END_OF_RUN_LEAD_MS,
        dwell_ms=0,
        country="--",
        device="--",
    )


class DeliveryError(RuntimeError):
    pass


def produce(
    bootstrap: str,
    topic: str,
    views: Iterable[PageView],
    *,
    producer_config: dict[str, str | int] | None = None,
    timeout_s: float = 60.0,
) -> int:
    """Write `views` to `topic` (idempotent producer, acks=all, lz4) and wait until
    every one is acknowledged. Returns the count; raises DeliveryError otherwise."""
    config: dict[str, str | int] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "lz4",
        "linger.ms": 5,
        "batch.num.messages": 2_000,
    }
    config.update(producer_config or {})
    producer = Producer(config)
    errors: list[str] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            errors.append(str(error))

    sent = 0
    for view in views:
        _produce_one(producer, topic, view, on_delivery)
        sent += 1
    remaining = producer.flush(timeout_s)
    if remaining or errors:
        raise DeliveryError(f"{remaining} not delivered, {len(errors)} failed: {errors[:3]}")
    return sent


DeliveryCallback = Callable[[KafkaError | None, Message], None]


def _produce_one(
    producer: Producer, topic: str, view: PageView, on_delivery: DeliveryCallback
) -> None:
    while True:
        try:
            producer.produce(
                topic,
                key=view.key(),
                value=view.value(),
                headers=view.headers(),
                timestamp=view.event_time_ms,
                on_delivery=on_delivery,
            )
            producer.poll(0)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.1)


def paced(views: Iterable[PageView], rate_per_s: float) -> Iterator[PageView]:
    """`views` released at `rate_per_s` (wall clock), for a generator that runs live."""
    started = time.monotonic()
    for index, view in enumerate(views):
        due = started + index / rate_per_s
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield view
