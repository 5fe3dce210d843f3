"""`DeadlineIndex`: the earliest deadline per key, and the earliest of all, cheaply.

A min-heap with lazy deletion: `set` pushes a new entry only when a key's deadline
changes, stale entries are dropped when they reach the top, and the heap is rebuilt
when stale entries outnumber live ones. So `earliest_ms` and `pop_due` cost
O(log n) per entry instead of a scan of every group on every request.
"""

from __future__ import annotations

import heapq

_STALE_SLACK = 64


class DeadlineIndex:
    def __init__(self) -> None:
        self._heap: list[tuple[int, str]] = []
        self._deadline_ms: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._deadline_ms)

    def set(self, key: str, deadline_ms: int | None) -> None:
        """Make `deadline_ms` the key's deadline; None removes it."""
        if deadline_ms is None:
            self._deadline_ms.pop(key, None)
            return
        if self._deadline_ms.get(key) == deadline_ms:
            return
        self._deadline_ms[key] = deadline_ms
        heapq.heappush(self._heap, (deadline_ms, key))
        if len(self._heap) > 2 * len(self._deadline_ms) + _STALE_SLACK:
            self._heap = [(d, k) for k, d in self._deadline_ms.items()]
            heapq.heapify(self._heap)

    def earliest_ms(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> list[str]:
        """Keys whose deadline is at or before `now_ms`, removed, earliest first."""
        due: list[str] = []
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return due
            _, key = heapq.heappop(self._heap)
            del self._deadline_ms[key]
            due.append(key)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and self._deadline_ms.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
