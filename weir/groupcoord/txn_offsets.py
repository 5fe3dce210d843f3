"""Transactional offsets (TxnOffsetCommit) waiting for their transaction's end.

A producer's TxnOffsetCommit writes ordinary offset-commit records, in a
transactional batch carrying its producer id, to the group's `__consumer_offsets`
partition. Until the transaction's marker is written to that partition they are
pending: no reader sees them (OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT for such a partition); a COMMIT marker makes them the
group's offsets, an ABORT marker drops them (Kafka's OffsetMetadataManager keeps
them the same way, by producer id).

This is the pending half of `committed_offsets.OffsetStore`, which owns it and
applies its rules: each pending offset keeps the order of its own record, and at
COMMIT it replaces the group's offset only if no later commit (a plain
OffsetCommit, or another transaction's offset committed first) has changed that
partition's offset since its record was written. A deletion (OffsetDelete,
DeleteGroups, a tombstone read back) drops the pending offsets of the partitions it
deletes, as a tombstone does in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

# The offset value (committed_offsets.CommittedOffset: that module owns this one).
V = TypeVar("V")
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PendingOffset(Generic[V]):
    """A transactional offset and the order of its record among the store's changes."""

    committed: V
    order: int


# group -> partition -> pending offset
GroupPending = dict[str, dict[TopicPartition, PendingOffset[V]]]


class PendingTxnOffsets(Generic[V]):
    def __init__(self) -> None:
        self._by_producer: dict[int, GroupPending[V]] = {}
        self._producers_by_group: dict[str, set[int]] = {}

    # -- queries -----------------------------------------------------------

    def groups(self) -> set[str]:
        return set(self._producers_by_group)

    def has_group(self, group_id: str) -> bool:
        """Whether a transaction holds offsets of the group (its group is kept)."""
        return group_id in self._producers_by_group

    def has(self, group_id: str, topic_partition: TopicPartition) -> bool:
        return any(
            topic_partition in self._by_producer[producer_id].get(group_id, {})
            for producer_id in self._producers_by_group.get(group_id, ())
        )

    def partitions(self, group_id: str) -> set[TopicPartition]:
        """The partitions of the group with an offset pending in some transaction."""
        found: set[TopicPartition] = set()
        for producer_id in self._producers_by_group.get(group_id, ()):
            found.update(self._by_producer[producer_id].get(group_id, {}))
        return found

    def producers(self) -> list[int]:
        return sorted(self._by_producer)

    # -- changes -------------------------------------------------------------

    def add(
        self,
        producer_id: int,
        group_id: str,
        topic_partition: TopicPartition,
        pending: PendingOffset[V],
    ) -> None:
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {})[topic_partition] = (
            pending
        )
        self._producers_by_group.setdefault(group_id, set()).add(producer_id)

    def get(
        self, producer_id: int, group_id: str, topic_partition: TopicPartition
    ) -> PendingOffset[V] | None:
        return self._by_producer.get(producer_id, {}).get(group_id, {}).get(topic_partition)

    def undo(
        self,
        producer_id: int,
        group_id: str,
        topic_partition: TopicPartition,
        written: PendingOffset[V],
        replaced: PendingOffset[V] | None,
    ) -> None:
        """The append of `written` failed: the offset it replaced is pending again
        (None: none was), unless something since changed that partition's entry."""
        if self.get(producer_id, group_id, topic_partition) is not written:
            return
        if replaced is None:
            self._drop(producer_id, group_id, topic_partition)
        else:
            self.add(producer_id, group_id, topic_partition, replaced)

    def drop_partition(self, group_id: str, topic_partition: TopicPartition) -> None:
        """A tombstone of the partition's offset: every transaction's offset of it goes."""
        for producer_id in list(self._producers_by_group.get(group_id, ())):
            if topic_partition in self._by_producer[producer_id].get(group_id, {}):
                self._drop(producer_id, group_id, topic_partition)

    def take(self, producer_id: int, belongs: Callable[[str], bool]) -> GroupPending[V]:
        """Remove and return the producer's pending offsets of the groups `belongs`
        accepts (those of the offsets partition whose marker was written)."""
        taken: GroupPending[V] = {}
        groups = self._by_producer.get(producer_id, {})
        for group_id in [g for g in groups if belongs(g)]:
            taken[group_id] = groups.pop(group_id)
            self._forget_producer_of(group_id, producer_id)
        if not groups:
            self._by_producer.pop(producer_id, None)
        return taken

    def forget(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            for producer_id in self._producers_by_group.pop(group_id, set()):
                groups = self._by_producer[producer_id]
                groups.pop(group_id, None)
                if not groups:
                    del self._by_producer[producer_id]

    def _drop(self, producer_id: int, group_id: str, topic_partition: TopicPartition) -> None:
        groups = self._by_producer[producer_id]
        offsets = groups[group_id]
        del offsets[topic_partition]
        if offsets:
            return
        del groups[group_id]
        if not groups:
            del self._by_producer[producer_id]
        self._forget_producer_of(group_id, producer_id)

    def _forget_producer_of(self, group_id: str, producer_id: int) -> None:
        producers = self._producers_by_group.get(group_id)
        if producers is not None:
            producers.discard(producer_id)
            if not producers:
                del self._producers_by_group[group_id]
