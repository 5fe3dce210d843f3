"""The internal offsets topic: created compacted and internal, written and read back."""

from __future__ import annotations

from pathlib import Path

import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.offsets_topic import (
    OFFSETS_TOPIC_NAME,
    append_group_records_now,
    ensure_offsets_topic,
    read_group_records,
    wait_group_records,
)


def open_broker(data_dir: Path) -> Broker:
    broker = Broker(BrokerConfig(data_dir=data_dir))
    broker.open_logs()
    return broker


async def test_offsets_topic_is_internal_compacted_and_created_once(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    first = ensure_offsets_topic(broker, partition_count=5)
    again = ensure_offsets_topic(broker, partition_count=7)
    assert first is again and first.partition_count == 5
    assert first.is_internal and first.configs["cleanup.policy"] == "compact"
    broker.close()


async def test_records_survive_a_restart_in_log_order_with_tombstones(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker = open_broker(tmp_path)
    await nursery.start(broker.flusher.run)
    ensure_offsets_topic(broker, partition_count=3)
    append_group_records_now(broker, 2, [(b"k1", b"v1"), (b"k2", b"v2")])
    await wait_group_records(broker, 2, append_group_records_now(broker, 2, [(b"k1", None)]))
    broker.close()

    restarted = open_broker(tmp_path)
    assert restarted.controller.topic(OFFSETS_TOPIC_NAME) is not None
    stored = [(r.offset, r.key, r.value) for r in read_group_records(restarted, 2)]
    assert stored == [(0, b"k1", b"v1"), (1, b"k2", b"v2"), (2, b"k1", None)]
    assert list(read_group_records(restarted, 0)) == []
    restarted.close()
