"""Network partitions for tests: Linux network namespaces joined by a bridge.

`NetworkLab(count)` makes `count` namespaces, each with one veth whose peer is
attached to a bridge in the root namespace; the bridge has the subnet's first
address, so the test process (and anything it starts in the root namespace, such
as etcd) reaches every namespace and every namespace reaches the others.
`isolate(i)` takes namespace i's link down (it reaches nobody, nobody reaches it);
`heal(i)` brings it back. `cut(i, address)` drops what namespace i sends to one
address (a blackhole route inside i: TCP to and from that address stops both ways,
since i's answers are dropped too), for asymmetric partitions where a broker still
reaches etcd but not the other brokers; `restore(i, address)` removes it. Needs
root (`ip netns`), as the cluster fault tests do. Everything the lab made is
removed on exit, and `cleanup_stale()` removes what a killed test run left behind.
"""

from __future__ import annotations

import os
import subprocess
from types import TracebackType

NAME_PREFIX = "wlab"
COMMAND_TIMEOUT_S = 10


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["ip", *args], capture_output=True, timeout=COMMAND_TIMEOUT_S, check=check
    )


def require_root() -> None:
    if os.geteuid() != 0:
        raise RuntimeError(
            "network partition tests need root (ip netns, veth, bridge); run them as root"
        )


def cleanup_stale() -> None:
    """Remove namespaces and links of labs whose test process is gone."""
    listed = _ip("netns", "list", check=False).stdout.decode().split()
    for name in listed:
        if name.startswith(NAME_PREFIX) and not _owner_alive(name):
            _ip("netns", "del", name, check=False)
    links = _ip("-o", "link", "show", check=False).stdout.decode().splitlines()
    for line in links:
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith(NAME_PREFIX) and not _owner_alive(name):
                _ip("link", "del", name, check=False)


def _owner_alive(name: str) -> bool:
    digits = name[len(NAME_PREFIX) :].split("n")[0].split("b")[0].split("v")[0]
    try:
        os.kill(int(digits), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


class NetworkLab:
    def __init__(self, count: int) -> None:
        require_root()
        cleanup_stale()
        pid = os.getpid()
        self._tag = f"{NAME_PREFIX}{pid}"
        # A /24 per test process, in 10.200.0.0/16 .. 10.250.0.0/16.
        self.subnet = f"10.{200 + pid % 50}.{pid // 50 % 250}"
        self.bridge = f"{self._tag}b"
        self.root_address = f"{self.subnet}.1"
        self.namespaces = [f"{self._tag}n{i}" for i in range(count)]
        self.addresses = [f"{self.subnet}.{10 + i}" for i in range(count)]
        self._root_links = [f"{self._tag}v{i}" for i in range(count)]
        self._made: list[tuple[str, str]] = []

    def __enter__(self) -> NetworkLab:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _build(self) -> None:
        _ip("link", "add", "name", self.bridge, "type", "bridge")
        self._made.append(("link", self.bridge))
        _ip("addr", "add", f"{self.root_address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for namespace, address, root_link in zip(
            self.namespaces, self.addresses, self._root_links, strict=True
        ):
            _ip("netns", "add", namespace)
            self._made.append(("netns", namespace))
            inner = f"{root_link}p"
            _ip("link", "add", root_link, "type", "veth", "peer", "name", inner)
            self._made.append(("link", root_link))
            _ip("link", "set", inner, "netns", namespace)
            _ip("link", "set", root_link, "master", self.bridge)
            _ip("link", "set", root_link, "up")
            _ip("netns", "exec", namespace, "ip", "addr", "add", f"{address}/24", "dev", inner)
            _ip("netns", "exec", namespace, "ip", "link", "set", inner, "up")
            _ip("netns", "exec", namespace, "ip", "link", "set", "lo", "up")

    def prefix(self, index: int) -> tuple[str, ...]:
        """The command prefix that runs a program inside namespace `index`."""
        return ("ip", "netns", "exec", self.namespaces[index])

    def enter_prefix(self, index: int) -> tuple[str, ...]:
        """As `prefix`, but only the network namespace is entered: `ip netns exec`
        also gives the program a mount namespace of its own, a copy of the mounts
        at that moment, which keeps a filesystem mounted there alive after it is
        unmounted outside (the fault run's small disk must really unmount)."""
        return ("nsenter", f"--net=/run/netns/{self.namespaces[index]}")

    def isolate(self, index: int) -> None:
        _ip("link", "set", self._root_links[index], "down")

    def heal(self, index: int) -> None:
        _ip("link", "set", self._root_links[index], "up")

    def cut(self, index: int, address: str) -> None:
        """Namespace `index` can no longer exchange packets with `address`."""
        self._in_namespace(index, "route", "replace", "blackhole", f"{address}/32")

    def restore(self, index: int, address: str) -> None:
        """Undo `cut(index, address)` (no error when there is no such cut)."""
        self._in_namespace(index, "route", "del", "blackhole", f"{address}/32", check=False)

    def _in_namespace(self, index: int, *args: str, check: bool = True) -> None:
        _ip("netns", "exec", self.namespaces[index], "ip", *args, check=check)

    def close(self) -> None:
        for kind, name in reversed(self._made):
            if kind == "netns":
                _ip("netns", "del", name, check=False)
            else:
                _ip("link", "del", name, check=False)
        self._made = []
