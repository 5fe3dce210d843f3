"""One partition's push deliveries, on the partition's leader.

`PartitionPusher.run` loops:

1. acquire records of the subscription's share group (`weir-push-<name>`) as one
   member (`share_access`), in chunks of up to 500 (or four rounds of deliveries,
   concurrency x batch size each, when more), when fewer than a round's records wait
   (ordered subscriptions: four rounds, so other keys can pass a key that waits);
   records the header filters do not match are ACCEPTed at once;
2. start deliveries, up to `concurrency` in flight (per partition), each a batch
   chosen by `delivery_plan.next_batch` (ordered_by_key: a key in one delivery at a
   time);
3. a delivery POSTs the batch (`payload`), signed; 2xx: ACCEPT (queued: one task
   stores the acceptances of many deliveries at once; at most a round of records
   waits for it, else deliveries wait); anything else, a
   connection error or the timeout: a failure:
   - unordered: RELEASE, and the share group's release backoff (the subscription's
     min/max backoff) keeps it from being delivered again until then; at the share
     group's delivery count limit (max attempts) the share partition archives it
     and writes its dead letter;
   - ordered_by_key: the records stay acquired (their locks renewed) and are tried
     again after the backoff, so no later record of their key passes them; after max
     attempts they are REJECTed (archived, dead-lettered).
4. the locks of the records held longer than a third of the lock are renewed.

When the loop stops (the subscription paused or deleted, leadership moving) the
records it holds are made available again at once.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import httpx
import trio

from weir.broker.broker import wall_clock_ms
from weir.broker.push.delivery_plan import Held, batch_keys, next_batch, next_due_ms
from weir.broker.push.payload import PushRecord, delivery_body, delivery_headers
from weir.broker.push.share_access import AcknowledgeType, RecordLike, ShareAccess
from weir.broker.push.subscription import Subscription
from weir.format.errors import ErrorCode

log = logging.getLogger(__name__)

# A receiver's response body is read up to this (then the connection is dropped).
RESPONSE_BYTES_MAX = 64 * 1024
ACQUIRE_WAIT_MS = 1_000
# While ordered records wait behind their key, acquisition waits only this long.
ORDERED_WAIT_MS = 100
ORDERED_LOOKAHEAD = 4
HELD_RECORDS_MAX = 1_000
ACQUIRE_CHUNK = 500
ERROR_PAUSE_S = 0.5
LAST_ERRORS_MAX = 5
RELEASE_ON_STOP_S = 2.0


@dataclass
class PartitionStatus:
    """What this broker did for one subscription's partition since it started."""

    delivered: int = 0  # records a receiver accepted (2xx)
    filtered: int = 0  # records the header filters skipped (accepted undelivered)
    failed: int = 0  # records of failed deliveries (each attempt counts)
    dead_lettered: int = 0  # records archived after max attempts (dead-lettered)
    in_flight: int = 0  # records being delivered now
    last_delivered_ms: int | None = None
    last_errors: deque[dict[str, object]] = field(
        default_factory=lambda: deque(maxlen=LAST_ERRORS_MAX)
    )

    def to_json(self) -> dict[str, object]:
        return {
            "delivered": self.delivered,
            "filtered": self.filtered,
            "failed": self.failed,
            "dead_lettered": self.dead_lettered,
            "in_flight": self.in_flight,
            "last_delivered_ms": self.last_delivered_ms,
            "last_errors": list(self.last_errors),
        }


class Poster(Protocol):
    async def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout_ms: int
    ) -> str | None:
        """None when the receiver answered 2xx, else what went wrong."""


class HttpPoster:
    """Outbound POSTs over httpx: no proxies from the environment, no redirects
    followed, the response read up to RESPONSE_BYTES_MAX."""

    def __init__(self, connections_max: int) -> None:
        self.client = httpx.AsyncClient(
            trust_env=False,
            follow_redirects=False,
            limits=httpx.Limits(
                max_connections=connections_max, max_keepalive_connections=connections_max
            ),
        )

    async def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout_ms: int
    ) -> str | None:
        timeout_s = timeout_ms / 1000
        status = 0
        with trio.move_on_after(timeout_s) as scope:
            try:
                async with self.client.stream(
                    "POST", url, content=body, headers=headers, timeout=timeout_s
                ) as response:
                    status = response.status_code
                    read = 0
                    async for chunk in response.aiter_raw():
                        read += len(chunk)
                        if read >= RESPONSE_BYTES_MAX:
                            break
            except httpx.TimeoutException:
                return f"timed out after {timeout_ms} ms"
            except httpx.HTTPError as exc:
                return f"{type(exc).__name__}: {exc}"[:300]
        if scope.cancelled_caught:
            return f"timed out after {timeout_ms} ms"
        if 200 <= status < 300:
            return None
        return f"HTTP {status}"

    async def aclose(self) -> None:
        await self.client.aclose()


class PartitionPusher:
    def __init__(
        self,
        subscription: Subscription,
        partition: int,
        access: ShareAccess,
        poster: Poster,
        status: PartitionStatus,
        member_id: str,
    ) -> None:
        self.subscription = subscription
        self.partition = partition
        self.access = access
        self.poster = poster
        self.status = status
        self.member_id = member_id
        self.held: list[Held] = []
        self.in_flight: dict[int, list[Held]] = {}
        self.busy_keys: set[bytes | None] = set()
        # Offsets to ACCEPT (answered 2xx, or filtered: True), stored together by
        # `_accept_loop`: one share-state write for many deliveries.
        self._to_accept: list[tuple[int, bool]] = []
        self._accepting = 0
        self._accept_wakeup = trio.Event()
        self._next_delivery = 0
        self._changed = trio.Event()
        self._renewed_ms = wall_clock_ms()
        # Records are acquired in chunks (an acquisition decodes whole batches: one
        # record at a time would decode a batch per record), held until a delivery
        # takes them, their locks renewed meanwhile; acquired again when fewer than a
        # round of deliveries wait (ordered: while keys wait, at least four rounds).
        one_round = subscription.concurrency * subscription.batch_size
        self.capacity = min(max(one_round * ORDERED_LOOKAHEAD, ACQUIRE_CHUNK), HELD_RECORDS_MAX)
        lookahead = ORDERED_LOOKAHEAD if subscription.ordered_by_key else 1
        self.refill_below = min(one_round * lookahead, self.capacity)
        # Records answered but not yet stored as accepted, at most (then deliveries
        # wait): what a broker killed now can have delivered twice is at most this
        # plus the deliveries in flight.
        self.unstored_max = one_round

    @property
    def group_id(self) -> str:
        return self.subscription.group_id

    @property
    def topic(self) -> str:
        return self.subscription.topic

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._accept_loop)
                await self._loop(nursery)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(RELEASE_ON_STOP_S):
                await self._accept_queued()
                await self._release_all()

    async def _loop(self, nursery: trio.Nursery) -> None:
        sub = self.subscription
        while True:
            # A new event before looking: a delivery ending from here on wakes the wait.
            self._changed = trio.Event()
            now_ms = wall_clock_ms()
            self._dispatch(nursery, now_ms)
            await self._renew_if_due(now_ms)
            room = self.capacity - len(self.held) - self._in_flight_records()
            if room <= 0 or len(self.held) >= self.refill_below:
                await self._wait_changed(now_ms)
                continue
            wait_ms = ORDERED_WAIT_MS if self.held else ACQUIRE_WAIT_MS
            due_ms = next_due_ms(self.held, now_ms)
            if due_ms is not None:
                wait_ms = max(0, min(wait_ms, due_ms - now_ms))
            acquired = await self.access.acquire(
                self.group_id, self.topic, self.partition, self.member_id,
                records_max=room, lock_ms=sub.lock_ms, wait_ms=wait_ms,
            )  # fmt: skip
            if acquired.error != ErrorCode.NONE:
                self._note_error(None, f"acquire: {acquired.error.name}")
                await trio.sleep(ERROR_PAUSE_S)
                continue
            await self._take(acquired.records)

    async def _wait_changed(self, now_ms: int) -> None:
        due_ms = next_due_ms(self.held, now_ms)
        wait_s = 1.0 if due_ms is None else max(0.0, (due_ms - now_ms) / 1000)
        with trio.move_on_after(min(wait_s, 1.0)):
            await self._changed.wait()

    async def _take(self, records: Sequence[RecordLike]) -> None:
        skipped = []
        for record in records:
            if self.subscription.matches(record.headers):
                self.held.append(Held(_push_record(record)))
            else:
                skipped.append(record.offset)
        self.held.sort(key=lambda h: h.record.offset)
        if skipped:
            self._queue_accept([(offset, True) for offset in skipped])

    def _in_flight_records(self) -> int:
        return sum(len(batch) for batch in self.in_flight.values())

    def _dispatch(self, nursery: trio.Nursery, now_ms: int) -> None:
        sub = self.subscription
        while (
            len(self.in_flight) < sub.concurrency
            and self.held
            and len(self._to_accept) + self._accepting < self.unstored_max
        ):
            batch = next_batch(
                self.held, self.busy_keys, batch_size=sub.batch_size,
                ordered=sub.ordered_by_key, now_ms=now_ms,
            )  # fmt: skip
            if not batch:
                return
            taken = {id(h) for h in batch}
            self.held = [h for h in self.held if id(h) not in taken]
            if sub.ordered_by_key:
                self.busy_keys |= batch_keys(batch)
            token = self._next_delivery
            self._next_delivery += 1
            self.in_flight[token] = batch
            self.status.in_flight += len(batch)
            nursery.start_soon(self._deliver, token, batch)

    async def _deliver(self, token: int, batch: list[Held]) -> None:
        sub = self.subscription
        try:
            records = [
                dataclasses.replace(h.record, delivery_count=h.delivery_count) for h in batch
            ]
            body = delivery_body(sub.name, sub.topic, self.partition, records)
            headers = delivery_headers(
                subscription=sub.name, topic=sub.topic, partition=self.partition,
                records=records, secret=sub.secret, body=body, timestamp_s=int(time.time()),
            )  # fmt: skip
            error = await self.poster.post(sub.url, body, headers, sub.timeout_ms)
            if error is None:
                await self._delivered(batch)
            else:
                await self._failed(batch, error)
        finally:
            del self.in_flight[token]
            self.status.in_flight -= len(batch)
            self.busy_keys -= batch_keys(batch)
            self._changed.set()

    async def _delivered(self, batch: list[Held]) -> None:
        self.status.last_delivered_ms = wall_clock_ms()
        self._queue_accept([(h.record.offset, False) for h in batch])

    def _queue_accept(self, offsets: list[tuple[int, bool]]) -> None:
        self._to_accept.extend(offsets)
        self._accept_wakeup.set()

    async def _accept_loop(self) -> None:
        while True:
            await self._accept_wakeup.wait()
            self._accept_wakeup = trio.Event()
            await self._accept_queued()
            self._changed.set()

    async def _accept_queued(self) -> None:
        """ACCEPT what is queued, in one request (its state stored once)."""
        queued, self._to_accept = self._to_accept, []
        if not queued:
            return
        self._accepting = len(queued)
        try:
            results = await self._acknowledge(
                sorted(offset for offset, _ in queued), AcknowledgeType.ACCEPT
            )
        finally:
            self._accepting = 0
        for offset, filtered in queued:
            error = results.get(offset, ErrorCode.UNKNOWN_SERVER_ERROR)
            if error != ErrorCode.NONE:
                self._note_error(offset, f"accept refused: {error.name}")
            elif filtered:
                self.status.filtered += 1
            else:
                self.status.delivered += 1

    async def _failed(self, batch: list[Held], error: str) -> None:
        sub = self.subscription
        self.status.failed += len(batch)
        self._note_error(batch[0].record.offset, error)
        limit = sub.retry.max_attempts
        last = [h for h in batch if h.delivery_count >= limit]
        self.status.dead_lettered += len(last)
        if not sub.ordered_by_key:
            await self._acknowledge([h.record.offset for h in batch], AcknowledgeType.RELEASE)
            return
        if last:
            await self._acknowledge([h.record.offset for h in last], AcknowledgeType.REJECT)
        now_ms = wall_clock_ms()
        again = [h for h in batch if h.delivery_count < limit]
        for held in again:
            held.not_before_ms = now_ms + sub.retry.backoff_ms(held.delivery_count)
            held.local_failures += 1
        self.held.extend(again)
        self.held.sort(key=lambda h: h.record.offset)

    async def _acknowledge(self, offsets: list[int], kind: AcknowledgeType) -> dict[int, ErrorCode]:
        return await self.access.acknowledge(
            self.group_id, self.topic, self.partition, self.member_id, offsets, kind
        )

    async def _renew_if_due(self, now_ms: int) -> None:
        """Held records (and those in flight) keep their locks while they wait."""
        if now_ms - self._renewed_ms < self.subscription.lock_ms // 3:
            return
        self._renewed_ms = now_ms
        offsets = [h.record.offset for h in self.held]
        offsets += [h.record.offset for batch in self.in_flight.values() for h in batch]
        if offsets:
            await self.access.change_lock(
                self.group_id, self.topic, self.partition, self.member_id,
                sorted(offsets), self.subscription.lock_ms,
            )  # fmt: skip

    async def _release_all(self) -> None:
        offsets = [h.record.offset for h in self.held]
        offsets += [h.record.offset for batch in self.in_flight.values() for h in batch]
        if offsets:
            await self.access.change_lock(
                self.group_id, self.topic, self.partition, self.member_id, offsets, 0
            )

    def _note_error(self, offset: int | None, error: str) -> None:
        log.info("push %s %s-%d at %s: %s", self.subscription.name, self.topic, self.partition,
                 offset, error)  # fmt: skip
        self.status.last_errors.append(
            {"time_ms": wall_clock_ms(), "offset": offset, "error": error}
        )


def _push_record(record: RecordLike) -> PushRecord:
    return PushRecord(
        offset=record.offset,
        timestamp_ms=record.timestamp_ms,
        key=record.key,
        value=record.value,
        headers=tuple(record.headers),
        delivery_count=record.delivery_count,
    )
