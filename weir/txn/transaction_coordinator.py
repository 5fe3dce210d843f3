"""The transaction coordinator: a pure state machine over `__transaction_state`.

Kafka's semantics (TransactionCoordinator, TransactionMetadata and
TransactionStateManager of Apache Kafka 4.x), with no sockets, no disk and no clock:
every call takes `now_ms` and returns what the broker must do, following the protocol
of `weir.txn.pending` (append the records, wait until durable, report them with
`records_durable`, then write the markers and answer). The broker drives it from
`weir.broker.coordinators.transaction_service`.

Memory changes at once, in the order of the records handed out (as in the group
coordinators): a later request sees the effect of an earlier one whose record is not
durable yet, and is answered after it. Where an answer must rest on durable state
only (the KIP-890 verification of a partition, the admin views), the coordinator
reads `durable`, the last entry the broker reported durable.

The operations, per transactional id (its partition of `__transaction_state` must be
loaded here, else NOT_COORDINATOR):

- `init_producer_id`: a new id gets a producer id and epoch 0. An idle id (Empty,
  CompleteCommit, CompleteAbort) gets its epoch bumped, which fences every producer
  of an older epoch; an exhausted epoch rolls to a new producer id (epoch 0). With
  the caller's current (producer id, epoch) (KIP-360, after an abortable error) the
  epoch is bumped if it is the current one, the current one is returned again if it
  is the one before (a retry), anything else is PRODUCER_FENCED. An ongoing
  transaction is fenced (epoch bumped) and aborted first; the caller gets
  CONCURRENT_TRANSACTIONS and retries once the abort completed, as against Kafka.
  While a Prepare state completes: CONCURRENT_TRANSACTIONS.
- `add_partitions` (AddPartitionsToTxn v0-3, and the implicit add of version 2),
  `add_offsets` (AddOffsetsToTxn: the group's offsets partition joins).
- `verify_partitions` (AddPartitionsToTxn v4+ verify-only, KIP-890 part 1).
- `end_txn` (EndTxn): version 1 keeps the epoch; version 2 bumps it on every commit
  and abort and answers the new one (a new producer id when exhausted), so a late
  request or marker of the ended transaction can never land in the next one. A retry
  of a completed end is answered NONE; a late end of an older epoch PRODUCER_FENCED.
- `markers_written`: partitions whose marker was written; once all are, the
  transaction completes (CompleteCommit/CompleteAbort).
- `advance(now_ms)`: aborts transactions open longer than their timeout (bounded by
  `max_timeout_ms`) and expires ids idle for `id_expiration_ms` (a tombstone).
- `replay`/`finish_loading`/`unload`: a partition's records rebuild its ids; a
  transaction loaded in a Prepare state gets its markers requested again.
- `describe`, `list_transactions`: DescribeTransactions and ListTransactions views.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from weir.format.errors import ErrorCode
from weir.txn.pending import Effects, MarkerRequest, Outbox, Reply
from weir.txn.transaction_metadata import (
    EPOCH_MAX,
    IDLE_STATES,
    PREPARE_STATES,
    TransactionMetadata,
)
from weir.txn.transaction_records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionLogEntry,
    TransactionRecord,
    TxnState,
    decode_transaction_key,
    decode_transaction_value,
    is_transaction_key,
    transaction_record,
)


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    """`transaction.max.timeout.ms`, `transactional.id.expiration.ms`, and the
    finalized `transaction.version` (records are TransactionLogValue v1 from 1; the
    coordinator's own aborts bump the epoch like a version-2 end from 2)."""

    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 7 * 24 * 3600 * 1000
    transaction_version: int = 2

    @property
    def value_version(self) -> int:
        return 1 if self.transaction_version >= 1 else 0


@dataclass(frozen=True, slots=True)
class ProducerIdResult:
    """InitProducerId's and EndTxn's answer: the producer id and epoch to use next."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    error: ErrorCode
    state: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 0
    start_ms: int = -1
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


class TransactionCoordinator:
    def __init__(
        self,
        settings: TransactionSettings,
        new_producer_id: Callable[[], int | None],
        partition_of: Callable[[str], int],
    ) -> None:
        """`new_producer_id()` hands out a fresh producer id, or None when none is
        reserved (answered COORDINATOR_LOAD_IN_PROGRESS, retriable);
        `partition_of(transactional_id)` is its `__transaction_state` partition."""
        self.settings = settings
        self._new_producer_id = new_producer_id
        self._partition_of = partition_of
        self._txns: dict[str, TransactionMetadata] = {}
        self._coordinator_epochs: dict[int, int] = {}  # loaded partition -> leader epoch
        self._loading: dict[str, TransactionLogEntry | None] = {}
        self._outbox = Outbox()

    # -- InitProducerId ------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        now_ms: int,
        expected: tuple[int, int] | None = None,
    ) -> Reply[ProducerIdResult]:
        """InitProducerId with a transactional id; `expected` is the request's
        (producer id, epoch) when the client sends its current ones (KIP-360)."""
        error = self._init_error(transactional_id, timeout_ms)
        if error is not None:
            return self._outbox.answer(ProducerIdResult(error))
        txn = self._txns.get(transactional_id)
        if txn is None:
            producer_id = self._new_producer_id()
            if producer_id is None:
                return self._outbox.answer(ProducerIdResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
            txn = TransactionMetadata(
                transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY, now_ms
            )
            self._txns[transactional_id] = txn
        if expected is not None and not _may_reinitialize(txn, *expected):
            return self._outbox.answer(ProducerIdResult(ErrorCode.PRODUCER_FENCED))
        if txn.state in PREPARE_STATES:
            return self._outbox.answer(ProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS))
        if txn.state == TxnState.ONGOING:
            self._fence_and_abort(txn, now_ms)
            return self._outbox.answer(ProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS))
        error = self._bump_or_rotate(txn, expected)
        if error is not None:
            return self._outbox.answer(ProducerIdResult(error))
        txn.state = TxnState.EMPTY
        txn.timeout_ms = timeout_ms
        txn.partitions.clear()
        txn.start_ms = -1
        self._write(txn, now_ms)
        return self._outbox.answer(
            ProducerIdResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)
        )

    def _init_error(self, transactional_id: str, timeout_ms: int) -> ErrorCode | None:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT
        return self._not_here(transactional_id)

    def _bump_or_rotate(
        self, txn: TransactionMetadata, expected: tuple[int, int] | None
    ) -> ErrorCode | None:
        """An idle id's next epoch, Kafka's rules (see the module docstring)."""
        if txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
            producer_id = self._new_producer_id()
            if producer_id is None:
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            txn.last_producer_epoch = (
                txn.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            )
            txn.previous_producer_id, txn.producer_id = txn.producer_id, producer_id
            txn.producer_epoch = 0
            return None
        if expected is None:
            txn.last_producer_epoch = NO_PRODUCER_EPOCH
            txn.producer_epoch += 1
        elif txn.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == txn.producer_epoch:
            txn.last_producer_epoch = txn.producer_epoch
            txn.producer_epoch += 1
        elif expected[1] != txn.last_producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        # else: a retry of the bump that answered (producer id, epoch): the same again.
        return None

    # -- AddPartitionsToTxn, AddOffsetsToTxn, verification -----------------

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
        transaction_version: int = 1,
    ) -> Reply[ErrorCode]:
        """The client form (v0-3), or the implicit add of transaction version 2: one
        error for every partition. (Handlers of old versions answer PRODUCER_FENCED
        as INVALID_PRODUCER_EPOCH, as Kafka's do.)"""
        added = set(partitions)
        txn, error = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return self._outbox.answer(error)
        if txn.state in PREPARE_STATES:
            return self._outbox.answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if txn.state == TxnState.ONGOING and added <= txn.partitions:
            return self._outbox.answer(ErrorCode.NONE)
        if not added:
            return self._outbox.answer(ErrorCode.NONE)
        if txn.state in IDLE_STATES:
            txn.start_ms = now_ms
            txn.client_transaction_version = transaction_version
        txn.state = TxnState.ONGOING
        txn.partitions |= added
        self._write(txn, now_ms)
        return self._outbox.answer(ErrorCode.NONE)

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets_partition: TopicPartition,
        now_ms: int,
    ) -> Reply[ErrorCode]:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition (the caller
        says which) joins the transaction, so that its offsets get the markers."""
        return self.add_partitions(
            transactional_id, producer_id, producer_epoch, [offsets_partition], now_ms
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1: may a leader append this producer's transactional batch to
        each partition? Only if the partition's add is durable and the transaction of
        this producer id and epoch is still open; TRANSACTION_ABORTABLE otherwise."""
        asked = list(partitions)
        txn, error = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if txn is not None and txn.state in PREPARE_STATES:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if txn is None or error != ErrorCode.NONE:
            return dict.fromkeys(asked, error)
        durable = txn.durable
        open_partitions: frozenset[TopicPartition] = frozenset()
        if (
            txn.state == TxnState.ONGOING
            and durable is not None
            and durable.state == TxnState.ONGOING
            and durable.producer_id == producer_id
            and durable.producer_epoch == producer_epoch
        ):
            open_partitions = durable.partitions
        return {
            partition: ErrorCode.NONE
            if partition in open_partitions
            else ErrorCode.TRANSACTION_ABORTABLE
            for partition in asked
        }

    def _producer_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[TransactionMetadata | None, ErrorCode]:
        if not transactional_id:
            return None, ErrorCode.INVALID_REQUEST
        error = self._not_here(transactional_id)
        if error is not None:
            return None, error
        txn = self._txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return None, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return None, ErrorCode.PRODUCER_FENCED
        return txn, ErrorCode.NONE

    # -- EndTxn and the markers ----------------------------------------------

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        now_ms: int,
        transaction_version: int = 1,
    ) -> Reply[ProducerIdResult]:
        """EndTxn; `transaction_version` is 2 for EndTxn v5+, else 1. The answer is
        released once the Prepare record is durable; the markers follow."""
        if not transactional_id:
            return self._outbox.answer(ProducerIdResult(ErrorCode.INVALID_REQUEST))
        txn = self._txns.get(transactional_id)
        error = self._not_here(transactional_id) or _end_txn_check(txn, producer_id, producer_epoch)
        if error is not None:
            return self._outbox.answer(ProducerIdResult(error))
        assert txn is not None
        if txn.state == TxnState.ONGOING:
            return self._end_ongoing(txn, commit, now_ms, transaction_version)
        wanted_complete = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn.state == wanted_complete:  # a retry of the end that completed
            return self._outbox.answer(
                ProducerIdResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)
            )
        if txn.state in PREPARE_STATES:
            # Kafka answers any end while the markers are written (a state change in
            # progress) with CONCURRENT_TRANSACTIONS, the opposite result too: the
            # client retries and is answered once the transaction completed.
            return self._outbox.answer(ProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS))
        return self._outbox.answer(ProducerIdResult(ErrorCode.INVALID_TXN_STATE))

    def _end_ongoing(
        self, txn: TransactionMetadata, commit: bool, now_ms: int, transaction_version: int
    ) -> Reply[ProducerIdResult]:
        next_producer_id = NO_PRODUCER_ID
        if transaction_version >= 2:
            if txn.epoch_exhausted:
                new_id = self._new_producer_id()
                if new_id is None:
                    return self._outbox.answer(
                        ProducerIdResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
                    )
                next_producer_id = new_id
            txn.last_producer_epoch = txn.producer_epoch
            txn.producer_epoch += 1
        self._prepare_end(txn, commit, transaction_version, next_producer_id, now_ms)
        if next_producer_id != NO_PRODUCER_ID:
            return self._outbox.answer(ProducerIdResult(ErrorCode.NONE, next_producer_id, 0))
        return self._outbox.answer(
            ProducerIdResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)
        )

    def _fence_and_abort(self, txn: TransactionMetadata, now_ms: int) -> None:
        """Kafka's PrepareEpochFence: bump the epoch once (fencing the producer), then
        abort under the transaction's own version, as Kafka 4.4 does: the abort marker
        carries the bumped epoch, newer than the transaction's batches; a late EndTxn
        of the fenced producer is PRODUCER_FENCED under version 1, and under version 2
        (its epoch is the one before: a retry's) INVALID_TXN_STATE for a commit."""
        txn.last_producer_epoch = txn.producer_epoch
        txn.producer_epoch = min(txn.producer_epoch + 1, EPOCH_MAX)
        version = txn.client_transaction_version or self.settings.transaction_version
        self._prepare_end(txn, False, version, NO_PRODUCER_ID, now_ms)

    def _prepare_end(
        self,
        txn: TransactionMetadata,
        commit: bool,
        transaction_version: int,
        next_producer_id: int,
        now_ms: int,
    ) -> None:
        txn.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        txn.client_transaction_version = transaction_version
        txn.next_producer_id = next_producer_id
        self._write(txn, now_ms)
        if txn.partitions:
            self._outbox.markers.append(self._marker(txn))
        else:
            self._complete(txn, now_ms)

    def markers_written(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> Effects:
        """The markers of these partitions are written (or need not be: a deleted
        partition). Once none is left, the transaction completes. Reports for a
        transaction that is no longer waiting for them are ignored."""
        txn = self._txns.get(transactional_id)
        if (
            txn is not None
            and txn.state in PREPARE_STATES
            and txn.producer_id == producer_id
            and txn.producer_epoch == producer_epoch
        ):
            txn.partitions.difference_update(partitions)
            if not txn.partitions:
                self._complete(txn, now_ms)
        return self._outbox.effects()

    def _complete(self, txn: TransactionMetadata, now_ms: int) -> None:
        commit = txn.state == TxnState.PREPARE_COMMIT
        txn.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn.next_producer_id != NO_PRODUCER_ID:  # version 2 ran out of epochs
            txn.previous_producer_id, txn.producer_id = txn.producer_id, txn.next_producer_id
            txn.producer_epoch = 0
            txn.next_producer_id = NO_PRODUCER_ID
        txn.partitions.clear()
        self._write(txn, now_ms)

    def _marker(self, txn: TransactionMetadata) -> MarkerRequest:
        return MarkerRequest(
            transactional_id=txn.transactional_id,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            commit=txn.state == TxnState.PREPARE_COMMIT,
            coordinator_epoch=self._coordinator_epochs[self._partition_of(txn.transactional_id)],
            transaction_version=txn.client_transaction_version,
            partitions=frozenset(txn.partitions),
        )

    # -- durability, timers --------------------------------------------------

    def records_durable(self, records: Iterable[TransactionRecord]) -> None:
        """These records (handed out by earlier calls, reported in append order)
        are durable: they become what verification and the admin views read."""
        for record in records:
            txn = self._txns.get(record.transactional_id)
            if txn is not None:
                txn.durable = record.entry

    def advance(self, now_ms: int) -> Effects:
        """Abort the transactions open past their timeout; expire idle ids."""
        for txn in list(self._txns.values()):
            if txn.state == TxnState.ONGOING and now_ms > self._timeout_deadline_ms(txn):
                self._fence_and_abort(txn, now_ms)
            elif txn.state in IDLE_STATES and now_ms >= self._expiry_deadline_ms(txn):
                del self._txns[txn.transactional_id]
                self._outbox.records.append(
                    transaction_record(txn.transactional_id, None, self.settings.value_version)
                )
        return self._outbox.effects()

    def next_deadline_ms(self) -> int | None:
        """When `advance` next has something to do (None: nothing pending)."""
        deadlines = [
            self._timeout_deadline_ms(txn) + 1
            if txn.state == TxnState.ONGOING
            else self._expiry_deadline_ms(txn)
            for txn in self._txns.values()
            if txn.state == TxnState.ONGOING or txn.state in IDLE_STATES
        ]
        return min(deadlines, default=None)

    def _timeout_deadline_ms(self, txn: TransactionMetadata) -> int:
        return txn.start_ms + min(txn.timeout_ms, self.settings.max_timeout_ms)

    def _expiry_deadline_ms(self, txn: TransactionMetadata) -> int:
        return txn.last_update_ms + self.settings.id_expiration_ms

    # -- loading -------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> bool:
        """One record of a partition being loaded, in log order; False (skipped)
        for a key that is not a TransactionLogKey. RecordFormatError if malformed."""
        if not is_transaction_key(key):
            return False
        self._loading[decode_transaction_key(key)] = decode_transaction_value(value)
        return True

    def finish_loading(self, partition: int, coordinator_epoch: int, now_ms: int) -> Effects:
        """The records replayed since the last load were all of `partition`, now led
        here at `coordinator_epoch`: its ids are served from now on, and the
        transactions caught in a Prepare state get their markers requested again."""
        self.unload(partition)
        self._coordinator_epochs[partition] = coordinator_epoch
        loaded, self._loading = self._loading, {}
        for transactional_id, entry in loaded.items():
            if entry is None or entry.state == TxnState.DEAD:
                continue
            if self._partition_of(transactional_id) != partition:
                continue
            txn = TransactionMetadata.from_entry(transactional_id, entry)
            self._txns[transactional_id] = txn
            if txn.state in PREPARE_STATES:
                if txn.partitions:
                    self._outbox.markers.append(self._marker(txn))
                else:
                    self._complete(txn, now_ms)
        return self._outbox.effects()

    def unload(self, partition: int) -> None:
        """This broker no longer coordinates `partition` (its records stay)."""
        self._coordinator_epochs.pop(partition, None)
        for transactional_id in [t for t in self._txns if self._partition_of(t) == partition]:
            del self._txns[transactional_id]

    # -- admin views ---------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionDescription:
        """DescribeTransactions for one id, from its durable state."""
        if not transactional_id:
            return TransactionDescription(ErrorCode.INVALID_REQUEST)
        error = self._not_here(transactional_id)
        if error is not None:
            return TransactionDescription(error)
        txn = self._txns.get(transactional_id)
        entry = txn.durable if txn is not None else None
        if entry is None:
            return TransactionDescription(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return TransactionDescription(
            ErrorCode.NONE,
            entry.state.kafka_name,
            entry.producer_id,
            entry.producer_epoch,
            entry.timeout_ms,
            entry.start_ms,
            tuple(sorted(entry.partitions)),
        )

    def list_transactions(
        self,
        now_ms: int,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
    ) -> tuple[list[str], list[TransactionListing]]:
        """ListTransactions over the loaded partitions' durable states: (the state
        filters that name no state, the matching transactions by id). A duration
        filter keeps transactions running longer than `min_duration_ms`."""
        wanted_ids = set(producer_ids)
        names = list(states)
        unknown = [name for name in names if TxnState.from_kafka_name(name) is None]
        wanted_states = {s for name in names if (s := TxnState.from_kafka_name(name)) is not None}
        listings = []
        for transactional_id in sorted(self._txns):
            entry = self._txns[transactional_id].durable
            if entry is None or entry.state == TxnState.DEAD:
                continue
            if wanted_ids and entry.producer_id not in wanted_ids:
                continue
            if names and entry.state not in wanted_states:
                continue
            if min_duration_ms >= 0 and now_ms - entry.start_ms <= min_duration_ms:
                continue
            listings.append(
                TransactionListing(transactional_id, entry.producer_id, entry.state.kafka_name)
            )
        return unknown, listings

    def transactional_ids(self) -> list[str]:
        return sorted(self._txns)

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The latest state of an id (tests and diagnostics; do not change it)."""
        return self._txns.get(transactional_id)

    # -- helpers -------------------------------------------------------------

    def _not_here(self, transactional_id: str) -> ErrorCode | None:
        if self._partition_of(transactional_id) not in self._coordinator_epochs:
            return ErrorCode.NOT_COORDINATOR
        return None

    def _write(self, txn: TransactionMetadata, now_ms: int) -> None:
        txn.last_update_ms = now_ms
        self._outbox.records.append(
            transaction_record(txn.transactional_id, txn.entry(), self.settings.value_version)
        )


def _may_reinitialize(txn: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """KIP-360: may a producer presenting (producer id, epoch) re-initialize? A fresh id
    (no epoch yet), its current producer id (the epoch is checked next), or the
    previous producer id with an exhausted epoch (a retry of the roll to a new id)."""
    return (
        txn.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == txn.producer_id
        or (producer_id == txn.previous_producer_id and producer_epoch >= EPOCH_MAX - 1)
    )


def _end_txn_check(
    txn: TransactionMetadata | None, producer_id: int, producer_epoch: int
) -> ErrorCode | None:
    """EndTxn's producer id and epoch checks, Kafka's rules for both versions. After a
    version-2 end the stored epoch is one above the client's, so a retry of that end
    presents epoch - 1 (or, after a roll to a new producer id, the previous id and
    the exhausted epoch); the same epoch as stored would be the next end."""
    if txn is None:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    retry_of_bump = txn.bumps_epoch_on_end and txn.producer_epoch == producer_epoch + 1
    retry_of_roll = (
        txn.bumps_epoch_on_end
        and txn.previous_producer_id == producer_id
        and producer_epoch == EPOCH_MAX - 1
        and txn.producer_epoch == 0
    )
    if txn.producer_id != producer_id and not retry_of_roll:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if not txn.bumps_epoch_on_end or txn.state in (TxnState.ONGOING, TxnState.EMPTY):
        valid = producer_epoch == txn.producer_epoch
    elif txn.state in PREPARE_STATES:
        valid = retry_of_bump
    else:
        valid = retry_of_bump or retry_of_roll
    return None if valid else ErrorCode.PRODUCER_FENCED
