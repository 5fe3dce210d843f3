"""Where a consumer group's offsets go when an operator resets them: the rules of
Kafka's `kafka-consumer-groups.sh --reset-offsets`, as a pure function of what
was looked up (the group's committed offsets, each partition's log start and
end, the offset a timestamp names).

- `earliest`: the partition's log start offset (`--to-earliest`);
- `latest`: its log end offset, the high watermark (`--to-latest`);
- `timestamp`: the first offset whose record's timestamp is at or after it, the
  log end offset when there is none (`--to-datetime`);
- `shift_by`: the committed offset plus N, N may be negative (`--shift-by`); a
  partition with no committed offset cannot be shifted (Kafka refuses too);
- `offset`: that offset (`--to-offset`).

A target outside the log, [log start, log end], is moved to the nearer end, as
Kafka does. Which partitions are reset (the group's committed ones, or the
named topics' partitions) is the caller's choice, also Kafka's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

EARLIEST = "earliest"
LATEST = "latest"
TIMESTAMP = "timestamp"
SHIFT_BY = "shift_by"
OFFSET = "offset"
STRATEGIES = (EARLIEST, LATEST, TIMESTAMP, SHIFT_BY, OFFSET)

Partition = tuple[str, int]


class ResetRefusedError(ValueError):
    """The reset cannot be planned (a shift of a partition with no committed offset,
    a partition whose log bounds are unknown)."""


@dataclass(frozen=True)
class LogBounds:
    start_offset: int
    end_offset: int
    # The offset `timestamp` names (None: no record at or after it).
    at_timestamp: int | None = None


@dataclass(frozen=True)
class PlannedOffset:
    topic: str
    partition: int
    current_offset: int | None
    new_offset: int
    log_start_offset: int
    log_end_offset: int


def plan_reset(
    strategy: str,
    value: int | None,
    partitions: Sequence[Partition],
    committed: Mapping[Partition, int],
    bounds: Mapping[Partition, LogBounds],
) -> list[PlannedOffset]:
    """The new offset of each of `partitions` (sorted). `value` is the strategy's
    number: the shift, the offset (the timestamp is looked up into `bounds`)."""
    planned = []
    for topic, partition in sorted(set(partitions)):
        key = (topic, partition)
        log = bounds.get(key)
        if log is None:
            raise ResetRefusedError(f"the log of {topic}-{partition} did not answer (no leader?)")
        current = committed.get(key)
        target = _target(strategy, value, key, current, log)
        clamped = min(max(target, log.start_offset), log.end_offset)
        planned.append(
            PlannedOffset(topic, partition, current, clamped, log.start_offset, log.end_offset)
        )
    return planned


def _target(
    strategy: str, value: int | None, key: Partition, current: int | None, log: LogBounds
) -> int:
    if strategy == EARLIEST:
        return log.start_offset
    if strategy == LATEST:
        return log.end_offset
    if strategy == TIMESTAMP:
        return log.end_offset if log.at_timestamp is None else log.at_timestamp
    if value is None:
        raise ResetRefusedError(f"{strategy} needs a value")
    if strategy == SHIFT_BY:
        if current is None:
            raise ResetRefusedError(
                f"cannot shift {key[0]}-{key[1]}: the group has no committed offset there"
            )
        return current + value
    if strategy == OFFSET:
        return value
    raise ResetRefusedError(f"unknown strategy {strategy!r}; one of {', '.join(STRATEGIES)}")
