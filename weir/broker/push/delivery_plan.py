"""Which held records a partition's push loop delivers next (pure).

The loop holds the records it acquired and has not finished with, in offset order.
A batch is up to `batch_size` of them that are due (not waiting out a retry backoff).
With `ordered` (the subscription's ordered_by_key), no record of a key is delivered
while another delivery of that key is in flight or an earlier record of that key is
waiting: a batch may carry several records of one key, in offset order, but a key is
in at most one delivery at a time. Records without a key are not ordered.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from weir.broker.push.payload import PushRecord


@dataclass(eq=False)
class Held:
    """A record acquired by the loop and not yet acknowledged."""

    record: PushRecord
    # Failed deliveries retried locally (ordered subscriptions keep the record
    # acquired between attempts, so that a later record of its key cannot pass it).
    local_failures: int = 0
    not_before_ms: int = 0

    @property
    def delivery_count(self) -> int:
        return self.record.delivery_count + self.local_failures


def next_batch(
    held: Sequence[Held],
    busy_keys: AbstractSet[bytes | None],
    *,
    batch_size: int,
    ordered: bool,
    now_ms: int,
) -> list[Held]:
    """The next delivery's records, in offset order (`held` is in offset order)."""
    blocked = set(busy_keys) if ordered else set()
    batch: list[Held] = []
    for item in held:
        key = item.record.key
        keyed = ordered and key is not None
        if keyed and key in blocked:
            continue
        if item.not_before_ms > now_ms:
            if keyed:
                blocked.add(key)
            continue
        batch.append(item)
        if len(batch) >= batch_size:
            break
    return batch


def next_due_ms(held: Sequence[Held], now_ms: int) -> int | None:
    """The earliest time a waiting record becomes due (None: none waits)."""
    return min((h.not_before_ms for h in held if h.not_before_ms > now_ms), default=None)


def batch_keys(batch: Sequence[Held]) -> set[bytes | None]:
    return {h.record.key for h in batch if h.record.key is not None}
