"""A history checker for share groups (queues): what consumers saw against what was produced.

Input: the produced records (``"P:O"`` keys, or `(partition, offset)` pairs) and the
events the share-consumer drivers print (compat_tests/share_clients/driver_spec.py),
from any number of consumers, plus ``killed`` events (``{"event": "killed", "consumer",
"t_ms"}``) a scenario adds when it SIGKILLs a driver. Timestamps are wall-clock
milliseconds of one machine.

A *holding* is one consumer's acquisition of a record: its ``delivered`` event (the same
consumer seeing the record again with the same delivery count, as kafka-clients returns
a renewed record, is the same holding). A holding lasts from its delivery until its
first terminal acknowledgement (ACCEPT, RELEASE, REJECT) made within the lock, or until
its lock expires (delivery + `lock_ms`, pushed forward by each RENEW the broker took),
or until its consumer closed or was killed, whichever is first. An acknowledgement is
*effective* when the broker answered it without error (``ack_result`` error null) and
it was made within the lock; a late one is not (Kafka 4.4 answers a late ACCEPT of a
record that another consumer has accepted since with no error: it is ignored, below
the share-partition start offset).

The checks (each failure is a line in `HistoryReport.violations`):

- every produced record ends accepted exactly once, or archived: rejected (an effective
  REJECT) or at the delivery limit (its `delivery_limit`-th holding ended without an
  effective ACCEPT or REJECT); a record that ends neither is unresolved;
- no record is delivered after it was accepted or archived; no record accepted twice;
- the delivery counts of a record's holdings are 1, 2, 3, ... in time order (one more
  per redelivery) and never exceed `delivery_limit`;
- no two holdings of a record overlap: a redelivery starts after the previous holding
  ended (within `slack_ms`: a client stamps a delivery when poll() returns it, after
  the broker acquired it, and kafka-clients may prefetch);
- nothing is delivered that was not produced.

Under faults (compat_tests/queue_fault_run.py) the checker takes more input:

- ``{"event": "failover", "partition": P, "t_ms"}`` events: the run SIGKILLed or
  SIGSTOPped the broker leading P, or moved P's leadership, at (at the latest) `t_ms`.
  A new leader loads the share state with every acquired record AVAILABLE again
  (ARCHITECTURE.md, share state steps 17-19; `SharePartition` rule 9), so a failover
  ends every holding of P's records that started before it and was still open; an
  acknowledgement made after it is not effective (the old leader can no longer store
  it; the new one refuses it, or applies it to a later acquisition by the same
  member).
- A holding whose first answered acknowledgement was refused with
  NOT_LEADER_OR_FOLLOWER (librdkafka: NOT_LEADER_FOR_PARTITION) or
  FENCED_LEADER_EPOCH came from a leader that was deposed and did not know it yet (a
  paused broker answering the fetches it had when it resumes, before it learns of
  its successor): the new leader never gave it a lock, so it ends where it started.
- `dead_letters` (`DeadLetterSeen`, read from the group's dead-letter topic): each
  produced record must be accepted exactly once XOR dead-lettered exactly once; a
  dead letter's reason must agree with the history (REJECTED: some holding
  acknowledged REJECT, or the record had a TTL and had been delivered: after a load
  the broker labels an expired record that was delivered before REJECTED;
  DELIVERY_LIMIT: its count is the limit and no holding's count exceeds it; EXPIRED:
  the record had a TTL and was never delivered at or after its expiry), and its
  delivery count must be at least every count a consumer saw for the record. A record
  the history archived (an effective REJECT, or the limit reached) must have one.
- `records` (`ProducedRecord`: timestamp, `weir.delay.ms`, `weir.ttl.ms`): a delayed
  record is never delivered before its timestamp plus its delay (`delay_slack_ms`:
  producer, broker and consumers share one clock), a record with a TTL never
  acquired after its expiry: not delivered later than its expiry plus `lock_ms` plus
  `slack_ms` (a share fetch is answered once its state is stored, which a moving
  share coordinator can hold for seconds; records whose lock expired meanwhile are
  left out of the answer, so an acquisition precedes its delivery by under a lock).
- `drain_empty`: a fresh consumer of the group got nothing for longer than a lock at
  the end. Then a record with an ACCEPT that was not effective (answered with an
  error, unanswered, late or after a failover: the broker may have applied it, e.g. a
  commit that failed across a failover after its state was stored), no effective
  resolution and no dead letter is *accepted (unconfirmed)*, reported apart; without
  `drain_empty` it is unresolved.
- Delivery counts under faults may skip (records acquired in a response the client
  never saw): the run uses `strict_counts=False`, which still requires that counts
  only grow and stay within the limit.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

TERMINAL_TYPES = ("ACCEPT", "RELEASE", "REJECT")
DEPOSED_ERRORS = ("NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION", "FENCED_LEADER_EPOCH")
DEFAULT_SLACK_MS = 1000
DEFAULT_DELAY_SLACK_MS = 50
# Dead-letter reasons, as `weir.sharecoord.share_partition.ArchiveReason` names them.
REJECTED, DELIVERY_LIMIT, EXPIRED = "REJECTED", "DELIVERY_LIMIT", "EXPIRED"
REASON_RESOLUTIONS = {REJECTED: "rejected", DELIVERY_LIMIT: "delivery_limit", EXPIRED: "expired"}
ACCEPTED_UNCONFIRMED = "accepted_unconfirmed"


@dataclass(frozen=True)
class ProducedRecord:
    """What the producer was told of a record: its timestamp (from the delivery
    report) and the `weir.delay.ms` / `weir.ttl.ms` headers it was given."""

    timestamp_ms: int
    delay_ms: int | None = None
    ttl_ms: int | None = None

    @property
    def visible_ms(self) -> int | None:
        return None if self.delay_ms is None else self.timestamp_ms + self.delay_ms

    @property
    def expires_ms(self) -> int | None:
        return None if self.ttl_ms is None else self.timestamp_ms + self.ttl_ms


@dataclass(frozen=True)
class DeadLetterSeen:
    """One dead letter of the group for record `key` ("P:O"), as read back."""

    key: str
    delivery_count: int | None
    reason: str | None  # REJECTED / DELIVERY_LIMIT / EXPIRED; None: not recognised


@dataclass
class Ack:
    consumer: str
    type: str
    t_ms: int
    error: str | None = "NO_RESULT"  # the broker's answer; None: no error


@dataclass
class Holding:
    consumer: str
    key: str
    delivery_count: int
    start_ms: int
    acks: list[Ack] = field(default_factory=list)
    end_ms: int = 0
    # how it ended: ACCEPT / RELEASE / REJECT (effective), or "expired" / "closed" /
    # "failover"
    ended_by: str = ""

    def ineffective_accept(self) -> bool:
        """An ACCEPT was made that did not end the holding (see the module docstring)."""
        return self.ended_by != "ACCEPT" and any(a.type == "ACCEPT" for a in self.acks)


@dataclass
class HistoryReport:
    # "P:O" -> accepted / rejected / delivery_limit / unresolved; with dead letters also
    # expired and accepted_unconfirmed
    resolutions: dict[str, str]
    holdings: dict[str, list[Holding]]
    violations: list[str]
    dead_letters: dict[str, list[DeadLetterSeen]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def counts(self) -> dict[str, int]:
        return dict(Counter(self.resolutions.values()))


def record_key(partition: int, offset: int) -> str:
    return f"{partition}:{offset}"


def _matched_acks(events: list[dict[str, Any]]) -> list[tuple[str, str, Ack]]:
    """(consumer, key, ack) per acknowledge event, with the broker's answer from the
    consumer's next ack_result naming that offset."""
    pending: dict[tuple[str, str], list[Ack]] = {}
    acks: list[tuple[str, str, Ack]] = []
    for event in events:
        consumer = str(event.get("consumer"))
        if event["event"] == "acknowledge":
            key = record_key(event["partition"], event["offset"])
            ack = Ack(consumer, event["type"], int(event["t_ms"]))
            acks.append((consumer, key, ack))
            pending.setdefault((consumer, key), []).append(ack)
        elif event["event"] == "ack_result":
            for offset in event.get("offsets") or []:
                waiting = pending.get((consumer, record_key(event["partition"], offset)))
                if waiting:
                    waiting.pop(0).error = event.get("error")
    return acks


def _holdings(events: list[dict[str, Any]]) -> dict[str, list[Holding]]:
    holdings: dict[str, list[Holding]] = {}
    current: dict[tuple[str, str], Holding] = {}
    for event in events:
        if event["event"] != "delivered":
            continue
        consumer = str(event.get("consumer"))
        key = record_key(event["partition"], event["offset"])
        count = int(event["delivery_count"])
        held = current.get((consumer, key))
        if held is not None and held.delivery_count == count:
            continue  # the same acquisition returned again (a renewed record)
        held = Holding(consumer, key, count, int(event["t_ms"]))
        current[(consumer, key)] = held
        holdings.setdefault(key, []).append(held)
    return holdings


def _attach_acks(holdings: dict[str, list[Holding]], acks: list[tuple[str, str, Ack]]) -> None:
    """Each ack goes to its consumer's latest holding of the record that started before it."""
    for consumer, key, ack in acks:
        mine = [
            h for h in holdings.get(key, []) if h.consumer == consumer and h.start_ms <= ack.t_ms
        ]
        if mine:
            mine[-1].acks.append(ack)


def _close_holding(
    held: Holding, lock_ms: int, gone_ms: int | None, failover_ms: int | None = None
) -> None:
    """Sets when and how `held` ended (see the module docstring). `failover_ms`: the
    first failover of its partition after it started."""
    lock_until = held.start_ms + lock_ms
    acks = sorted(held.acks, key=lambda a: a.t_ms)
    answered = [a for a in acks if a.error != "NO_RESULT"]
    if answered and answered[0].error in DEPOSED_ERRORS:
        held.end_ms, held.ended_by = held.start_ms, "deposed"
        return
    for ack in acks:
        if ack.t_ms > lock_until:
            break  # late: the lock had expired; the broker ignores or refuses it
        if failover_ms is not None and ack.t_ms > failover_ms:
            break  # the leader that gave the lock is gone
        if ack.type == "RENEW":
            if ack.error is None:
                lock_until = max(lock_until, ack.t_ms + lock_ms)
            continue
        if ack.error is None:
            held.end_ms, held.ended_by = ack.t_ms, ack.type
            return
    held.end_ms, held.ended_by = lock_until, "expired"
    if gone_ms is not None and held.start_ms <= gone_ms < held.end_ms:
        held.end_ms, held.ended_by = gone_ms, "closed"
    if failover_ms is not None and failover_ms < held.end_ms:
        held.end_ms, held.ended_by = failover_ms, "failover"


def _first_failover(failovers: list[int], start_ms: int) -> int | None:
    """The first failover time at or after `start_ms` (`failovers` sorted)."""
    index = bisect.bisect_left(failovers, start_ms)
    return failovers[index] if index < len(failovers) else None


def check_share_history(
    produced: Iterable[str | tuple[int, int]],
    events: Iterable[dict[str, Any]],
    *,
    delivery_limit: int,
    lock_ms: int,
    slack_ms: int = DEFAULT_SLACK_MS,
    require_resolved: bool = True,
    strict_counts: bool = True,
    dead_letters: Iterable[DeadLetterSeen] | None = None,
    records: Mapping[str, ProducedRecord] | None = None,
    drain_empty: bool = False,
    delay_slack_ms: int = DEFAULT_DELAY_SLACK_MS,
) -> HistoryReport:
    """Checks the history; `strict_counts=False` lets delivery counts skip (grow by more
    than one) for a client that may acquire records it never returns to the application
    (franz-go fetches in the background while the application does not poll).
    `dead_letters` (None: the group has no dead-letter topic), `records` and
    `drain_empty`: see the module docstring."""
    ordered = sorted(events, key=lambda e: int(e["t_ms"]))
    produced_keys = {k if isinstance(k, str) else record_key(*k) for k in produced}
    gone: dict[str, int] = {}
    failovers: dict[int, list[int]] = {}
    for event in ordered:
        if event["event"] in ("closed", "killed"):
            gone.setdefault(str(event.get("consumer")), int(event["t_ms"]))
        elif event["event"] == "failover":
            failovers.setdefault(int(event["partition"]), []).append(int(event["t_ms"]))
    holdings = _holdings(ordered)
    _attach_acks(holdings, _matched_acks(ordered))
    letters: dict[str, list[DeadLetterSeen]] = {}
    for letter in dead_letters or ():
        letters.setdefault(letter.key, []).append(letter)
    violations: list[str] = []
    resolutions: dict[str, str] = {}
    for key in sorted(produced_keys | set(holdings) | set(letters), key=_sort_key):
        if key not in produced_keys:
            what = "delivered" if key in holdings else "dead-lettered"
            violations.append(f"{key}: {what} but never produced")
        held = holdings.get(key, [])
        partition_failovers = failovers.get(_sort_key(key)[0], [])
        for one in held:
            failover_ms = _first_failover(partition_failovers, one.start_ms)
            _close_holding(one, lock_ms, gone.get(one.consumer), failover_ms)
        resolution = _check_record(
            key, held, delivery_limit, slack_ms, violations, strict_counts=strict_counts
        )
        record = (records or {}).get(key)
        if record is not None:
            _check_times(key, record, held, lock_ms + slack_ms, delay_slack_ms, violations)
        if dead_letters is not None:
            resolution = _check_dead_letters(
                key, resolution, held, letters.get(key, []), record, delivery_limit,
                lock_ms + slack_ms, violations,
            )  # fmt: skip
        if resolution == "unresolved" and drain_empty and any(h.ineffective_accept() for h in held):
            resolution = ACCEPTED_UNCONFIRMED
        resolutions[key] = resolution
        if require_resolved and key in produced_keys and resolution == "unresolved":
            violations.append(f"{key}: neither accepted nor archived")
    return HistoryReport(resolutions, holdings, violations, letters)


def _check_times(
    key: str,
    record: ProducedRecord,
    held: list[Holding],
    slack_ms: int,
    delay_slack_ms: int,
    violations: list[str],
) -> None:
    """A delayed record not delivered early; an expiring one not delivered late
    (`slack_ms`: how long after its acquisition a delivery may be seen)."""
    visible_ms, expires_ms = record.visible_ms, record.expires_ms
    for one in held:
        where = f"{key}: delivery {one.delivery_count} to {one.consumer} at {one.start_ms}"
        if visible_ms is not None and one.start_ms + delay_slack_ms < visible_ms:
            violations.append(f"{where}: before its delay ended (at {visible_ms})")
        if expires_ms is not None and one.start_ms > expires_ms + slack_ms:
            violations.append(f"{where}: after it expired (at {expires_ms})")


def _check_dead_letters(
    key: str,
    resolution: str,
    held: list[Holding],
    letters: list[DeadLetterSeen],
    record: ProducedRecord | None,
    delivery_limit: int,
    slack_ms: int,
    violations: list[str],
) -> str:
    """The record's resolution given its dead letters (see the module docstring)."""
    if not letters:
        if resolution in ("rejected", "delivery_limit"):
            if any(h.ineffective_accept() for h in held):
                return "unresolved"  # perhaps accepted after all: the drain decides
            violations.append(f"{key}: {resolution} but no dead letter")
        return resolution
    if len(letters) > 1:
        violations.append(f"{key}: dead-lettered {len(letters)} times")
    letter = letters[0]
    where = f"{key}: dead letter {letter.reason} count {letter.delivery_count}"
    if resolution == "accepted":
        violations.append(f"{where}: the record was accepted")
    seen = max((h.delivery_count for h in held), default=0)
    if letter.delivery_count is None or letter.delivery_count < seen:
        violations.append(f"{where}: a consumer saw delivery count {seen}")
    reason_ok = {
        REJECTED: _rejected_ok(held, record),
        DELIVERY_LIMIT: letter.delivery_count == delivery_limit and seen <= delivery_limit,
        EXPIRED: _expired_ok(held, record, slack_ms),
    }.get(letter.reason or "", False)
    if not reason_ok:
        violations.append(f"{where}: the history does not agree with the reason")
    return REASON_RESOLUTIONS.get(letter.reason or "", "unresolved")


def _rejected_ok(held: list[Holding], record: ProducedRecord | None) -> bool:
    """Some holding acknowledged REJECT; or the record could have expired after a
    delivery (a load labels such a record REJECTED: `SharePartition` rule 10)."""
    if any(a.type == "REJECT" for h in held for a in h.acks):
        return True
    return record is not None and record.expires_ms is not None and bool(held)


def _expired_ok(held: list[Holding], record: ProducedRecord | None, slack_ms: int) -> bool:
    """The record had a TTL and was never acquired at or after its expiry (a delivery
    is seen up to `slack_ms` after its acquisition)."""
    expires_ms = None if record is None else record.expires_ms
    if expires_ms is None:
        return False
    return all(h.start_ms < expires_ms + slack_ms for h in held)


def _check_record(
    key: str,
    held: list[Holding],
    delivery_limit: int,
    slack_ms: int,
    violations: list[str],
    *,
    strict_counts: bool,
) -> str:
    resolution = "unresolved"
    previous: Holding | None = None
    for expected, one in enumerate(held, start=1):
        where = f"{key}: delivery {one.delivery_count} to {one.consumer} at {one.start_ms}"
        if resolution != "unresolved":
            violations.append(f"{where}: delivered after it was {resolution}")
        if strict_counts and one.delivery_count != expected:
            violations.append(f"{where}: delivery count {one.delivery_count}, expected {expected}")
        elif previous is not None and one.delivery_count <= previous.delivery_count:
            violations.append(
                f"{where}: delivery count {one.delivery_count} after {previous.delivery_count}"
            )
        if one.delivery_count > delivery_limit:
            violations.append(f"{where}: over the delivery limit {delivery_limit}")
        if previous is not None and one.start_ms + slack_ms < previous.end_ms:
            violations.append(
                f"{where}: while {previous.consumer} still held it (until {previous.end_ms})"
            )
        if one.ended_by == "ACCEPT":
            if resolution == "accepted":
                violations.append(f"{where}: accepted twice")
            resolution = "accepted"
        elif one.ended_by == "REJECT":
            resolution = "rejected" if resolution == "unresolved" else resolution
        elif one.delivery_count >= delivery_limit and resolution == "unresolved":
            resolution = "delivery_limit"
        previous = one
    return resolution


def _sort_key(key: str) -> tuple[int, int]:
    partition, offset = key.split(":")
    return int(partition), int(offset)
