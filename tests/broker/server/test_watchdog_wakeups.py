"""An idle connection's watchdog wakes once per the shorter timeout, not once per
check interval: every idle connection waking each second cost the broker about a
core per 10,000 connections while nothing happened (issue 26, scale_broker.py)."""

from __future__ import annotations

import math

import trio
import trio.testing

from weir.broker.server.connection_watchdog import ConnectionWatchdog

IDLE_TIMEOUT_S = 600.0
RECEIVE_TIMEOUT_S = 30.0
WATCHED_S = 3_600.0


def test_an_idle_connection_wakes_once_per_shorter_timeout() -> None:
    checks = 0

    async def main() -> None:
        nonlocal checks
        watchdog = ConnectionWatchdog(IDLE_TIMEOUT_S, RECEIVE_TIMEOUT_S)
        watchdog.expect_frame_start()
        expired = watchdog._expired

        def counted(now: float) -> str | None:
            nonlocal checks
            checks += 1
            return expired(now)

        watchdog._expired = counted  # type: ignore[method-assign]
        with trio.move_on_after(WATCHED_S):
            while True:  # the peer sends a frame just before each idle deadline
                async with trio.open_nursery() as nursery:
                    scope = trio.CancelScope()
                    nursery.start_soon(watchdog.run, scope)
                    await trio.sleep(IDLE_TIMEOUT_S - 1)
                    watchdog.expect_frame_start()
                    assert watchdog.expired_reason is None
                    nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert checks <= math.ceil(WATCHED_S / RECEIVE_TIMEOUT_S) + 10


def test_an_idle_deadline_still_closes_the_connection() -> None:
    async def main() -> float:
        watchdog = ConnectionWatchdog(IDLE_TIMEOUT_S, RECEIVE_TIMEOUT_S)
        watchdog.expect_frame_start()
        scope = trio.CancelScope()
        started = trio.current_time()
        with scope:
            await watchdog.run(scope)
            await trio.sleep_forever()
        assert watchdog.expired_reason == "idle for too long"
        return trio.current_time() - started

    closed_after_s = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert (
        IDLE_TIMEOUT_S
        < closed_after_s
        <= IDLE_TIMEOUT_S + 2 * ConnectionWatchdog.CHECK_INTERVAL_S_MAX
    )


def test_a_frame_started_is_held_to_the_receive_timeout() -> None:
    async def main() -> float:
        watchdog = ConnectionWatchdog(IDLE_TIMEOUT_S, RECEIVE_TIMEOUT_S)
        watchdog.expect_frame_start()
        scope = trio.CancelScope()
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watchdog.run, scope)
            await trio.sleep(100)  # idle a while, then a frame starts and stalls
            watchdog.expect_frame_end()
            with scope:
                await trio.sleep_forever()
        assert watchdog.expired_reason == "receiving a frame for too long"
        return trio.current_time() - started - 100

    closed_after_s = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert (
        RECEIVE_TIMEOUT_S
        < closed_after_s
        <= RECEIVE_TIMEOUT_S + 2 * ConnectionWatchdog.CHECK_INTERVAL_S_MAX
    )
