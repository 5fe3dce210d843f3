"""A share partition led by another broker, as its share coordinator stores it: what
a share-group description shows for the partitions the broker answering does not
lead (their live records by state are only in their leader's memory).

The stored state (`__share_group_state`, KIP-932) is written before a fetch or an
acknowledgement is answered, so it is current but for two things: an acquired record
is stored as available (the two are not told apart here: `not_finished`), and a
record never delivered is not stored (the records from the start offset to the end
offset that no batch covers were never delivered: delivery count 0). Per partition:

- `not_finished`: records available, acquired or delayed (start offset to end offset,
  less those acknowledged or archived);
- `delayed`: stored as not to be delivered before a time still to come (a release
  backoff; a never-delivered record's delay header is not stored);
- `acknowledged`, `archived` (dead letters pending included);
- `delivery_counts`: the not-finished records by delivery count so far.

The state is read through the key's share coordinator with the partition's current
leader epoch, as its leader reads it: when the leader has loaded the partition this
is a plain read; when it has not (or leadership just moved), it records that epoch
with the coordinator, as the new leader's own read will; a stale epoch is refused
(FENCED_LEADER_EPOCH) and the partition shows no stored state.
"""

from __future__ import annotations

import logging
from typing import Any

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.coordinators.share_service import ShareService
from weir.broker.coordinators.share_state_rpc import ShareStateUnavailableError
from weir.sharecoord.share_state import RecordState, ShareState, ShareStateKey

log = logging.getLogger(__name__)

_DONE = {RecordState.ACKNOWLEDGED: "acknowledged", RecordState.ARCHIVED: "archived"}


async def stored_records(
    broker: Broker, group_id: str, topic: str, partition: int, end_offset: int | None
) -> dict[str, Any] | None:
    """The partition's records as stored (see the module), None when the state
    cannot be read now (no coordinator, a stale epoch, no leader, unknown topic)."""
    service = broker.shares
    record = broker.controller.topic(topic)
    cluster = broker.cluster
    if not isinstance(service, ShareService) or record is None or cluster is None:
        return None
    leader_epoch = max(cluster.partition_state(record, partition).leader_epoch, 0)
    key = ShareStateKey(group_id, record.topic_id, partition)
    try:
        state = await service.store.read(key, leader_epoch)
    except ShareStateUnavailableError as exc:
        log.debug("no stored state of %s for the console: %s", key, exc)
        return None
    if state is None:
        return None
    return stored_summary(state, end_offset, wall_clock_ms())


def stored_summary(state: ShareState, end_offset: int | None, now_ms: int) -> dict[str, Any]:
    """The counts of a stored state up to `end_offset` (the state's end when None)."""
    end = max(state.end_offset, state.start_offset if end_offset is None else end_offset)
    counts = {"acknowledged": 0, "archived": 0, "delayed": 0}
    histogram: dict[int, int] = {}
    covered = 0
    for batch in state.batches:
        size = batch.last_offset - batch.first_offset + 1
        covered += size
        state_name = _DONE.get(batch.state)
        if batch.state is RecordState.ARCHIVING:
            state_name = "archived"
        if state_name is not None:
            counts[state_name] += size
            continue
        if batch.visible_ms > now_ms:
            counts["delayed"] += size
        histogram[batch.delivery_count] = histogram.get(batch.delivery_count, 0) + size
    never_delivered = end - state.start_offset - covered
    if never_delivered > 0:
        histogram[0] = histogram.get(0, 0) + never_delivered
    return {
        "not_finished": sum(histogram.values()),
        **counts,
        "delivery_counts": {str(c): n for c, n in sorted(histogram.items())},
    }
