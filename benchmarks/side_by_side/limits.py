"""The machine's physical limits, measured each round next to the brokers:
`fio` sequential writes with fdatasync after every block (the durable-append
ceiling) on the filesystem of the broker data, and `iperf3` over loopback.
Both are installed with apt-get when missing (as root, unless --no-install)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from side_by_side.brokers import free_port
from side_by_side.progress import log


def ensure_tools(args: argparse.Namespace) -> None:
    missing = [tool for tool in ("fio", "iperf3") if shutil.which(tool) is None]
    if not missing or args.no_limits:
        return
    if args.no_install or os.geteuid() != 0 or shutil.which("apt-get") is None:
        log(f"missing {missing}; physical limits will be skipped for them")
        return
    log(f"installing {missing} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=False, env=env, capture_output=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", *missing], check=False, env=env, capture_output=True
    )


def parse_block_size(text: str) -> int:
    units = {"k": 1024, "m": 1024 * 1024}
    text = text.strip().lower()
    if text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def run_fio(block_size: str, directory: Path, runtime_s: int, size: str) -> dict[str, Any]:
    """Sequential write, fdatasync after every block: the durable-append ceiling."""
    cmd = [
        "fio",
        "--name=seqwrite-fdatasync",
        f"--directory={directory}",
        "--rw=write",
        f"--bs={block_size}",
        f"--size={size}",
        "--ioengine=sync",
        "--fdatasync=1",
        "--fallocate=none",  # appends into unallocated space, like a growing log segment
        f"--runtime={runtime_s}",
        "--numjobs=1",
        "--output-format=json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=runtime_s + 120)
    for leftover in directory.glob("seqwrite-fdatasync*"):
        leftover.unlink(missing_ok=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-500:], "cmd": " ".join(cmd)}
    report = json.loads(done.stdout[done.stdout.index("{") :])
    job = report["jobs"][0]
    write = job["write"]
    sync = job.get("sync", {})
    sync_lat = sync.get("lat_ns", {})
    pct = sync_lat.get("percentile", {})
    return {
        "block_size": block_size,
        "write_MBps": write["bw_bytes"] / 1e6,
        "write_iops": write["iops"],  # = fdatasyncs per second
        "fdatasync_p50_ms": pct.get("50.000000", 0) / 1e6 if pct else None,
        "fdatasync_p99_ms": pct.get("99.000000", 0) / 1e6 if pct else None,
        "fdatasync_mean_ms": sync_lat.get("mean", 0) / 1e6 if sync_lat else None,
        "fdatasync_max_ms": sync_lat.get("max", 0) / 1e6 if sync_lat else None,
        "cmd": " ".join(cmd),
    }


def run_iperf3(seconds: int) -> dict[str, Any]:
    port = free_port()
    # no port probe: iperf3 -s -1 would take the probe for its one client
    server = subprocess.Popen(
        ["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    cmd = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"]
    try:
        report: dict[str, Any] = {}
        for _attempt in range(20):
            time.sleep(0.25)
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
            with contextlib.suppress(ValueError):
                report = json.loads(done.stdout)
            if done.returncode == 0 and "sum_received" in report.get("end", {}):
                break
        else:
            return {"error": str(report.get("error") or done.stderr)[-500:]}
        received = report["end"]["sum_received"]["bits_per_second"]
        return {
            "loopback_Gbps": received / 1e9,
            "loopback_MBps": received / 8 / 1e6,
            "cmd": " ".join(cmd),
        }
    finally:
        if server.poll() is None:
            server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=5)
        if server.poll() is None:
            server.kill()
            server.wait()


def measure_limits(args: argparse.Namespace, round_no: int) -> dict[str, Any]:
    limits: dict[str, Any] = {"fio": [], "iperf3": None}
    if shutil.which("fio"):
        fio_dir = Path(tempfile.mkdtemp(prefix="fio-bench-", dir=args.data_root))
        try:
            for block_size in args.fio_block_sizes:
                log(f"round {round_no}: fio bs={block_size}")
                limits["fio"].append(run_fio(block_size, fio_dir, args.fio_runtime, args.fio_size))
        finally:
            shutil.rmtree(fio_dir, ignore_errors=True)
    if shutil.which("iperf3"):
        log(f"round {round_no}: iperf3 loopback")
        limits["iperf3"] = run_iperf3(args.iperf_seconds)
    return limits
