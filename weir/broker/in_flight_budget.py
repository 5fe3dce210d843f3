"""The broker-wide budget of request and response bytes held in memory.

A connection charges every request frame once its size prefix is read, before
its body is received, and every response once it is built; the writer releases
both once the response is sent, and whatever a connection still holds when it
ends is released with it. Fetch sizes its response by `available_bytes()`
before reading from disk, so the big responses never exceed what is free.

Three named limits (`weir.broker.config.Limits`):

- `in_flight_bytes_max`, the pool: shared by every connection.
- `connection_in_flight_bytes_min`: each connection may hold this much without
  drawing from the pool, so a well-behaved client's small requests, and Fetch
  responses of small batches, go through even while stuck peers hold the pool.
- `connection_in_flight_bytes_max`, a connection's share: holding more, its
  reader takes no new frame, and its fetches are filled only up to what is
  left of it. One connection whose peer never reads holds at most its share
  (plus the frame and response that crossed it), never the pool.

So the bytes held are at most `in_flight_bytes_max + open connections x
connection_in_flight_bytes_min`, plus the responses other than Fetch, which
are charged after they are built (all small: their size follows the metadata,
not the log). A charge that must wait for the pool queues in arrival order, so
a big frame is not overtaken forever by small ones; nothing that waits holds
the pool, and the writers that release it never wait for it, so no cycle of
waits can form: a lone connection always gets its frame once its own
responses are read.
"""

from __future__ import annotations

import collections
from contextvars import ContextVar
from dataclasses import dataclass, field

import trio


@dataclass(eq=False)
class _PoolWaiter:
    account: ConnectionBudget
    byte_count: int
    granted: trio.Event = field(default_factory=trio.Event)


class InFlightBudget:
    """One per Kafka listener. Runs on the Trio thread only."""

    def __init__(
        self, pool_bytes: int, connection_bytes_max: int, connection_bytes_min: int
    ) -> None:
        assert 0 <= connection_bytes_min <= connection_bytes_max <= pool_bytes
        self.pool_bytes = pool_bytes
        self.connection_bytes_max = connection_bytes_max
        self.connection_bytes_min = connection_bytes_min
        self.held_bytes = 0  # by every connection, for the gauge
        self.pooled_bytes = 0  # the part of it beyond each connection's minimum
        self.waits_total = 0  # charges that had to wait for the pool
        self._waiters: collections.deque[_PoolWaiter] = collections.deque()

    def open_account(self) -> ConnectionBudget:
        return ConnectionBudget(self)

    def _pool_room_bytes(self) -> int:
        return self.pool_bytes - self.pooled_bytes

    def _grant_waiters(self) -> None:
        """Admit queued charges in arrival order while the head one fits."""
        while self._waiters:
            head = self._waiters[0]
            if head.account.pool_draw_bytes(head.byte_count) > self._pool_room_bytes():
                return
            self._waiters.popleft()
            head.account.take(head.byte_count)
            head.granted.set()


class ConnectionBudget:
    """One connection's account in the budget."""

    def __init__(self, budget: InFlightBudget) -> None:
        self.budget = budget
        self.held_bytes = 0
        self._released: trio.Event | None = None  # while the reader waits for its share
        self._closed = False

    # -- questions ---------------------------------------------------------

    def pool_draw_bytes(self, byte_count: int) -> int:
        """How much of a charge of `byte_count` would come from the pool."""
        floor = self.budget.connection_bytes_min
        return max(0, self.held_bytes + byte_count - floor) - max(0, self.held_bytes - floor)

    def fits(self, byte_count: int) -> bool:
        """Whether `byte_count` more may be charged now (the share aside)."""
        draw = self.pool_draw_bytes(byte_count)
        if draw == 0:
            return True
        return not self.budget._waiters and draw <= self.budget._pool_room_bytes()

    def available_bytes(self) -> int:
        """How much more this connection may take now within its share: what a
        Fetch may fill its response with."""
        budget = self.budget
        share_room = max(0, budget.connection_bytes_max - self.held_bytes)
        own_room = max(0, budget.connection_bytes_min - self.held_bytes)
        pool_room = 0 if budget._waiters else max(0, budget._pool_room_bytes())
        return min(share_room, own_room + pool_room)

    # -- charging ----------------------------------------------------------

    def try_take(self, byte_count: int) -> bool:
        """Charge `byte_count` if it fits now (see `fits`)."""
        draw = self.pool_draw_bytes(byte_count)
        budget = self.budget
        if draw and (budget._waiters or draw > budget.pool_bytes - budget.pooled_bytes):
            return False
        if not self._closed:
            budget.pooled_bytes += draw
            self.held_bytes += byte_count
            budget.held_bytes += byte_count
        return True

    async def charge(self, byte_count: int) -> None:
        """Charge bytes about to be received; waits (in arrival order) for
        room in the pool."""
        if self.try_take(byte_count):
            return
        budget = self.budget
        waiter = _PoolWaiter(self, byte_count)
        budget._waiters.append(waiter)
        budget.waits_total += 1
        try:
            await waiter.granted.wait()
        finally:
            if not waiter.granted.is_set():
                budget._waiters.remove(waiter)
                budget._grant_waiters()  # the head may have changed

    def take(self, byte_count: int) -> None:
        """Charge at once, room or not: bytes already in memory (a response
        just built, a frame already buffered), or a granted wait."""
        if self._closed:
            return
        budget = self.budget
        budget.pooled_bytes += self.pool_draw_bytes(byte_count)
        self.held_bytes += byte_count
        budget.held_bytes += byte_count

    def release(self, byte_count: int) -> None:
        if self._closed or byte_count == 0:
            return
        assert 0 < byte_count <= self.held_bytes, (byte_count, self.held_bytes)
        budget = self.budget
        budget.pooled_bytes += self.pool_draw_bytes(-byte_count)
        self.held_bytes -= byte_count
        budget.held_bytes -= byte_count
        if budget._waiters:
            budget._grant_waiters()
        if self._released is not None:
            self._released.set()
            self._released = None

    async def wait_within_share(self) -> None:
        """Back-pressure: return once this connection holds no more than its
        share (its writer releases bytes as its peer reads them)."""
        while self.held_bytes > self.budget.connection_bytes_max:
            if self._released is None:
                self._released = trio.Event()
            await self._released.wait()

    def close(self) -> None:
        """The connection ended: release whatever it still holds."""
        self.release(self.held_bytes)
        self._closed = True


# The account of the connection whose request is being handled. Set by the
# server for each connection's tasks; None outside a connection (tests calling
# handlers directly), where nothing is charged or limited.
CONNECTION_BUDGET: ContextVar[ConnectionBudget | None] = ContextVar(
    "weir_connection_budget", default=None
)
