"""Answers that come later: the coordinator's non-blocking replacement for a wait.

Kafka answers some requests only when something else happens: a JoinGroup when the
rebalance completes, a follower's SyncGroup when the leader sends the assignment. The
coordinator never blocks; such a call returns a `Reply` whose `pending` handle is filled
in by a later call (another member's JoinGroup/SyncGroup/LeaveGroup) or by
`advance(now_ms)` (timeouts).

Every mutating call returns its `Reply` (or, for `advance` and loading, an `Effects`)
carrying (a coordinator collects them in its `Outbox` until the call returns):

- `records`: `(key, value)` pairs to append to the group's `__consumer_offsets`
  partition;
- `completed`: every `Pending` that became done during the call, the caller's own
  included when it was answered at once.

The broker's protocol, for every call:

1. append `records` and wait until they are durable;
2. wake the waiter of each handle in `completed` (e.g. `trio.Event.set()`);
3. answer its own request with `reply.pending.result` once `reply.pending.done`.

Step 2 after step 1 is what makes "answer only once durable" hold for answers produced
by someone else's call too. The coordinator guarantees every handle it hands out is
eventually completed (removal of a member completes its waits with an error), so a
waiting connection never hangs on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from weir.groupcoord.record_schemas import GroupRecord

T = TypeVar("T")


class Pending(Generic[T]):
    """A result that may not be known yet. Identity-hashable, so usable as a dict key."""

    __slots__ = ("_result",)

    def __init__(self) -> None:
        self._result: T | None = None

    @property
    def done(self) -> bool:
        return self._result is not None

    @property
    def result(self) -> T:
        if self._result is None:
            raise RuntimeError("pending result read before it was completed")
        return self._result

    def complete(self, result: T) -> bool:
        """Fill in the result; False (and no change) if it was already done."""
        if self._result is not None:
            return False
        self._result = result
        return True

    def __repr__(self) -> str:
        return f"Pending({self._result!r})"


@dataclass
class Effects:
    """What a call did besides answering its own request (see the module docstring)."""

    records: list[GroupRecord] = field(default_factory=list)
    completed: list[Pending[Any]] = field(default_factory=list)


@dataclass
class Reply(Generic[T]):
    """A call's own answer (possibly not done yet) and its effects."""

    pending: Pending[T]
    records: list[GroupRecord] = field(default_factory=list)
    completed: list[Pending[Any]] = field(default_factory=list)


class Outbox:
    """A coordinator's effects of the call under way: records to append and handles
    completed, handed out (and emptied) with the call's `Reply` or `Effects`."""

    def __init__(self) -> None:
        self.records: list[GroupRecord] = []
        self.completed: list[Pending[Any]] = []

    def complete(self, pending: Pending[T] | None, result: T) -> None:
        if pending is not None and pending.complete(result):
            self.completed.append(pending)

    def reply(self, pending: Pending[T]) -> Reply[T]:
        reply = Reply(pending, self.records, self.completed)
        self.records, self.completed = [], []
        return reply

    def answer(self, result: T) -> Reply[T]:
        """A reply answered at once."""
        pending: Pending[T] = Pending()
        self.complete(pending, result)
        return self.reply(pending)

    def effects(self) -> Effects:
        effects = Effects(self.records, self.completed)
        self.records, self.completed = [], []
        return effects
