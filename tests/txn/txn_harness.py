"""A broker stand-in for the transaction coordinator's tests: it follows the protocol
of `weir.txn.pending` (records appended and reported durable, then markers), keeps the
log of every `__transaction_state` record, and can reload a fresh coordinator from it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from weir.txn.pending import Effects, MarkerRequest, Reply
from weir.txn.transaction_coordinator import TransactionCoordinator, TransactionSettings
from weir.txn.transaction_records import TransactionRecord

T = TypeVar("T")

NOW_MS = 1_700_000_000_000
PARTITION = 0
COORDINATOR_EPOCH = 3


class Broker:
    def __init__(self, settings: TransactionSettings | None = None) -> None:
        self.settings = settings or TransactionSettings()
        self.log: list[TransactionRecord] = []
        self.markers: list[MarkerRequest] = []
        self._ids = iter(range(1000, 10**6))
        self.coordinator = self._new_coordinator()
        self.handle(self.coordinator.finish_loading(PARTITION, COORDINATOR_EPOCH, NOW_MS))

    def _new_coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(self.settings, self.new_producer_id, lambda _tid: PARTITION)

    def new_producer_id(self) -> int | None:
        return next(self._ids)

    def handle(self, effects: Reply[Any] | Effects) -> None:
        """Steps 1 and 2: append (durable at once here), report, then the markers."""
        self.log.extend(effects.records)
        self.coordinator.records_durable(effects.records)
        self.markers.extend(effects.markers)

    def call(self, reply: Reply[T]) -> T:
        self.handle(reply)
        assert reply.pending.done
        return reply.pending.result

    def write_markers(self, now_ms: int = NOW_MS) -> None:
        """Every requested marker is written, and reported."""
        markers, self.markers = self.markers, []
        for marker in markers:
            self.handle(
                self.coordinator.markers_written(
                    marker.transactional_id,
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.partitions,
                    now_ms,
                )
            )

    def reload(self, now_ms: int = NOW_MS, coordinator_epoch: int = COORDINATOR_EPOCH + 1) -> None:
        """A failover: a new coordinator loads the log; the unsent markers are lost."""
        self.coordinator = self._new_coordinator()
        self.markers = []
        for record in self.log:
            assert self.coordinator.replay(record.key, record.value)
        self.handle(self.coordinator.finish_loading(PARTITION, coordinator_epoch, now_ms))

    def states(self) -> Iterator[tuple[str, Any]]:
        for record in self.log:
            yield record.transactional_id, record.entry
