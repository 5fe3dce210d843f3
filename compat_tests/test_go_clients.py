"""The Go clients, franz-go (kgo, kadm) and sarama, against the real `weir serve`.

`compat_tests/go/` is a Go module whose `go test` suite reads the broker's address
from WEIR_BOOTSTRAP. This wrapper starts a broker, runs the suite once with
`go test -json`, and fails with the names and output of the Go tests that failed.
Modules and build cache live under the repository's ignored `.cache/go`;
`scripts/test` downloads the modules and builds the test binary before pytest runs,
so this run compiles nothing new and needs no network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from compat_tests.harness import WeirProcess

REPO_ROOT = Path(__file__).resolve().parent.parent
GO_MODULE = REPO_ROOT / "compat_tests" / "go"
GO_CACHE = REPO_ROOT / ".cache" / "go"
# A warm run takes ~15 s; a cold one (no `scripts/test` before it: modules to
# download, every package to compile) takes minutes on a busy 2-core machine.
GO_TEST_TIMEOUT_S = 480
# The Go tests (each on topics and groups of its own) mostly wait on the broker:
# run more at once than `go test`'s default of one per core. The suite then takes
# as long as its longest test (~10 s: the broker resolves a KIP-848 group's regex
# again at most every 10 s) instead of ~25 s.
GO_TESTS_AT_ONCE = 8
# Group timings a test suite can wait on: the first rebalance of a classic group
# waits 300 ms for more members instead of 3 s, and KIP-848 members heartbeat
# every 500 ms instead of 5 s (the lower bound goes down with it).
# Neither changes what the clients must do.
BROKER_SETTINGS = (
    "group_initial_rebalance_delay_ms = 300\n"
    "group_consumer_heartbeat_interval_ms = 500\n"
    "group_consumer_min_heartbeat_interval_ms = 500\n"
)


def go_environment(bootstrap: str) -> dict[str, str]:
    """The environment `go test` runs in: the pinned go.sum (read-only module
    graph), caches under .cache/go (module files left writable, so deleting
    .cache needs no `go clean -modcache`), this machine's Go toolchain only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WEIR_", "GO"))}
    env.update(
        GOPATH=str(GO_CACHE),
        GOMODCACHE=str(GO_CACHE / "mod"),
        GOCACHE=str(GO_CACHE / "build"),
        GOTOOLCHAIN="local",
        GOFLAGS="-mod=readonly -modcacherw",
        WEIR_BOOTSTRAP=bootstrap,
    )
    for name in ("GOROOT", "GOPROXY", "GONOSUMDB", "GOPRIVATE", "GOSUMDB"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


@dataclass
class GoTestRun:
    """What `go test -json` reported, by test name."""

    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    output: dict[str, list[str]] = field(default_factory=dict)
    other_output: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, stdout: str) -> GoTestRun:
        run = cls()
        for line in stdout.splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                run.other_output.append(line)
                continue
            test = event.get("Test")
            action = event.get("Action")
            if action == "output":
                key = test or event.get("Package", "")
                run.output.setdefault(key, []).append(event.get("Output", ""))
            elif action == "build-output":
                run.other_output.append(event.get("Output", ""))
            elif test and action == "pass":
                run.passed.append(test)
            elif test and action == "fail":
                run.failed.append(test)
            elif test and action == "skip":
                run.skipped.append(test)
        return run

    def report(self, returncode: int, stderr: str) -> str:
        lines = [
            f"go test exited with {returncode}; failed: {self.failed}; skipped: {self.skipped}"
        ]
        for name in self.failed or list(self.output):
            lines.append(f"--- {name}")
            lines.extend(text.rstrip("\n") for text in self.output.get(name, []))
        lines.extend(self.other_output)
        lines.append(stderr)
        return "\n".join(lines)


@pytest.mark.timeout(GO_TEST_TIMEOUT_S + 60)
def test_franz_go_and_sarama_suite_passes_against_weir(tmp_path: Path) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not on PATH: install Go 1.26+ (scripts/test builds this suite with it)")
    broker = WeirProcess.configured(tmp_path, BROKER_SETTINGS)
    try:
        broker.start()
        result = subprocess.run(
            [go, "test", "-json", "-count=1", f"-parallel={GO_TESTS_AT_ONCE}", "./..."],
            cwd=GO_MODULE,
            env=go_environment(broker.bootstrap),
            capture_output=True,
            text=True,
            timeout=GO_TEST_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        run = GoTestRun.parse(result.stdout)
        report = run.report(result.returncode, result.stderr)
        assert result.returncode == 0 and not run.failed, report
        assert not run.skipped, report  # a skipped Go test is not a pass
        assert len(run.passed) >= 20, report  # the suite ran, not an empty package
        assert broker.connection_trouble() == {}
    finally:
        broker.close()
