"""Opening the broker's listeners: a listener that cannot bind is a `ListenError`
naming the setting and the address, which `weir serve` reports as one line."""

from __future__ import annotations

import trio

from weir.broker.config import HostPort

# What each listen setting serves, as the error says it.
LISTENER_PURPOSES = {
    "kafka_listen": "Kafka clients",
    "http_listen": "HTTP requests",
    "security.listeners": "Kafka clients",
}


class ListenError(Exception):
    """A listener could not bind: `setting` (`kafka_listen`, `http_listen`) names it."""

    def __init__(self, setting: str, address: HostPort, reason: str) -> None:
        super().__init__(f"cannot listen on {address} ({setting}): {reason}")
        self.setting = setting
        self.address = address
        self.reason = reason

    def describe(self, source: str) -> str:
        """One line naming `source`, where the address was given (`--kafka-listen`)."""
        purpose = LISTENER_PURPOSES[self.setting]
        return f"cannot listen for {purpose} on {self.address} ({source}): {self.reason}"


async def open_listeners(setting: str, address: HostPort) -> list[trio.SocketListener]:
    """Trio's TCP listeners on `address`; raises ListenError when they cannot bind
    (address in use, not local, a privileged port, a host that does not resolve)."""
    try:
        return await trio.open_tcp_listeners(address.port, host=address.host)
    except OSError as exc:
        raise ListenError(setting, address, _reason(exc)) from None


def _reason(exc: OSError) -> str:
    """`[Errno 98] Address already in use` -> `address already in use`."""
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]
