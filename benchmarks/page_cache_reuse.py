"""The cost of appending to a file when the page cache takes fresh memory,
against when it reuses pages just evicted (Weir's page cache window).

Appends `--gib` GiB in 128 KiB writes, syncing every 8 MiB; with `evict`, the
synced bytes older than a 16 MiB window are dropped with POSIX_FADV_DONTNEED.
Prints CPU per byte for each 512 MiB:

    .venv/bin/python benchmarks/page_cache_reuse.py --dir /tmp --gib 4

In a VM whose memory the host backs lazily, fresh pages cost several times more
per byte; on bare metal the two modes should be close. Run `keep` first on a
freshly booted machine to see the fresh-memory cost; later runs reuse memory
earlier runs touched.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

WRITE_BYTES = 128 * 1024
SYNC_EVERY_BYTES = 8 * 1024 * 1024
WINDOW_BYTES = 16 * 1024 * 1024
REPORT_EVERY_BYTES = 512 * 1024 * 1024


def append(directory: str, gib: int, evict: bool) -> list[float]:
    fd, path = tempfile.mkstemp(prefix="weir-page-cache-", dir=directory)
    data = b"x" * WRITE_BYTES
    per_byte_ns = []
    written = evicted = 0
    cpu = time.process_time()
    try:
        while written < gib * 1024**3:
            os.write(fd, data)
            written += WRITE_BYTES
            if written % SYNC_EVERY_BYTES == 0:
                os.fdatasync(fd)
                if evict and written - WINDOW_BYTES > evicted:
                    os.posix_fadvise(fd, evicted, written - WINDOW_BYTES - evicted,
                                     os.POSIX_FADV_DONTNEED)  # fmt: skip
                    evicted = written - WINDOW_BYTES
            if written % REPORT_EVERY_BYTES == 0:
                now = time.process_time()
                per_byte_ns.append(1e9 * (now - cpu) / REPORT_EVERY_BYTES)
                cpu = now
    finally:
        os.close(fd)
        os.unlink(path)
    return per_byte_ns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--gib", type=int, default=4)
    args = parser.parse_args()
    for mode in ("keep", "evict"):
        costs = append(args.dir, args.gib, evict=mode == "evict")
        print(f"{mode:>5}: CPU ns/byte per 512 MiB: " + ", ".join(f"{c:.2f}" for c in costs))


if __name__ == "__main__":
    main()
