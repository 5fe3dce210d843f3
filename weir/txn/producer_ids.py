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

    def next_producer_id(self) -> int:
        if self._next >= self._block_end:
            self._next = self._reserve_block(self._block_size)
            self._block_end = self._next + self._block_size
        producer_id = self._next
        self._next += 1
        return producer_id
