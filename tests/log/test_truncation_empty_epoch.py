"""A follower that led an epoch without writing in it (a leadership that lasted
less than a write) must drop that epoch when it follows again: Kafka's
`truncateTo` truncates the epoch cache even when no record goes (found by
compat_tests/txn_fault_run.py: the follower then refused every batch of the
leader's older epoch and never rejoined the ISR)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.log.test_partition_append_replicated import everything, open_at
from tests.log.test_partition_truncation import converge
from weir.log.flusher import GroupFlusher

MakeBatch = Callable[..., bytes]


def test_a_follower_drops_an_epoch_it_led_without_writing(
    tmp_path: Path, flusher: GroupFlusher, batch: MakeBatch, now_ms: int
) -> None:
    new = open_at(tmp_path / "new" / "t-0", flusher)
    new.append(batch(3), leader_epoch=8, now_ms=now_ms)
    old = open_at(tmp_path / "old" / "t-0", flusher)
    old.append_replicated(everything(new), now_ms=now_ms)
    # `old` leads epoch 10 for a moment and writes nothing; the leader it then
    # follows wrote offsets 3.. in epoch 9, which `old` never saw.
    old.begin_leader_epoch(10)
    new.append(batch(2), leader_epoch=9, now_ms=now_ms)
    new.begin_leader_epoch(11)
    converge(old, new)
    old.append_replicated(new.read(3, bytes_max=1 << 20, end_offset=5).records, now_ms=now_ms)
    assert everything(old) == everything(new)
    assert old.epoch_cache.entries == [(8, 0), (9, 3)]
