"""Fixtures for the CLI's end-to-end tests: one real broker per test module."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from compat_tests.harness import WeirProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    base = tmp_path_factory.mktemp("weir-cli-broker")
    proc = WeirProcess(base / "data", base / "logs")
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def topic_name() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"
