"""FIFO queues' send-side rules: MessageGroupId (the record's key: the share group's
per-key ordering keeps a group's messages in order, one receive at a time) and
deduplication within SQS's 5 minutes.

Deduplication: each (queue, deduplication id) answered in the last 5 minutes answers
the same again, without sending. The memory is kept up with the queue's log before
each send (fifo_log.py), so it holds across brokers and restarts.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir.broker.http.sqs.errors import SqsError, invalid_parameter, missing_parameter

DEDUPLICATION_WINDOW_MS = 5 * 60 * 1000
DEDUPLICATIONS_MAX = 100_000
# MessageGroupId and MessageDeduplicationId: 1 to 128 alphanumerics and punctuation.
_ID = re.compile(r"[!-~]{1,128}")
GROUP_ID_HEADER = "sqs.group.id"
DEDUPLICATION_ID_HEADER = "sqs.dedup.id"
SEQUENCE_DIGITS = 20


@dataclass(frozen=True)
class FifoIds:
    group_id: str
    deduplication_id: str


def _checked_id(entry: Mapping[str, Any], name: str) -> str | None:
    value = entry.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise invalid_parameter(
            f"Value {str(value)[:140]} for parameter {name} is invalid. "
            "Reason: it must be 1 to 128 alphanumeric or punctuation "
            "characters."
        )
    return value


def fifo_ids(
    entry: Mapping[str, Any], body: str, *, fifo: bool, content_based: bool
) -> FifoIds | None:
    """A message's group and deduplication ids (None on a standard queue, which takes
    neither a deduplication id nor a per-message delay... as SQS)."""
    group_id = _checked_id(entry, "MessageGroupId")
    deduplication_id = _checked_id(entry, "MessageDeduplicationId")
    if not fifo:
        if deduplication_id is not None:
            raise _not_for_this_queue("MessageDeduplicationId")
        return None
    if group_id is None:
        raise missing_parameter("MessageGroupId")
    if entry.get("DelaySeconds") is not None:
        raise _not_for_this_queue("DelaySeconds")
    if deduplication_id is None:
        if not content_based:
            raise invalid_parameter(
                "The queue should either have ContentBasedDeduplication "
                "enabled or MessageDeduplicationId provided explicitly"
            )
        deduplication_id = hashlib.sha256(body.encode()).hexdigest()
    return FifoIds(group_id, deduplication_id)


def _not_for_this_queue(name: str) -> SqsError:
    return invalid_parameter(
        f"Value for parameter {name} is invalid. Reason: The request "
        "include parameter that is not valid for this queue type."
    )


def sequence_number(offset: int) -> str:
    return f"{offset:0{SEQUENCE_DIGITS}d}"


class Deduplications:
    """The answers of the FIFO sends of the last 5 minutes, by (queue, scope, id)."""

    def __init__(self) -> None:
        self._answers: OrderedDict[tuple[str, str, str], tuple[int, dict[str, Any]]] = OrderedDict()

    @staticmethod
    def key(queue: str, ids: FifoIds, per_group: bool) -> tuple[str, str, str]:
        return (queue, ids.group_id if per_group else "", ids.deduplication_id)

    def answered(self, key: tuple[str, str, str], now_ms: int) -> dict[str, Any] | None:
        self._expire(now_ms)
        found = self._answers.get(key)
        return None if found is None else found[1]

    def remember(self, key: tuple[str, str, str], answer: dict[str, Any], now_ms: int) -> None:
        self._answers[key] = (now_ms + DEDUPLICATION_WINDOW_MS, answer)
        self._answers.move_to_end(key)
        while len(self._answers) > DEDUPLICATIONS_MAX:
            self._answers.popitem(last=False)

    def _expire(self, now_ms: int) -> None:
        while self._answers:
            key, (expires_ms, _) = next(iter(self._answers.items()))
            if expires_ms > now_ms:
                return
            del self._answers[key]
