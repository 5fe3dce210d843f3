"""The benchmarks' Go generators (`loadgen/`, `share_consume/`, `txnload/`), each
built with `go build` into `.cache/go/<name>` when its binary is older than one of
its sources, with the Go module and build caches under `.cache/go`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from side_by_side.brokers import REPO_ROOT
from side_by_side.progress import log

GO_CACHE = REPO_ROOT / ".cache" / "go"


def build_go_tool(source_dir: Path) -> Path:
    """The binary of the Go program in `source_dir`, built when it is stale."""
    binary = GO_CACHE / source_dir.name
    sources = [*source_dir.glob("*.go"), source_dir / "go.mod", source_dir / "go.sum"]
    if binary.exists() and all(binary.stat().st_mtime >= s.stat().st_mtime for s in sources):
        return binary
    env = dict(
        os.environ,
        GOPATH=str(GO_CACHE),
        GOMODCACHE=str(GO_CACHE / "mod"),
        GOCACHE=str(GO_CACHE / "build"),
        GOTOOLCHAIN="local",
        GOFLAGS="-mod=readonly -modcacherw",
    )
    log(f"building {binary} (go build in {source_dir})")
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=source_dir, env=env, check=True)
    return binary
