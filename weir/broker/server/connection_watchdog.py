"""The per-connection watchdog: a peer idle, slow to send a frame, or reading
nothing of a response for too long is closed."""

from __future__ import annotations

import logging
import math

import trio

log = logging.getLogger(__name__)


class ConnectionWatchdog:
    """Closes a connection whose peer stays idle, takes too long to send a
    frame it started, or reads nothing of a response for too long:
    `connection_idle_timeout_ms` between frames and per piece of a response
    sent, `request_receive_timeout_ms` within one frame.

    The reader and writer only stamp deadlines as they move between states;
    one task per connection checks them a few times per timeout. A cancel
    scope with a deadline around every read cost the reader a fifth of its
    CPU; a deadline is now enforced up to two check intervals late.

    A deadline closes the connection only when two checks in a row see it
    passed and unchanged. After an event-loop stall longer than a timeout the
    watchdog and the reader wake in the same batch, and the peer's frame may
    have arrived during the stall, unread: the first check only gives the
    reader and writer an interval to restamp (issue 9: a client pinging every
    10 ms was reset during a long produce)."""

    CHECK_INTERVAL_S_MIN = 0.02
    CHECK_INTERVAL_S_MAX = 1.0

    def __init__(self, idle_timeout_s: float, receive_timeout_s: float) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.receive_timeout_s = receive_timeout_s
        self.deadline = math.inf
        self.send_deadline = math.inf
        self._state = "idle"
        self.expired_reason: str | None = None
        self.check_interval_s = min(
            max(min(idle_timeout_s, receive_timeout_s) / 10, self.CHECK_INTERVAL_S_MIN),
            self.CHECK_INTERVAL_S_MAX,
        )

    def expect_frame_start(self) -> None:
        self.deadline = trio.current_time() + self.idle_timeout_s
        self._state = "idle"

    def expect_frame_end(self) -> None:
        self.deadline = trio.current_time() + self.receive_timeout_s
        self._state = "receiving a frame"

    def pause(self) -> None:
        """Handling a request or waiting for the writer: the peer owes nothing."""
        self.deadline = math.inf

    def expect_send_progress(self) -> None:
        """A piece of a response is being sent: the peer must take it in time."""
        self.send_deadline = trio.current_time() + self.idle_timeout_s

    def sent(self) -> None:
        self.send_deadline = math.inf

    def _expired(self, now: float) -> str | None:
        if now > self.deadline:
            return f"{self._state} for too long"
        if now > self.send_deadline:
            return "the peer has not read its responses for too long"
        return None

    def _next_check(self, confirming: bool, stamp_ahead_s: float) -> float:
        """When to look next: a check interval on when confirming a passed deadline,
        else at the earliest deadline stamped now or that can be stamped later."""
        now = trio.current_time()
        soonest = min(self.deadline, self.send_deadline, now + stamp_ahead_s)
        if confirming:
            return now + self.check_interval_s
        return max(now + self.check_interval_s, soonest)

    async def run(self, connection_scope: trio.CancelScope) -> None:
        seen_passed: tuple[float, float] | None = None
        # A deadline stamped from now on lies at least this far ahead.
        stamp_ahead_s = min(self.idle_timeout_s, self.receive_timeout_s)
        while True:
            await trio.sleep_until(self._next_check(seen_passed is not None, stamp_ahead_s))
            reason = self._expired(trio.current_time())
            if reason is None:
                seen_passed = None
                continue
            deadlines = (self.deadline, self.send_deadline)
            if deadlines != seen_passed:
                seen_passed = deadlines  # maybe only the loop was late: look again
                continue
            self.expired_reason = reason
            log.debug("closing connection: %s", reason)
            connection_scope.cancel()
            return


# Not frozen: a frozen dataclass costs about 7x more to construct; this is built
