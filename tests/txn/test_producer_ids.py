"""Producer ids come from durable blocks and are never handed out twice."""

from __future__ import annotations

from pathlib import Path

from weir.controller.controller import Controller, TopicDefaults
from weir.controller.metadata import EmbeddedMetadataStore
from weir.log.config import LogConfig
from weir.txn.producer_ids import ProducerIdAllocator


def make_allocator(data_dir: Path, block_size: int) -> ProducerIdAllocator:
    controller = Controller(
        EmbeddedMetadataStore(data_dir),
        1,
        TopicDefaults(),
        check_topic_configs=LogConfig.from_overrides,
    )
    return ProducerIdAllocator(controller.allocate_producer_ids, block_size)


def test_ids_are_consecutive_within_a_block_and_continue_across_blocks(tmp_path: Path) -> None:
    allocator = make_allocator(tmp_path, block_size=3)
    assert [allocator.next_producer_id() for _ in range(7)] == list(range(7))


def test_ids_after_a_restart_start_past_every_reserved_block(tmp_path: Path) -> None:
    first = make_allocator(tmp_path, block_size=10)
    used = {first.next_producer_id() for _ in range(12)}
    restarted = make_allocator(tmp_path, block_size=10)
    assert restarted.next_producer_id() == 20
    assert restarted.next_producer_id() not in used
