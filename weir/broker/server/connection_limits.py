"""Connection limits across connections: open connections per peer address
(`AddressSlots`), and refusals logged without flooding (`RefusalLog`)."""

from __future__ import annotations

import logging

import trio

log = logging.getLogger(__name__)

# Refused connections: one WARNING per address (and one for connections_max)
# per interval, with the count refused in between; at most
# `limits.refusal_log_addresses_max` addresses remembered.
REFUSAL_LOG_INTERVAL_S = 60.0
ALL_ADDRESSES = "*"


class RefusalLog:
    """Logs refused connections without flooding: one WARNING per key (an
    address, or ALL_ADDRESSES) per REFUSAL_LOG_INTERVAL_S, with the number
    refused since the previous line."""

    def __init__(self, addresses_max: int, interval_s: float = REFUSAL_LOG_INTERVAL_S) -> None:
        self.addresses_max = addresses_max
        self.interval_s = interval_s
        self._logged_at_s: dict[str, float] = {}
        self._refused_since: dict[str, int] = {}

    def refused(self, key: str, reason: str) -> None:
        now_s = trio.current_time()
        logged_at_s = self._logged_at_s.get(key)
        if logged_at_s is not None and now_s - logged_at_s < self.interval_s:
            self._refused_since[key] = self._refused_since.get(key, 0) + 1
            return
        if len(self._logged_at_s) >= self.addresses_max:
            self._forget_before(now_s - self.interval_s)
        earlier = self._refused_since.pop(key, 0)
        self._logged_at_s[key] = now_s
        log.warning(
            "refusing connections: %s (%d more refused since the last such line; "
            "logged at most every %.0f s)",
            reason, earlier, self.interval_s,
        )  # fmt: skip

    def _forget_before(self, cutoff_s: float) -> None:
        stale = [key for key, at_s in self._logged_at_s.items() if at_s < cutoff_s]
        if len(stale) < len(self._logged_at_s) // 2:
            stale = list(self._logged_at_s)  # many recent ones: start over
        for key in stale:
            del self._logged_at_s[key]
            self._refused_since.pop(key, None)


class AddressSlots:
    """Open connections per peer address (Kafka's max.connections.per.ip)."""

    def __init__(self, per_address_max: int) -> None:
        self.per_address_max = per_address_max
        self._open: dict[str, int] = {}

    def open_count(self, address: str) -> int:
        return self._open.get(address, 0)

    def try_take(self, address: str) -> bool:
        count = self._open.get(address, 0)
        if count >= self.per_address_max:
            return False
        self._open[address] = count + 1
        return True

    def release(self, address: str) -> None:
        count = self._open[address] - 1
        if count:
            self._open[address] = count
        else:
            del self._open[address]
