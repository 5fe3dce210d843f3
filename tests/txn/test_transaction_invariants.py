"""Seeded random runs of the transaction coordinator (several ids, both transaction
versions, zombies with old epochs, timeouts, lost markers and failovers), checking
its invariants after every step."""

from __future__ import annotations

import dataclasses
import random

import pytest

from weir.format.errors import ErrorCode
from weir.txn.transaction_coordinator import TransactionSettings
from weir.txn.transaction_metadata import PREPARE_STATES
from weir.txn.transaction_records import TxnState

from .txn_harness import NOW_MS, Broker

IDS = ["a", "b", "c"]
PARTITIONS = [("t", p) for p in range(4)]


class Checker:
    """The invariants, over everything the coordinator handed out."""

    def __init__(self) -> None:
        # Per transactional id, the (producer id, epoch) of its last stored record.
        self.last: dict[str, tuple[int, int]] = {}
        self.retired_ids: set[int] = set()
        self.markers_seen: set[tuple[str, int, int, tuple[str, int]]] = set()

    def record(self, tid: str, producer_id: int, epoch: int) -> None:
        previous = self.last.get(tid)
        if previous is not None and previous[0] == producer_id:
            assert epoch >= previous[1], f"{tid}: epoch went back {previous} -> {epoch}"
        elif previous is not None:
            self.retired_ids.add(previous[0])
        assert producer_id not in self.retired_ids, f"{tid}: producer id {producer_id} reused"
        self.last[tid] = (producer_id, epoch)

    def marker(self, tid: str, producer_id: int, epoch: int, partition: tuple[str, int]) -> None:
        key = (tid, producer_id, epoch, partition)
        assert key not in self.markers_seen, f"marker requested twice: {key}"
        self.markers_seen.add(key)


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_keep_the_coordinators_invariants(seed: int) -> None:
    rng = random.Random(seed)
    broker = Broker(TransactionSettings(transaction_version=rng.choice([1, 2])))
    checker = Checker()
    # What each id's (honest) producer believes: (producer id, epoch, version).
    producers: dict[str, tuple[int, int, int]] = {}
    now_ms = NOW_MS
    seen_records = 0

    for _ in range(300):
        now_ms += rng.randint(0, 400)
        c = broker.coordinator
        tid = rng.choice(IDS)
        action = rng.random()
        if action < 0.15:
            result = broker.call(c.init_producer_id(tid, 2000, now_ms))
            if result.error == ErrorCode.NONE:
                producers[tid] = (result.producer_id, result.producer_epoch, rng.choice([1, 2]))
        elif tid not in producers:
            continue
        elif action < 0.45:
            producer_id, epoch, version = producers[tid]
            if rng.random() < 0.2:
                epoch -= rng.randint(1, 2)  # a zombie
            txn_before = c.metadata(tid)
            was_prepare = txn_before is not None and txn_before.state in PREPARE_STATES
            partitions_before = set(txn_before.partitions) if txn_before else set()
            added = rng.sample(PARTITIONS, rng.randint(1, 2))
            error = broker.call(c.add_partitions(tid, producer_id, epoch, added, now_ms, version))
            if was_prepare:
                assert error != ErrorCode.NONE
                txn_after = c.metadata(tid)
                assert txn_after is not None and txn_after.partitions <= partitions_before
        elif action < 0.65:
            producer_id, epoch, version = producers[tid]
            if rng.random() < 0.2:
                epoch -= 1  # a late end of an earlier transaction
            result = broker.call(
                c.end_txn(tid, producer_id, epoch, rng.random() < 0.5, now_ms, version)
            )
            if result.error == ErrorCode.NONE and version >= 2:
                producers[tid] = (result.producer_id, result.producer_epoch, version)
        elif action < 0.8:
            if rng.random() < 0.5:
                broker.write_markers(now_ms)
            elif broker.markers:
                marker = broker.markers.pop(0)  # partly written, the rest later
                part = set(rng.sample(sorted(marker.partitions), 1))
                broker.handle(
                    c.markers_written(
                        marker.transactional_id,
                        marker.producer_id,
                        marker.producer_epoch,
                        part,
                        now_ms,
                    )
                )
                rest = marker.partitions - part
                if rest:
                    broker.markers.append(dataclasses.replace(marker, partitions=rest))
        elif action < 0.95:
            broker.handle(c.advance(now_ms))
        else:
            broker.reload(now_ms)
            checker.markers_seen.clear()  # a new coordinator requests them again, once

        for record in broker.log[seen_records:]:
            if record.entry is not None:
                checker.record(
                    record.transactional_id, record.entry.producer_id, record.entry.producer_epoch
                )
                assert record.entry.state not in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)
                if record.entry.state == TxnState.EMPTY:
                    assert not record.entry.partitions
            else:
                checker.last.pop(record.transactional_id, None)
        seen_records = len(broker.log)
        for marker in broker.markers:
            txn = broker.coordinator.metadata(marker.transactional_id)
            assert txn is not None and txn.state in PREPARE_STATES
        for marker in _new_markers(broker, checker):
            for partition in marker[3]:
                checker.marker(marker[0], marker[1], marker[2], partition)


def _new_markers(
    broker: Broker, checker: Checker
) -> list[tuple[str, int, int, frozenset[tuple[str, int]]]]:
    """The markers requested that the checker has not seen yet (a marker re-queued
    by this test after a partial write is the same request, not a new one)."""
    new = []
    for marker in broker.markers:
        partitions = frozenset(
            p
            for p in marker.partitions
            if (marker.transactional_id, marker.producer_id, marker.producer_epoch, p)
            not in checker.markers_seen
        )
        if partitions == marker.partitions:
            new.append(
                (marker.transactional_id, marker.producer_id, marker.producer_epoch, partitions)
            )
    return new
