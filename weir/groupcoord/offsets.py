"""Committed offsets of one group: what OffsetCommit stores and OffsetFetch reads.

`OffsetStore` is a plain table `(topic, partition) -> CommittedOffset`; the rules about
*who* may commit live in the coordinator (`classic_coordinator`). Expiry follows Kafka:
an offset expires when `now_ms - base_ms >= retention_ms`, where the base is the time
the group became empty for an Empty group, or the commit timestamp otherwise (an offset
written with an explicit expire timestamp, OffsetCommitValue v1, expires at it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

TopicPartition = tuple[str, int]

NO_LEADER_EPOCH = -1
NO_EXPIRE_TIMESTAMP = -1


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = NO_EXPIRE_TIMESTAMP


class OffsetStore:
    """The committed offsets of one group."""

    def __init__(self) -> None:
        self._offsets: dict[TopicPartition, CommittedOffset] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def __iter__(self) -> Iterator[tuple[TopicPartition, CommittedOffset]]:
        return iter(sorted(self._offsets.items()))

    def commit(self, topic: str, partition: int, offset: CommittedOffset) -> None:
        self._offsets[(topic, partition)] = offset

    def get(self, topic: str, partition: int) -> CommittedOffset | None:
        return self._offsets.get((topic, partition))

    def delete(self, topic: str, partition: int) -> bool:
        return self._offsets.pop((topic, partition), None) is not None

    def topics(self) -> set[str]:
        return {topic for topic, _ in self._offsets}

    def expired(
        self,
        now_ms: int,
        retention_ms: int,
        base_ms: Callable[[CommittedOffset], int],
        kept_topics: frozenset[str] = frozenset(),
    ) -> list[TopicPartition]:
        """Partitions whose offsets have expired (not removed; the caller removes them)."""
        out = []
        for tp, committed in self._offsets.items():
            if tp[0] in kept_topics:
                continue
            if committed.expire_timestamp_ms != NO_EXPIRE_TIMESTAMP:
                if now_ms >= committed.expire_timestamp_ms:
                    out.append(tp)
            elif now_ms - base_ms(committed) >= retention_ms:
                out.append(tp)
        return sorted(out)
