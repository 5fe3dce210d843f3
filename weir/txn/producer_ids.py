"""Hands out producer ids for InitProducerId, in blocks reserved from the controller.

Reserving a block persists the metadata once per `block_size` ids, so ids are
unique across restarts without a metadata write per producer (Kafka does the
same with blocks of 1000 from its controller).
"""

from __future__ import annotations

from collections.abc import Callable

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(
        self, reserve_block: Callable[[int], int], block_size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> None:
        """`reserve_block(n)` durably reserves n ids and returns the first."""
        assert block_size > 0
        self._reserve_block = reserve_block
        self._block_size = block_size
        self._next = 0
        self._block_end = 0

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def available(self) -> bool:
        """Whether `take` would hand out an id now."""
        return self._next < self._block_end

    def take(self) -> int | None:
        """The next id of the reserved block; None when it is used up (reserve
        one with `add_block` first, as the broker does off its event loop)."""
        if self._next >= self._block_end:
            return None
        producer_id = self._next
        self._next += 1
        return producer_id

    def add_block(self, first: int) -> None:
        """A block of `block_size` ids starting at `first` was durably reserved."""
        if self._next >= self._block_end:
            self._next = first
            self._block_end = first + self._block_size

    def next_producer_id(self) -> int:
        if self._next >= self._block_end:
            self._next = self._reserve_block(self._block_size)
            self._block_end = self._next + self._block_size
        producer_id = self._next
        self._next += 1
        return producer_id
