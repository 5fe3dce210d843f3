"""Transactional offsets on this broker: TxnOffsetCommit's writes and the end of
the transactions that hold them.

The pure rules are `weir.groupcoord` (validation in the coordinators, pending
offsets in `committed_offsets.OffsetStore`); this module drives them with the
service's storage:

1. TxnOffsetCommit (`commit_transactional_offsets`): once the transaction
   coordinator's check passed (`TxnOffsetsCheck`, done by the handler), the group
   validates the request, the accepted offsets are held pending in the producer's
   transaction, and their records are appended at once to the group's
   `__consumer_offsets` partition as a transactional batch of the producer (its id
   and epoch; the log checks the epoch). The answer waits until they are durable.
2. The transaction coordinator writes the COMMIT or ABORT marker to that
   partition and calls `complete_transaction` (through
   `GroupService.complete_transaction`): a commit sets the pending offsets of the
   partition's groups, placed by the marker, so OffsetFetch answers them once the
   marker is committed; an abort drops them.
3. A new coordinator (a restart, a failover) reads both back: the records of a
   transactional batch are pending, the markers commit or abort them, and those
   with no marker yet stay pending until the coordinator writes it
   (`GroupService` loading).

`TransactionalOffsets` is a part of `GroupService` (its base class, so this module
never imports the service): the service provides the storage it declares.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from weir.broker.broker import Broker
from weir.broker.coordinators.offsets_topic import (
    OFFSETS_TOPIC_NAME,
    TxnProducer,
    append_group_records_now,
)
from weir.format.errors import ErrorCode
from weir.groupcoord.classic_coordinator import ClassicGroupCoordinator
from weir.groupcoord.classic_messages import OffsetCommitRequest, PartitionError
from weir.groupcoord.committed_offsets import CommittedOffset, OffsetStore
from weir.groupcoord.consumer_coordinator import ConsumerGroupCoordinator
from weir.groupcoord.record_schemas import GroupRecord
from weir.log.errors import LogError

# Append errors that say the log itself failed, or this broker stopped leading,
# rather than that the producer's batch was refused (a fenced epoch, ...).
_LOG_FAILURES = (
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR,
)


@dataclass(frozen=True)
class TxnOffsetsCheck:
    """What the transaction coordinator checks before a TxnOffsetCommit's records
    are appended (KIP-890): that the group's offsets partition is in the
    producer's ongoing transaction, or, with `add_partition` (TxnOffsetCommit v5,
    transaction version 2), that it is added to it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    offsets_partition: int
    add_partition: bool


# Set by the broker's wiring of the transaction coordinator as
# `GroupService.txn_offsets_verifier` (None: no check).
TxnOffsetsVerifier = Callable[[TxnOffsetsCheck], Awaitable[ErrorCode]]


class Durable(Protocol):
    """Records appended: await `durable()` before answering (`PendingWrite`)."""

    def durable(self) -> Awaitable[ErrorCode]: ...


class TransactionalOffsets:
    """The transactional side of `GroupService` (see the module docstring)."""

    broker: Broker
    offsets: OffsetStore
    classic: ClassicGroupCoordinator
    consumer_groups: ConsumerGroupCoordinator
    txn_offsets_verifier: TxnOffsetsVerifier | None

    # -- provided by GroupService ------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        raise NotImplementedError

    def loads(self, partition: int) -> bool:
        raise NotImplementedError

    def poke(self) -> None:
        raise NotImplementedError

    def _append_failed(self, partition: int, error: LogError) -> None:
        raise NotImplementedError

    def _pending_write(self, ends: dict[int, int]) -> Durable:
        raise NotImplementedError

    # -- TxnOffsetCommit ---------------------------------------------------------

    def commit_transactional_offsets(
        self, commit: OffsetCommitRequest, producer: TxnProducer, now_ms: int
    ) -> tuple[list[PartitionError], Durable | None]:
        """Step 1 after the check: validate against the group (KIP-848 or classic),
        hold the accepted offsets pending and append their records now. Returns
        each offset's answer and the write to await (None: nothing appended, or
        the append was refused and the answers say why)."""
        group_id = commit.group_id
        if self.consumer_groups.has_group(group_id):
            error = self.consumer_groups.validate_txn_offset_commit(
                group_id, commit.member_id, commit.group_instance_id, commit.generation_id
            )
            results = [PartitionError(o.topic, o.partition, error) for o in commit.offsets]
            if error != ErrorCode.NONE:
                return results, None
            accepted = [
                (
                    o.topic,
                    o.partition,
                    CommittedOffset(o.offset, o.leader_epoch, o.metadata or "", now_ms),
                )
                for o in commit.offsets
            ]
            records = self.offsets.commit_transactional(producer.producer_id, group_id, accepted)
        else:
            reply = self.classic.commit_transactional_offsets(commit, producer.producer_id, now_ms)
            records, results = reply.records, reply.pending.result
        if not records:
            return results, None
        try:
            pending = self.append_transactional(records, group_id, producer)
        except LogError as exc:
            refused = exc.error_code
            return [PartitionError(r.topic, r.partition, r.error or refused) for r in results], None
        return results, pending

    def append_transactional(
        self, records: Sequence[GroupRecord], group_id: str, producer: TxnProducer
    ) -> Durable:
        """Append one group's TxnOffsetCommit records now, in transactional batches of
        the producer. A batch the log refuses (its producer checks: a fenced epoch)
        drops their pending offsets and leaves the partition served. Raises LogError."""
        partition = self.partition_for(group_id)
        try:
            end_offset = append_group_records_now(self.broker, partition, records, producer)
        except LogError as exc:
            self.offsets.discard(records)
            if exc.error_code in _LOG_FAILURES:
                self._append_failed(partition, exc)
            raise
        self.offsets.place(partition, end_offset, records)
        self.poke()
        return self._pending_write({partition: end_offset})

    # -- the transaction's end ---------------------------------------------------

    def complete_transaction(
        self, offsets_partition: int, producer_id: int, commit: bool, marker_offset: int
    ) -> int:
        """Step 2: the transaction coordinator wrote producer `producer_id`'s COMMIT
        (or ABORT) marker at `marker_offset` of offsets partition
        `offsets_partition`. The producer's pending offsets of that partition's
        groups become their offsets (OffsetFetch answers them once the marker is
        committed), or are dropped. Call it right after the marker's append, on the
        broker that appended it. A partition this broker has not loaded is left
        alone: loading it reads the marker back. Returns how many offsets the
        commit set."""
        if not self.loads(offsets_partition):
            return 0
        applied = self.offsets.end_transaction(
            producer_id,
            commit,
            lambda group_id: self.partition_for(group_id) == offsets_partition,
            offsets_partition,
            marker_offset + 1,
        )
        replica = self.broker.partition(OFFSETS_TOPIC_NAME, offsets_partition)
        if replica is not None:
            self.offsets.promote(offsets_partition, replica.high_watermark)
        self.poke()  # expiry may proceed for groups no transaction holds any more
        return applied
