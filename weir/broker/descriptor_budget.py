"""The broker's file descriptor budget.

A process may hold at most RLIMIT_NOFILE descriptors (`ulimit -n`). The broker
raises its soft limit to the hard one at start, then splits it:

- connections: Kafka `connections_max`, HTTP `http_connections_max`, and
  CONNECTION_DESCRIPTORS_SPARE for listeners and for sockets accepted only to be
  closed past the maximum;
- broker work: BROKER_WORK_DESCRIPTORS for everything else the process opens
  briefly or for its life (standard streams, the data dir lock and its syncfs
  descriptor, the syncfs helper's pipes, the event loop, checkpoint, snapshot
  and metadata writes, a compaction pass's files);
- log files: the rest, the capacity of the log file cache (weir/log/descriptors.py).

A partition needs DESCRIPTORS_PER_PARTITION log file descriptors while it is
written and none while idle; so that every partition the broker accepted can be
written at once, it admits at most `partitions_max`: the log files share, less
the cache's headroom for reads of sealed segments and for segments awaiting
their sync, divided by that. Creating partitions past it is refused with
POLICY_VIOLATION before anything is written (CreateTopics, CreatePartitions,
auto-creation); the offsets topic is counted before it exists.

When the limit is too low for `connections_max`, connections get at most half
of what is left after the broker's own work, and `connections_max` is lowered
to match (logged).
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass

from weir.broker.config import Limits
from weir.log.descriptors import (
    DESCRIPTORS_PER_PARTITION,
    LOG_FILES_HEADROOM_FRACTION,
    LOG_FILES_HEADROOM_MIN,
)

BROKER_WORK_DESCRIPTORS = 64
CONNECTION_DESCRIPTORS_SPARE = 16
# Where the hard limit is "unlimited", the kernel's own maximum applies.
NR_OPEN_PATH = "/proc/sys/fs/nr_open"
NR_OPEN_DEFAULT = 1 << 20


@dataclass(frozen=True)
class DescriptorBudget:
    limit: int  # the soft RLIMIT_NOFILE
    connections: int  # Kafka and HTTP connections, listeners
    connections_max: int  # Kafka connections that fit in `connections`
    broker_work: int

    @classmethod
    def plan(cls, limit: int, limits: Limits) -> DescriptorBudget:
        wanted = limits.connections_max + limits.http_connections_max
        wanted += CONNECTION_DESCRIPTORS_SPARE
        connections = min(wanted, max(0, limit - BROKER_WORK_DESCRIPTORS) // 2)
        others = limits.http_connections_max + CONNECTION_DESCRIPTORS_SPARE
        connections_max = min(limits.connections_max, max(1, connections - others))
        return cls(limit, connections, connections_max, BROKER_WORK_DESCRIPTORS)

    @property
    def log_files(self) -> int:
        """The log file cache's capacity."""
        return max(DESCRIPTORS_PER_PARTITION, self.limit - self.connections - self.broker_work)

    @property
    def log_files_headroom(self) -> int:
        """Log file descriptors never counted for partitions: reads of sealed
        segments, and sealed segments awaiting the round that syncs them."""
        fraction = int(self.log_files * LOG_FILES_HEADROOM_FRACTION)
        return min(self.log_files, max(LOG_FILES_HEADROOM_MIN, fraction))

    @property
    def partitions_max(self) -> int:
        return (self.log_files - self.log_files_headroom) // DESCRIPTORS_PER_PARTITION

    def refusal(self, added: int, existing: int) -> str | None:
        """Why `added` partitions more than `existing` do not fit; None when they do."""
        if existing + added <= self.partitions_max:
            return None
        left = max(0, self.partitions_max - existing)
        return (
            f"creating {added} partitions would need {added * DESCRIPTORS_PER_PARTITION} file "
            f"descriptors ({DESCRIPTORS_PER_PARTITION} per partition being written: its active "
            f"segment's files); the broker has {left * DESCRIPTORS_PER_PARTITION} left of its "
            f"limit {self.limit} (RLIMIT_NOFILE: {existing} partitions hold "
            f"{existing * DESCRIPTORS_PER_PARTITION}, {self.connections} are reserved for "
            f"connections, {self.broker_work} for the broker's own work and "
            f"{self.log_files_headroom} for reads and segment rolls), so at most {left} more "
            "partitions fit: raise `ulimit -n` (LimitNOFILE= under systemd) and restart "
            "the broker, or create fewer partitions"
        )

    def describe(self) -> str:
        return (
            f"open files limit {self.limit} (RLIMIT_NOFILE): {self.connections} reserved for "
            f"connections (connections_max {self.connections_max}), {self.broker_work} for "
            f"the broker's own work, {self.log_files} for log files: at most "
            f"{self.partitions_max} partitions ({DESCRIPTORS_PER_PARTITION} descriptors each "
            "while written)"
        )


def open_files_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _finite(soft)


def raise_open_files_limit() -> tuple[int, str]:
    """Raise the soft RLIMIT_NOFILE to the hard limit. Returns what to log, and at
    which level, once the broker serves (a startup error stays one line)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _finite(hard)
    if soft != resource.RLIM_INFINITY and soft >= target:
        return logging.INFO, f"open files limit (RLIMIT_NOFILE) is {soft}, the hard limit"
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        return logging.WARNING, (
            f"open files limit (RLIMIT_NOFILE) stays {soft}: raising it to {target} failed: {exc}"
        )
    return logging.INFO, f"open files limit (RLIMIT_NOFILE) raised from {soft} to {target}"


def _finite(limit: int) -> int:
    if limit != resource.RLIM_INFINITY:
        return limit
    try:
        with open(NR_OPEN_PATH) as f:
            return int(f.read())
    except (OSError, ValueError):
        return NR_OPEN_DEFAULT
