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
   with no marker yet stay pending until the coordinator writes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from weir.broker.coordinators.offsets_topic import OFFSETS_TOPIC_NAME, TxnProducer
from weir.format.errors import ErrorCode
from weir.groupcoord.classic_messages import OffsetCommitRequest, PartitionError
from weir.groupcoord.committed_offsets import CommittedOffset
from weir.log.errors import LogError

if TYPE_CHECKING:
    from weir.broker.coordinators.group_service import GroupService, PendingWrite


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


def commit_transactional_offsets(
    service: GroupService, commit: OffsetCommitRequest, producer: TxnProducer, now_ms: int
) -> tuple[list[PartitionError], PendingWrite | None]:
    """Step 1 after the check: validate against the group (KIP-848 or classic),
    hold the accepted offsets pending and append their records now. Returns each
    offset's answer and the write to await (None: nothing appended, or the append
    was refused and the answers say why)."""
    group_id = commit.group_id
    if service.consumer_groups.has_group(group_id):
        error = service.consumer_groups.validate_txn_offset_commit(
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
        records = service.offsets.commit_transactional(producer.producer_id, group_id, accepted)
    else:
        reply = service.classic.commit_transactional_offsets(commit, producer.producer_id, now_ms)
        records, results = reply.records, reply.pending.result
    if not records:
        return results, None
    try:
        pending = service.append_transactional(records, group_id, producer)
    except LogError as exc:
        refused = exc.error_code
        return [PartitionError(r.topic, r.partition, r.error or refused) for r in results], None
    return results, pending


def complete_transaction(
    service: GroupService,
    offsets_partition: int,
    producer_id: int,
    commit: bool,
    marker_offset: int,
) -> int:
    """Step 2: producer `producer_id`'s marker is at `marker_offset` of offsets
    partition `offsets_partition`. Its pending offsets of that partition's groups
    become their offsets (OffsetFetch answers them once the marker is committed),
    or are dropped. Call it right after the marker's append, on the broker that
    appended it. A partition this broker has not loaded is left alone: loading it
    reads the marker back. Returns how many offsets the commit set."""
    if not service.loads(offsets_partition):
        return 0
    applied = service.offsets.end_transaction(
        producer_id,
        commit,
        lambda group_id: service.partition_for(group_id) == offsets_partition,
        offsets_partition,
        marker_offset + 1,
    )
    replica = service.broker.partition(OFFSETS_TOPIC_NAME, offsets_partition)
    if replica is not None:
        service.offsets.promote(offsets_partition, replica.high_watermark)
    service.poke()  # expiry may proceed for groups no transaction holds any more
    return applied
