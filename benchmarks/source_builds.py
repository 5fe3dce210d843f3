"""Brokers of several source trees, started side by side for a comparison in one run.

Each `NAME=SOURCE_TREE` gets its own `weir serve` (Kafka port and the next one for
HTTP, a fresh data dir) run from that tree, and an 8-partition topic `bench` once it
answers. `benchmarks/compare_builds.py` and `benchmarks/http_cost.py` measure them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
READY_TIMEOUT_S = 30.0
TOPIC = "bench"
TOPIC_PARTITIONS = 8


@dataclass
class SourceBuild:
    name: str
    tree: Path
    port: int  # Kafka; HTTP is port + 1
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None


def parse_builds(specs: list[str], base_port: int, purpose: str) -> list[SourceBuild]:
    """`NAME=SOURCE_TREE` specs, ten ports apart from `base_port`."""
    builds = []
    for index, spec in enumerate(specs):
        name, sep, tree = spec.partition("=")
        if not sep:
            raise SystemExit(f"expected NAME=SOURCE_TREE, got {spec!r}")
        data_dir = Path(tempfile.mkdtemp(prefix=f"weir-{purpose}-{name}-"))
        builds.append(SourceBuild(name, Path(tree).resolve(), base_port + 10 * index, data_dir))
    return builds


def start(build: SourceBuild) -> None:
    """Start the build's broker and return once it created the `bench` topic."""
    env = dict(os.environ, PYTHONPATH=str(build.tree))
    command = [
        str(PYTHON), "-m", "weir.cli.main", "serve", "--data-dir", str(build.data_dir),
        "--kafka-listen", f"127.0.0.1:{build.port}",
        "--http-listen", f"127.0.0.1:{build.port + 1}",
    ]  # fmt: skip
    build.process = subprocess.Popen(
        command, cwd=build.tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        created = subprocess.run(
            [str(PYTHON), "-m", "weir.cli.main", "topic", "create", TOPIC, "--partitions",
             str(TOPIC_PARTITIONS), "--bootstrap", f"127.0.0.1:{build.port}"],
            cwd=REPO_ROOT, capture_output=True, check=False,
        )  # fmt: skip
        if created.returncode == 0:
            return
        time.sleep(0.3)  # the broker is still starting: ask again
    raise SystemExit(f"{build.name}: the broker did not come up")


def stop(build: SourceBuild) -> None:
    if build.process is not None and build.process.poll() is None:
        build.process.send_signal(signal.SIGTERM)
        try:
            build.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            build.process.kill()
    shutil.rmtree(build.data_dir, ignore_errors=True)
