"""The order of a producer's transactional produce requests that wait for their
coordinator's check (KIP-890): appended in the order they arrived, so that their
sequence numbers follow each other, and the producer's later requests after them."""

from __future__ import annotations

import trio


class Turn:
    """A produce request's place in its producer's queue (`ProduceOrder.enter`):
    `async with turn:` waits for the requests before it, then lets the next go."""

    def __init__(self, order: ProduceOrder, producer_id: int, previous: trio.Event | None) -> None:
        self._order = order
        self._producer_id = producer_id
        self._previous = previous
        self.done = trio.Event()

    async def __aenter__(self) -> None:
        if self._previous is not None:
            await self._previous.wait()

    async def __aexit__(self, *exc_info: object) -> None:
        self.done.set()
        self._order.leave(self._producer_id, self)


class ProduceOrder:
    """Transactional produce requests of one producer that wait for their
    coordinator's check are appended in the order they arrived (their sequence
    numbers follow each other), and so are the producer's later requests."""

    def __init__(self) -> None:
        self._last: dict[int, Turn] = {}

    def enter(self, producer_id: int) -> Turn:
        """Take the next place now, on the reader, in request order."""
        previous = self._last.get(producer_id)
        turn = Turn(self, producer_id, previous.done if previous is not None else None)
        self._last[producer_id] = turn
        return turn

    def leave(self, producer_id: int, turn: Turn) -> None:
        if self._last.get(producer_id) is turn:
            del self._last[producer_id]

    def busy(self, producer_id: int) -> bool:
        return producer_id in self._last
