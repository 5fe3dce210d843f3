"""How late the event loop runs what is due: the broker's own stall meter.

A probe task sleeps PROBE_INTERVAL_S over and over; the time it wakes past
its deadline is the lag every task on the loop saw at that moment (a handler
or a disk call that ran on the loop for that long). Exposed as the histogram
`weir_event_loop_lag_seconds` and, on `/health/ready`, as the worst lag of
the last minute.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import trio

PROBE_INTERVAL_S = 0.01
LAG_SECONDS_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
RECENT_WINDOW_S = 60.0


class EventLoopLag:
    """Records probe lags; runs on the Trio thread only."""

    def __init__(self) -> None:
        self.bucket_counts = [0] * len(LAG_SECONDS_BUCKETS)  # lags <= each bound
        self.seconds_total = 0.0
        self.count = 0
        # (second the probe woke, worst lag within that second), oldest first.
        self._recent: collections.deque[tuple[int, float]] = collections.deque()

    def record(self, lag_s: float, now_s: float) -> None:
        lag_s = max(lag_s, 0.0)
        self.count += 1
        self.seconds_total += lag_s
        for i, bound in enumerate(LAG_SECONDS_BUCKETS):
            if lag_s <= bound:
                self.bucket_counts[i] += 1
        second = int(now_s)
        if self._recent and self._recent[-1][0] == second:
            if lag_s > self._recent[-1][1]:
                self._recent[-1] = (second, lag_s)
        else:
            self._recent.append((second, lag_s))
        self._forget_before(now_s - RECENT_WINDOW_S)

    def worst_recent_s(self, now_s: float) -> float:
        """The worst lag seen in the last RECENT_WINDOW_S."""
        self._forget_before(now_s - RECENT_WINDOW_S)
        return max((lag for _, lag in self._recent), default=0.0)

    def worst_since_s(self, now_s: float, window_s: float) -> float:
        """The worst lag seen in the last `window_s` (at most RECENT_WINDOW_S),
        to the second."""
        oldest = int(now_s - min(window_s, RECENT_WINDOW_S))
        return max((lag for second, lag in self._recent if second >= oldest), default=0.0)

    def _forget_before(self, oldest_s: float) -> None:
        while self._recent and self._recent[0][0] < int(oldest_s):
            self._recent.popleft()

    async def run(self, clock_s: Callable[[], float] = trio.current_time) -> None:
        """Probe until cancelled."""
        while True:
            due_s = clock_s() + PROBE_INTERVAL_S
            await trio.sleep_until(due_s)
            now_s = clock_s()
            self.record(now_s - due_s, now_s)
