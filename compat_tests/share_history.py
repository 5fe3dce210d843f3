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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TERMINAL_TYPES = ("ACCEPT", "RELEASE", "REJECT")
DEFAULT_SLACK_MS = 1000


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
    # how it ended: ACCEPT / RELEASE / REJECT (effective), or "expired" / "closed"
    ended_by: str = ""


@dataclass
class HistoryReport:
    resolutions: dict[str, str]  # "P:O" -> accepted / rejected / delivery_limit / unresolved
    holdings: dict[str, list[Holding]]
    violations: list[str]

    @property
    def ok(self) -> bool:
        return not self.violations


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


def _close_holding(held: Holding, lock_ms: int, gone_ms: int | None) -> None:
    """Sets when and how `held` ended (see the module docstring)."""
    lock_until = held.start_ms + lock_ms
    for ack in sorted(held.acks, key=lambda a: a.t_ms):
        if ack.t_ms > lock_until:
            break  # late: the lock had expired; the broker ignores or refuses it
        if ack.type == "RENEW":
            if ack.error is None:
                lock_until = max(lock_until, ack.t_ms + lock_ms)
            continue
        if ack.error is None:
            held.end_ms, held.ended_by = ack.t_ms, ack.type
            return
    held.end_ms, held.ended_by = lock_until, "expired"
    if gone_ms is not None and held.start_ms <= gone_ms < lock_until:
        held.end_ms, held.ended_by = gone_ms, "closed"


def check_share_history(
    produced: Iterable[str | tuple[int, int]],
    events: Iterable[dict[str, Any]],
    *,
    delivery_limit: int,
    lock_ms: int,
    slack_ms: int = DEFAULT_SLACK_MS,
    require_resolved: bool = True,
    strict_counts: bool = True,
) -> HistoryReport:
    """Checks the history; `strict_counts=False` lets delivery counts skip (grow by more
    than one) for a client that may acquire records it never returns to the application
    (franz-go fetches in the background while the application does not poll)."""
    ordered = sorted(events, key=lambda e: int(e["t_ms"]))
    produced_keys = [k if isinstance(k, str) else record_key(*k) for k in produced]
    gone: dict[str, int] = {}
    for event in ordered:
        if event["event"] in ("closed", "killed"):
            gone.setdefault(str(event.get("consumer")), int(event["t_ms"]))
    holdings = _holdings(ordered)
    _attach_acks(holdings, _matched_acks(ordered))
    violations: list[str] = []
    resolutions: dict[str, str] = {}
    for key in sorted(set(produced_keys) | set(holdings), key=_sort_key):
        if key not in produced_keys:
            violations.append(f"{key}: delivered but never produced")
        held = holdings.get(key, [])
        for one in held:
            _close_holding(one, lock_ms, gone.get(one.consumer))
        resolutions[key] = _check_record(
            key, held, delivery_limit, slack_ms, violations, strict_counts=strict_counts
        )
        if require_resolved and key in produced_keys and resolutions[key] == "unresolved":
            violations.append(f"{key}: neither accepted nor archived")
    return HistoryReport(resolutions, holdings, violations)


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
