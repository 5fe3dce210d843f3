"""Fixtures for the CLI's end-to-end tests: one real broker per test module."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from .processes import BrokerProcess, start_broker, stop_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("weir-cli-broker"))
    try:
        yield proc
    finally:
        stop_broker(proc)


@pytest.fixture
def topic_name() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"
