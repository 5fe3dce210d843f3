"""The real clients the suite tests against are the versions it pins: a stale
or hand-upgraded environment fails here by name, instead of quietly turning
interop tests into skips (kafka-python skips versions it does not know)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

CONSTRAINTS = Path(__file__).resolve().parent.parent / "requirements" / "test-constraints.txt"
CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka")


def pinned_versions() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            pins[name.strip().lower()] = version.strip()
    return pins


@pytest.mark.parametrize("client", CLIENTS)
def test_installed_client_is_the_pinned_version(client: str) -> None:
    pinned = pinned_versions()
    assert client in pinned, f"{client} is not pinned in {CONSTRAINTS.name}"
    installed = importlib.metadata.version(client)
    assert installed == pinned[client], (
        f"{client} {installed} is installed but the suite pins {pinned[client]}: "
        "run scripts/test (it installs the pinned versions)"
    )
