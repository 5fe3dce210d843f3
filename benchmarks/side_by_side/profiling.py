"""`--profile`: py-spy records the broker during a phase (raw collapsed stacks),
and the samples are summed per function, self and inclusive."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from side_by_side.progress import log


@contextlib.contextmanager
def py_spy_recording(pid: int, out_path: Path, rate_hz: int) -> Iterator[None]:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.access(py_spy, os.X_OK):
        log("py-spy not found (install it into the venv); profiling skipped")
        yield
        return
    cmd = [
        py_spy,
        "record",
        "--pid",
        str(pid),
        "--rate",
        str(rate_hz),
        "--format",
        "raw",
        "--threads",
        "--nonblocking",
        "--output",
        str(out_path),
    ]
    spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()


def _function_of(frame: str) -> str:
    """'name (path/file.py:123)' -> 'name (path/file.py)': one entry per function."""
    head, sep, rest = frame.rpartition(":")
    if sep and rest.endswith(")") and rest[:-1].isdigit():
        return head + ")"
    return frame


def summarize_py_spy(raw_path: Path, top: int) -> dict[str, Any]:
    """Self and inclusive sample counts from py-spy's collapsed stacks.

    Samples are only taken of threads that are running or in a syscall py-spy
    does not know as idle (fdatasync counts as busy). `top_self_event_loop` is
    restricted to the main thread, where Trio runs every request handler.
    """
    if not raw_path.exists():
        return {"error": f"no profile at {raw_path}"}
    self_lines: Counter[str] = Counter()
    self_funcs: Counter[str] = Counter()
    self_main: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for line in raw_path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        raw_frames = stack.split(";")
        # py-spy --threads puts "thread (tid): name" first; "process ..." may follow
        thread = "?"
        if raw_frames[0].startswith("thread ("):
            thread = raw_frames[0].partition(": ")[2] or raw_frames[0]
        frames = [f for f in raw_frames if not f.startswith(("thread (", "process "))]
        if not frames:
            continue
        total += count
        threads[thread] += count
        self_lines[frames[-1]] += count
        self_funcs[_function_of(frames[-1])] += count
        if thread == "MainThread":
            self_main[_function_of(frames[-1])] += count
        for function in {_function_of(f) for f in frames}:
            inclusive[function] += count

    def ranked(counter: Counter[str], of: int) -> list[tuple[str, int, float]]:
        return [(f, c, round(100 * c / of, 1)) for f, c in counter.most_common(top) if of]

    return {
        "samples": total,
        "threads": dict(threads.most_common()),
        "top_self": ranked(self_funcs, total),
        "top_self_event_loop": ranked(self_main, threads["MainThread"]),
        "top_self_lines": ranked(self_lines, total),
        "top_inclusive": ranked(inclusive, total),
    }
