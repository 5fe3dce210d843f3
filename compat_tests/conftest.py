"""Fixtures that run the real `weir serve` process for the compatibility suite.

- `broker`: one broker shared by the whole session (fast); tests use unique topic
  names. A test that leaves it dead fails, and the next test gets a fresh one.
- `own_broker`: a fresh broker for one test; use it to stop, kill or restart.
- `module_broker`: a fresh broker shared by one module (hostile input, RSS checks).
- `topic` / `unique_topic`: topic names no other test uses.
- `chromium`: one headless Chromium per module for the console's tests
  (compat_tests/console_browser.py); `console`: that browser on `module_broker`,
  logged out, at laptop size.

When a test fails, the tail of each broker's stderr it used is attached to the report.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from compat_tests.console_browser import ConsoleBrowser, console_browser
from compat_tests.harness import WeirProcess, unique_topic_name


def _attach(request: pytest.FixtureRequest, proc: WeirProcess) -> None:
    processes: list[WeirProcess] = request.node.__dict__.setdefault("_weir_processes", [])
    processes.append(proc)


def _new_broker(base: Path) -> WeirProcess:
    return WeirProcess(base / "data", base / "logs")


@pytest.fixture(scope="session")
def _session_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = _new_broker(tmp_path_factory.mktemp("weir-shared"))
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


@pytest.fixture
def broker(request: pytest.FixtureRequest, _session_broker: WeirProcess) -> Iterator[WeirProcess]:
    """The session's shared broker. Never stop or kill it in a test: use `own_broker`."""
    proc = _session_broker
    if not proc.is_running():
        dead = proc.describe()
        stderr = proc.stderr_text()
        proc.restart()
        pytest.fail(
            f"the shared broker had died before this test ({dead}); restarted it.\n"
            f"--- stderr of the dead broker ---\n{stderr}"
        )
    _attach(request, proc)
    yield proc
    if not proc.is_running():
        code = proc.process.returncode if proc.process else None
        pytest.fail(f"the shared broker died during this test (exit code {code})")


@pytest.fixture
def own_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WeirProcess]:
    """A broker for this test alone, killed at teardown whatever happened."""
    proc = _new_broker(tmp_path / "weir")
    _attach(request, proc)
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def _module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = _new_broker(tmp_path_factory.mktemp("weir-module"))
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


@pytest.fixture
def module_broker(
    request: pytest.FixtureRequest, _module_broker: WeirProcess
) -> Iterator[WeirProcess]:
    """A broker shared by the tests of one module; a test that kills it fails."""
    proc = _module_broker
    if not proc.is_running():
        stderr = proc.stderr_text()
        proc.restart()
        pytest.fail(f"the module's broker had died before this test.\n--- stderr ---\n{stderr}")
    _attach(request, proc)
    yield proc
    if not proc.is_running():
        pytest.fail("the module's broker died during this test")


def _prefix(request: pytest.FixtureRequest) -> str:
    return re.sub(r"^test_", "", request.node.name)[:40]


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[[], str]:
    """Factory of topic names no other test (or earlier run on the same broker) uses."""
    prefix = _prefix(request)
    return lambda: unique_topic_name(prefix)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return unique_topic_name(_prefix(request))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for proc in item.__dict__.get("_weir_processes", []):
            report.sections.append((f"weir stderr: {proc.describe()}", proc.stderr_text()))
    return report


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (modules, test items: ~300,000 objects) lives all
    session: frozen, a full garbage collection skips it and takes a millisecond."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown() -> None:
    """Free what the test left in reference cycles before its fixtures stop its
    brokers. A frame that caught an exception (`pytest.raises` keeps the traceback,
    which holds the frame) outlives the test with its Kafka clients, and a
    confluent-kafka client reconnects every second to a stopped broker, printing
    into later tests' output, until a full collection runs: minutes later, if ever."""
    gc.collect()


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python loads its protocol schemas with deprecated importlib.resources calls.
    for message in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")
    config.addinivalue_line(
        "markers",
        "own_cluster: a fresh cluster for this test, not its module's shared one "
        "(compat_tests/cluster_harness.py, shared_or_own_cluster)",
    )


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBrowser]:
    """One headless Chromium for a module's console tests; point it at a broker with
    `use_broker(broker.http_url)`."""
    with console_browser("http://127.0.0.1:1", tmp_path_factory.mktemp("chromium")) as browser:
        yield browser


@pytest.fixture
def console(chromium: ConsoleBrowser, module_broker: WeirProcess) -> Iterator[ConsoleBrowser]:
    """The module's Chromium on the module's broker, with no login kept from another test."""
    chromium.use_broker(module_broker.http_url)
    chromium.open("/console/login")
    chromium.logout()
    yield chromium
