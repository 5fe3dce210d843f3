"""CPU seconds from /proc and getrusage: a process with its live descendants
(threads included: Weir's syncfs helper, a JVM's threads), this process, and
the whole machine."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path


def proc_cpu_seconds(root_pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process and its live descendants, threads included."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, tuple[float, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # the command name may contain spaces: split after the closing paren
        fields = raw[raw.rindex(")") + 2 :].split()
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        times[pid] = (int(fields[11]) / ticks, int(fields[12]) / ticks)
    user, system, stack = 0.0, 0.0, [root_pid]
    while stack:
        pid = stack.pop()
        pid_user, pid_system = times.get(pid, (0.0, 0.0))
        user, system = user + pid_user, system + pid_system
        stack.extend(children.get(pid, []))
    return user, system


def self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_cpu_seconds() -> float:
    """CPU seconds every process on the machine has used (/proc/stat, all CPUs, not idle)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def idle_cpu_util(pid: int, seconds: float) -> float:
    """The broker's CPU while nobody talks to it: timers, heartbeats, the JIT finishing."""
    user0, sys0 = proc_cpu_seconds(pid)
    time.sleep(seconds)
    user1, sys1 = proc_cpu_seconds(pid)
    return (user1 - user0 + sys1 - sys0) / seconds
