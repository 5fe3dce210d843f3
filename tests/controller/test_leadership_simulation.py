"""A seeded simulation of one partition's replicas driven only by the pure
decisions of weir/controller/partition_state.py (ISR changes, the controller's
elections, a cut-off leader's abdication), checking after every step that no
committed record is lost.

The model: each replica's log is a list of record ids (fsynced: a dead replica
keeps it). The leader appends; a follower fetches by first cutting its log where
it diverges from the leader's (OffsetForLeaderEpoch, idealised as the longest
common prefix), then copying some of what follows. The leader knows each
follower's end as of its last fetch and raises the high watermark to the least
end over the ISR while the ISR meets min.insync.replicas and the ELR is empty
(`Replication.advance_high_watermark`); everything below any leader's high
watermark is committed. The adversary decides everything else at random: which
follower lags out of the ISR, who dies and returns, when the controller runs,
when a leader abdicates (the caller's "no follower fetched" test is the
adversary's choice, so the decision must be safe whenever it is taken).

Invariant: the committed records are a prefix of the leader's log and of every
ISR and ELR member's log, and never change once committed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from weir.controller.partition_state import (
    NO_LEADER,
    PartitionState,
    abdicate,
    change_isr,
    elect_leader,
    initial_state,
)

REPLICAS = [1, 2, 3]
STEPS = 300


@dataclass
class Simulation:
    min_isr: int
    rng: random.Random
    state: PartitionState = field(default_factory=lambda: initial_state(REPLICAS))
    logs: dict[int, list[int]] = field(default_factory=lambda: {r: [] for r in REPLICAS})
    alive: set[int] = field(default_factory=lambda: set(REPLICAS))
    # The current leader's view: each follower's end at its last fetch, its HW,
    # where its term began.
    progress: dict[int, int] = field(default_factory=dict)
    high_watermark: int = 0
    epoch_start: int = 0
    committed: list[int] = field(default_factory=list)
    next_record: int = 0
    leader_changes: int = 0

    def step(self) -> None:
        action = self.rng.choice(
            ["append", "append", "fetch", "fetch", "fetch", "shrink", "expand", "kill",
             "revive", "controller", "abdicate"]
        )  # fmt: skip
        getattr(self, action)()
        self.advance_high_watermark()
        self.check()

    # -- the leader -------------------------------------------------------------

    def leading(self) -> int | None:
        leader = self.state.leader
        return leader if leader != NO_LEADER and leader in self.alive else None

    def append(self) -> None:
        leader = self.leading()
        if leader is not None:
            self.logs[leader].append(self.next_record)
            self.next_record += 1

    def advance_high_watermark(self) -> None:
        leader = self.leading()
        if leader is None or len(self.state.isr) < self.min_isr or self.state.elr:
            return
        ends = [len(self.logs[leader])] + [
            self.progress.get(r, 0) for r in self.state.isr if r != leader
        ]
        if min(ends) > self.high_watermark:
            self.high_watermark = min(ends)
            newly = self.logs[leader][: self.high_watermark]
            assert newly[: len(self.committed)] == self.committed, "a committed record changed"
            self.committed = newly

    def shrink(self) -> None:
        leader = self.leading()
        followers = [r for r in self.state.isr if r != leader]
        if leader is not None and followers:
            out = self.rng.choice(followers)
            isr = [r for r in self.state.isr if r != out]
            self.state = change_isr(self.state, isr, min_isr=self.min_isr, replicas=REPLICAS)

    def expand(self) -> None:
        leader = self.leading()
        if leader is None:
            return
        for r in REPLICAS:
            end = self.progress.get(r, -1)
            caught_up = end >= self.high_watermark and end >= self.epoch_start
            if r not in self.state.isr and r in self.alive and caught_up:
                isr = [*self.state.isr, r]
                self.state = change_isr(self.state, isr, min_isr=self.min_isr, replicas=REPLICAS)
                return

    def abdicate(self) -> None:
        if self.leading() is not None:
            self.change_leader(
                abdicate(self.state, REPLICAS, frozenset(self.alive), min_isr=self.min_isr)
            )

    # -- followers, failures, the controller -------------------------------------

    def fetch(self) -> None:
        leader = self.leading()
        followers = [r for r in REPLICAS if r != leader and r in self.alive]
        if leader is None or not followers:
            return
        follower = self.rng.choice(followers)
        mine, theirs = self.logs[follower], self.logs[leader]
        common = 0
        while common < min(len(mine), len(theirs)) and mine[common] == theirs[common]:
            common += 1
        del mine[common:]
        mine.extend(theirs[common : common + self.rng.randint(0, 3)])
        self.progress[follower] = len(mine)

    def kill(self) -> None:
        if len(self.alive) > 1:
            self.alive.discard(self.rng.choice(sorted(self.alive)))

    def revive(self) -> None:
        self.alive.add(self.rng.choice(REPLICAS))

    def controller(self) -> None:
        self.change_leader(
            elect_leader(self.state, REPLICAS, frozenset(self.alive), min_isr=self.min_isr)
        )

    def change_leader(self, new_state: PartitionState | None) -> None:
        if new_state is None:
            return
        if new_state.leader != self.state.leader and new_state.leader != NO_LEADER:
            self.leader_changes += 1
            self.progress = {}
            self.epoch_start = len(self.logs[new_state.leader])
            # A new leader knows at most the committed offset (followers learn it late).
            self.high_watermark = min(self.high_watermark, self.epoch_start)
        self.state = new_state

    def check(self) -> None:
        state = self.state
        holders = set(state.isr) | set(state.elr)
        if state.leader != NO_LEADER:
            holders.add(state.leader)
        for r in holders:
            held = self.logs[r][: len(self.committed)]
            assert held == self.committed, (r, state, self.committed, self.logs)
        assert not set(state.isr) & set(state.elr)
        if state.leader != NO_LEADER:
            assert state.leader in state.isr


@pytest.mark.parametrize("min_isr", [1, 2, 3])
@pytest.mark.parametrize("seed", range(40))
def test_no_committed_record_is_lost_whatever_the_elections_and_abdications(
    seed: int, min_isr: int
) -> None:
    simulation = Simulation(min_isr=min_isr, rng=random.Random(seed * 10 + min_isr))
    for _ in range(STEPS):
        simulation.step()
    assert simulation.next_record > 0
