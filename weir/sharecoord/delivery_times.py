"""When a record may be delivered to a share group: its delay and expiry, read from
the log batches a share fetch read (Weir's own, beyond Kafka; docs/queues.md, "Delays
and expiry").

The record headers, each an ASCII decimal number of ms (the last one of a name counts;
another value, a negative one or a record without a timestamp is ignored):

- `weir.deliver.at.ms`: not delivered before this time (epoch ms);
- `weir.delay.ms`: not delivered before the record's timestamp plus this (ignored when
  `weir.deliver.at.ms` is there too);
- `weir.ttl.ms`: archived (reason EXPIRED) instead of delivered once the record's
  timestamp plus this has passed.

A visible time is capped at the record's timestamp plus the broker's
`share_delivery_delay_max_ms`: derived from the record alone, the same after any
restart. A group's `weir.share.record.ttl.ms` (or the topic's config of that name,
the shorter of the two) expires every record at its timestamp plus that; with a
`weir.ttl.ms` header too, the earlier expiry wins (as RabbitMQ's per-queue and
per-message TTLs).

The cost is decoding records, which the share fetch path otherwise never does
(`weir.format.record_batch`: the hot path reads batch headers only). So a batch is
decoded only when it can matter (`delivery_times`):

- headers are read only for a group with `weir.share.record.headers.enable`, and
  then only in batches whose bytes contain `weir.` (a C-speed scan of an
  uncompressed batch; a compressed one is inflated and decoded);
- a group TTL alone is decided per batch from the batch header's timestamps: all
  expired when its max timestamp is past the TTL, none when its first timestamp is
  not (a record timestamped before its batch's first one is taken to be as old as
  that first one), and decoded only when the TTL boundary falls inside the batch.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace

from weir.format.record_batch import (
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    Headers,
    InvalidBatch,
    decode_records,
    iter_batch_headers,
)
from weir.sharecoord.share_partition import LogBatch, RecordTimes

__all__ = [
    "DELAY_HEADER",
    "DELIVER_AT_HEADER",
    "TTL_HEADER",
    "DeliveryPolicy",
    "delivery_times",
    "record_times",
]

log = logging.getLogger(__name__)

DELIVER_AT_HEADER = "weir.deliver.at.ms"
DELAY_HEADER = "weir.delay.ms"
TTL_HEADER = "weir.ttl.ms"
_HEADER_NAMES = frozenset({DELIVER_AT_HEADER, DELAY_HEADER, TTL_HEADER})
# Every header above starts with this; a batch without these bytes has none of them.
_MARKER = re.compile(re.escape(b"weir."))
# A header value: at most 18 ASCII digits (below 2**63).
_DECIMAL = re.compile(rb"[0-9]{1,18}")


@dataclass(frozen=True)
class DeliveryPolicy:
    """What a share group asks of delays and expiry (its `weir.share.*` configs)."""

    headers: bool = False  # weir.share.record.headers.enable
    record_ttl_ms: int = 0  # weir.share.record.ttl.ms; 0: none
    delay_max_ms: int = 0  # the broker's share_delivery_delay_max_ms

    def with_topic_ttl(self, topic_ttl_ms: int) -> DeliveryPolicy:
        """The policy for a topic whose `weir.share.record.ttl.ms` is `topic_ttl_ms`
        (0: none): the shorter of the group's and the topic's TTL."""
        if topic_ttl_ms <= 0 or 0 < self.record_ttl_ms <= topic_ttl_ms:
            return self
        return replace(self, record_ttl_ms=topic_ttl_ms)

    @property
    def active(self) -> bool:
        """Whether records can have times at all (else the read is not looked at)."""
        return self.headers or self.record_ttl_ms > 0


def delivery_times(
    records: bytes | bytearray | memoryview,
    policy: DeliveryPolicy,
    now_ms: int,
    *,
    uncompressed_bytes_max: int,
) -> tuple[list[LogBatch], dict[int, RecordTimes]]:
    """The data batches of `records` (control batches left out) and the times of the
    records that have one, decoding only the batches where it can matter (see the
    module's docstring). A batch that fails to decode has no times (its records are
    delivered as Kafka would), as does one that inflates past `uncompressed_bytes_max`.
    Raises InvalidBatch for a malformed batch header."""
    bytes_max = uncompressed_bytes_max
    view = memoryview(records)
    batches: list[LogBatch] = []
    times: dict[int, RecordTimes] = {}
    for position, header in iter_batch_headers(view):
        if header.is_control:
            continue
        batch = LogBatch(header.base_offset, header.last_offset)
        if policy.headers and _may_carry_headers(view, position, header):
            _decode_into(view[position : position + header.size], policy, times, bytes_max)
        elif policy.record_ttl_ms > 0:
            batch = _batch_by_timestamps(view, position, header, policy, now_ms, times, bytes_max)
        batches.append(batch)
    return batches, times


def record_times(timestamp_ms: int, headers: Headers, policy: DeliveryPolicy) -> RecordTimes | None:
    """One record's times (None: none), from its timestamp and headers."""
    if timestamp_ms < 0:
        return None
    deliver_at_ms = delay_ms = ttl_ms = None
    if policy.headers:
        for name, value in headers:
            if name in _HEADER_NAMES and value is not None and _DECIMAL.fullmatch(value):
                number = int(value)
                if name == DELIVER_AT_HEADER:
                    deliver_at_ms = number
                elif name == DELAY_HEADER:
                    delay_ms = number
                else:
                    ttl_ms = number
    visible_ms = 0
    if deliver_at_ms is not None:
        visible_ms = deliver_at_ms
    elif delay_ms is not None:
        visible_ms = timestamp_ms + delay_ms
    visible_ms = min(visible_ms, timestamp_ms + policy.delay_max_ms)
    if visible_ms <= timestamp_ms:
        visible_ms = 0
    expiries = [timestamp_ms + ttl for ttl in (ttl_ms, policy.record_ttl_ms or None) if ttl]
    expires_ms = min(expiries) if expiries else None
    if not visible_ms and expires_ms is None:
        return None
    return RecordTimes(visible_ms, expires_ms)


def _may_carry_headers(view: memoryview, position: int, header: BatchHeader) -> bool:
    if header.compression:
        return True  # only inflating it tells
    return _MARKER.search(view, position, position + header.size) is not None


def _batch_by_timestamps(
    view: memoryview,
    position: int,
    header: BatchHeader,
    policy: DeliveryPolicy,
    now_ms: int,
    times: dict[int, RecordTimes],
    bytes_max: int,
) -> LogBatch:
    """A batch under a group TTL alone: wholly expired, not at all, or decoded."""
    batch = LogBatch(header.base_offset, header.last_offset)
    newest_ms = header.max_timestamp
    oldest_ms = newest_ms if header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME else None
    if oldest_ms is None:
        oldest_ms = header.base_timestamp
    if newest_ms < 0 or oldest_ms < 0:
        return batch
    if newest_ms + policy.record_ttl_ms <= now_ms:
        return LogBatch(header.base_offset, header.last_offset, newest_ms + policy.record_ttl_ms)
    if oldest_ms + policy.record_ttl_ms > now_ms:
        return batch
    _decode_into(view[position : position + header.size], policy, times, bytes_max)
    return batch


def _decode_into(
    batch_bytes: memoryview,
    policy: DeliveryPolicy,
    times: dict[int, RecordTimes],
    bytes_max: int,
) -> None:
    found: dict[int, RecordTimes] = {}
    try:
        for record in decode_records(batch_bytes, uncompressed_bytes_max=bytes_max):
            record_time = record_times(record.timestamp_ms, record.headers, policy)
            if record_time is not None:
                found[record.offset] = record_time
    except InvalidBatch as exc:
        log.warning("share fetch: record times not read from a batch: %s", exc)
        return
    times.update(found)
