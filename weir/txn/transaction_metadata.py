"""One transactional id's state (Kafka's TransactionMetadata), plain data.

The coordinator changes these fields; each change it makes is stored as the whole
entry (`entry()`), and loading rebuilds the metadata from the last entry
(`from_entry`). `durable` is the last entry the broker reported durable: the view the
broker-to-broker verification and the admin views answer from, so that nothing a
failover can take back is ever affirmed.

Not stored (as in Kafka): `last_producer_epoch`, the epoch before the last bump that
InitProducerId's KIP-360 retry check uses, so such a retry across a coordinator
change is fenced; the client then initializes again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from weir.txn.transaction_records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionLogEntry,
    TxnState,
)

# Kafka's epoch is an int16; one at or above this must not be bumped again by
# InitProducerId or a version-2 end (a new producer id is handed out instead).
EPOCH_EXHAUSTED = 32767 - 1
EPOCH_MAX = 32767

PREPARE_STATES = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
COMPLETE_STATES = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
# States in which no transaction is open: InitProducerId may bump, the id may expire.
IDLE_STATES = frozenset({TxnState.EMPTY, *COMPLETE_STATES})


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    last_update_ms: int
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    client_transaction_version: int = 0
    durable: TransactionLogEntry | None = None

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= EPOCH_EXHAUSTED

    @property
    def bumps_epoch_on_end(self) -> bool:
        """Whether the last end (or the current one) followed transaction version 2."""
        return self.client_transaction_version >= 2

    def entry(self) -> TransactionLogEntry:
        return TransactionLogEntry(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            state=self.state,
            partitions=frozenset(self.partitions),
            last_update_ms=self.last_update_ms,
            start_ms=self.start_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )

    @classmethod
    def from_entry(cls, transactional_id: str, entry: TransactionLogEntry) -> TransactionMetadata:
        # PrepareEpochFence is transient in Kafka and never stored; read as the
        # transaction it was fencing, which then times out and is aborted.
        state = TxnState.ONGOING if entry.state == TxnState.PREPARE_EPOCH_FENCE else entry.state
        return cls(
            transactional_id=transactional_id,
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            timeout_ms=entry.timeout_ms,
            state=state,
            last_update_ms=entry.last_update_ms,
            partitions=set(entry.partitions),
            start_ms=entry.start_ms,
            previous_producer_id=entry.previous_producer_id,
            next_producer_id=entry.next_producer_id,
            client_transaction_version=entry.client_transaction_version,
            durable=entry,
        )
