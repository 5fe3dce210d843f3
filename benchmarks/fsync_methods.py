"""What one group-commit round costs with each fsync method, on this filesystem.

Each round appends `--write-bytes` to each of `--files` files (as one produce
request does to its partitions) and then makes them durable, either with an
`fdatasync` per file or with one `syncfs` of the filesystem. Prints CPU and wall
time per round:

    .venv/bin/python benchmarks/fsync_methods.py --dir /tmp --files 8 --write-bytes 3300
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import tempfile
import time
from collections.abc import Callable


def run_rounds(directory: str, files: int, write_bytes: int, rounds: int, method: str) -> None:
    work = tempfile.mkdtemp(prefix="weir-fsync-methods-", dir=directory)
    libc = ctypes.CDLL(None, use_errno=True)
    fds = [os.open(f"{work}/f{i}", os.O_RDWR | os.O_CREAT | os.O_APPEND) for i in range(files)]
    sync: Callable[[], None]
    if method == "syncfs":

        def sync() -> None:
            if libc.syncfs(fds[0]) != 0:
                raise OSError(ctypes.get_errno(), "syncfs")
    else:

        def sync() -> None:
            for fd in fds:
                os.fdatasync(fd)

    data = b"x" * write_bytes
    write_cpu_s = sync_cpu_s = sync_wall_s = 0.0
    started = time.perf_counter()
    try:
        for _ in range(rounds):
            cpu = time.thread_time()
            for fd in fds:
                os.write(fd, data)
            write_cpu_s += time.thread_time() - cpu
            cpu, wall = time.thread_time(), time.perf_counter()
            sync()
            sync_cpu_s += time.thread_time() - cpu
            sync_wall_s += time.perf_counter() - wall
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(work)
    elapsed_s = time.perf_counter() - started
    write_us, sync_us = 1e6 * write_cpu_s / rounds, 1e6 * sync_cpu_s / rounds
    print(
        f"{method:>9}, {files} files x {write_bytes} B: write CPU {write_us:.0f} µs, "
        f"sync CPU {sync_us:.0f} µs, sync wall {1e6 * sync_wall_s / rounds:.0f} µs "
        f"per round; {rounds / elapsed_s:,.0f} rounds/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="on the filesystem to test")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--write-bytes", type=int, default=3300)
    parser.add_argument("--rounds", type=int, default=3000)
    args = parser.parse_args()
    for method in ("fdatasync", "syncfs", "fdatasync", "syncfs"):
        run_rounds(args.dir, args.files, args.write_bytes, args.rounds, method)


if __name__ == "__main__":
    main()
