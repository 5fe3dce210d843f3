"""The event loop's own stall meter (weir.broker.loop_lag)."""

from __future__ import annotations

import trio
import trio.testing

from weir.broker.loop_lag import LAG_SECONDS_BUCKETS, RECENT_WINDOW_S, EventLoopLag


def test_lags_fill_the_histogram_cumulatively() -> None:
    lag = EventLoopLag()
    lag.record(0.0005, now_s=100.0)
    lag.record(0.2, now_s=100.5)
    assert lag.count == 2
    assert abs(lag.seconds_total - 0.2005) < 1e-9
    counts = dict(zip(LAG_SECONDS_BUCKETS, lag.bucket_counts, strict=True))
    assert counts[0.001] == 1 and counts[0.1] == 1 and counts[0.25] == 2 and counts[5.0] == 2


def test_the_worst_recent_lag_forgets_what_is_older_than_a_minute() -> None:
    lag = EventLoopLag()
    lag.record(1.5, now_s=1000.0)
    lag.record(0.002, now_s=1030.0)
    assert lag.worst_recent_s(1030.0) == 1.5
    assert lag.worst_recent_s(1000.0 + RECENT_WINDOW_S + 2) == 0.002
    assert lag.worst_recent_s(1100.0 + RECENT_WINDOW_S) == 0.0


async def test_a_blocked_loop_shows_as_lag(mock_clock: trio.testing.MockClock) -> None:
    lag = EventLoopLag()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lag.run)
        await trio.testing.wait_all_tasks_blocked()  # the probe sleeps
        # 200 ms pass with no task run: the loop is stuck, as on a disk call.
        mock_clock.jump(0.2)
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(2):  # then it runs on time again
            mock_clock.jump(0.01)
            await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert lag.worst_recent_s(trio.current_time()) >= 0.15
    assert lag.count >= 3


def test_the_worst_lag_of_a_window_sees_only_that_window() -> None:
    lag = EventLoopLag()
    lag.record(0.5, now_s=100.0)
    lag.record(0.02, now_s=108.0)
    assert lag.worst_since_s(110.0, 10.0) == 0.5
    assert lag.worst_since_s(110.0, 5.0) == 0.02
    assert lag.worst_since_s(200.0, 10.0) == 0.0
