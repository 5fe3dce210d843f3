"""Group records go to their group's `__consumer_offsets` partition by the group id
they carry (the broker never parses a record key), and an offsets topic written by
the old hand-written encoders loads."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import GroupService, attach_group_service
from weir.broker.coordinators.offsets_topic import (
    append_group_records_now,
    read_group_records,
    wait_group_records,
)
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
    await service.prepare()
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


async def test_an_offsets_topic_written_by_the_old_encoders_loads(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path, offsets_topic_partition_count=PARTITION_COUNT))
    broker.open_logs()
    await nursery.start(broker.flusher.run)
    service = attach_group_service(broker)
    await service.prepare()
    topic_id = uuid.UUID(int=7)
    # Bytes as the hand-written encoders wrote them (Kafka's layouts, struct-packed).
    old_records = {
        "classic": [
            (
                struct.pack(">hh7sh1si", 1, 7, b"classic", 1, b"t", 0),
                struct.pack(">hqih4sq", 3, 42, 3, 4, b"meta", 1_000),
            ),
            (
                struct.pack(">hh7s", 2, 7, b"classic"),
                struct.pack(">hh8sih5sh2sqi", 3, 8, b"consumer", 5, 5, b"range", 2, b"m1", 1_000, 1)
                + struct.pack(">h2shh6sh9s", 2, b"m1", -1, 6, b"client", 9, b"/10.0.0.1")
                + struct.pack(">iii3si6s", 30_000, 10_000, 3, b"sub", 6, b"assign"),
            ),
        ],
        "kip848": [
            (struct.pack(">hh6s", 3, 6, b"kip848"), struct.pack(">hib", 0, 4, 0)),
            (
                struct.pack(">hh6sh1s", 5, 6, b"kip848", 1, b"m"),
                # instance, rack: null; client "c", host "/h"; topics ["t"]; regex null;
                # rebalance timeout; assignor null; no tags
                b"\x00\x00\x00\x00\x02c\x03/h\x02\x02t\x00"
                + struct.pack(">i", 60_000)
                + b"\x00\x00",
            ),
            (
                struct.pack(">hh6sh1s", 8, 6, b"kip848", 1, b"m"),
                struct.pack(">hiib", 0, 4, 3, 0)
                + b"\x02"
                + topic_id.bytes
                + b"\x02"
                + struct.pack(">i", 0)
                + b"\x00\x01\x00",
            ),
        ],
    }
    for group_id, records in old_records.items():
        partition = service.partition_for(group_id)
        end_offset = append_group_records_now(broker, partition, records)
        await wait_group_records(broker, partition, end_offset)
    broker.close()

    restarted = Broker(
        BrokerConfig(data_dir=tmp_path, offsets_topic_partition_count=PARTITION_COUNT)
    )
    restarted.open_logs()
    loaded = attach_group_service(restarted)
    assert loaded.offsets.fetch("classic", "t", 0) == CommittedOffset(42, 3, "meta", 1_000)
    assert loaded.classic.has_group("classic")
    assert loaded.classic.groups["classic"].generation_id == 5
    group = loaded.consumer_groups.groups["kip848"]
    assert group.group_epoch == 4
    assert group.members["m"].member_epoch == 4
    assert group.members["m"].assigned == {topic_id: frozenset({0})}
    restarted.close()
