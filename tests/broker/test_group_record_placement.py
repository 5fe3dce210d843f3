"""Group records go to their group's `__consumer_offsets` partition by the group id
they carry: the broker never parses a record key."""

from __future__ import annotations

from pathlib import Path

import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.group_service import GroupService, attach_group_service
from weir.broker.offsets_topic import read_group_records
from weir.format.errors import ErrorCode
from weir.groupcoord.committed_offsets import CommittedOffset
from weir.groupcoord.record_schemas import GroupRecord

PARTITION_COUNT = 4


def group_on_partition(service: GroupService, partition: int) -> str:
    return next(
        g for g in (f"group-{n}" for n in range(100)) if service.partition_for(g) == partition
    )


async def test_records_of_many_groups_land_on_each_groups_partition(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path, offsets_topic_partition_count=PARTITION_COUNT))
    broker.open_logs()
    await nursery.start(broker.flusher.run)
    service = attach_group_service(broker)
    service.ensure_ready(now_ms=0)
    first, second = group_on_partition(service, 1), group_on_partition(service, 3)
    records = service.offsets.commit(first, [("t", 0, CommittedOffset(5))])
    records += service.offsets.commit(second, [("t", 0, CommittedOffset(7))])
    # A key the broker could not parse: only the carried group id can place it.
    records.append(GroupRecord(second, b"\xff", b"opaque"))

    assert await service.append(records).durable() is ErrorCode.NONE

    def keys_of(partition: int) -> list[bytes | None]:
        return [r.key for r in read_group_records(broker, partition)]

    assert keys_of(1) == [records[0].key]
    assert keys_of(3) == [records[1].key, b"\xff"]
    assert keys_of(0) == keys_of(2) == []
    broker.close()
