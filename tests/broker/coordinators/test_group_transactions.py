"""Transactional offsets on a broker's `__consumer_offsets`: TxnOffsetCommit writes a
transactional batch of the producer, its offsets stay invisible until the marker
the transaction coordinator writes (driven here by hand: `append_txn_marker`, then
`GroupService.complete_transaction`), and a restarted broker reads both back."""

from __future__ import annotations

from pathlib import Path

import trio

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.coordinators.group_service import GroupService, attach_group_service
from weir.broker.coordinators.offsets_topic import OFFSETS_TOPIC_NAME, TxnProducer, offsets_replica
from weir.format.errors import ErrorCode
from weir.groupcoord.classic_messages import OffsetCommitRequest, OffsetToCommit

PARTITION_COUNT = 3
GROUP = "txn-group"
PRODUCER = TxnProducer(producer_id=4000, producer_epoch=0)
NOW_MS = 1_700_000_000_000


async def started(data_dir: Path, nursery: trio.Nursery) -> tuple[Broker, GroupService]:
    broker = Broker(BrokerConfig(data_dir=data_dir, offsets_topic_partition_count=PARTITION_COUNT))
    broker.open_logs()
    await nursery.start(broker.flusher.run)
    service = attach_group_service(broker)
    if not service.loaded:
        await service.prepare()
    return broker, service


def commit_request(*offsets: tuple[int, int]) -> OffsetCommitRequest:
    return OffsetCommitRequest(GROUP, [OffsetToCommit("t", p, o) for p, o in offsets])


async def txn_commit(
    service: GroupService, *offsets: tuple[int, int], producer: TxnProducer = PRODUCER
) -> list[ErrorCode]:
    results, pending = service.commit_transactional_offsets(
        commit_request(*offsets), producer, NOW_MS
    )
    if pending is not None:
        assert await pending.durable() is ErrorCode.NONE
    return [r.error for r in results]


async def end_txn(service: GroupService, commit: bool, producer: TxnProducer = PRODUCER) -> int:
    """What the transaction coordinator does: the marker, then the group service."""
    partition = service.partition_for(GROUP)
    replica = offsets_replica(service.broker, partition)
    result = replica.log.append_txn_marker(
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        coordinator_epoch=0,
        commit=commit,
        leader_epoch=replica.leader_epoch,
        now_ms=NOW_MS,
    )
    service.complete_transaction(partition, producer.producer_id, commit, result.base_offset)
    await replica.log.wait_durable(result.last_offset + 1)
    return result.base_offset


def fetched(service: GroupService) -> dict[tuple[str, int], int]:
    return {tp: c.offset for tp, c in service.committed_offsets(GROUP).items()}


def unstable(service: GroupService, partition: int) -> bool:
    service.committed_offsets(GROUP)  # promotes what is committed
    return service.offsets.is_unstable(GROUP, "t", partition)


async def test_offsets_of_a_transaction_are_fetched_only_after_its_commit_marker(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker, service = await started(tmp_path, nursery)
    assert await txn_commit(service, (0, 10), (1, 20)) == [ErrorCode.NONE] * 2
    assert fetched(service) == {} and unstable(service, 0)

    await end_txn(service, commit=True)
    assert fetched(service) == {("t", 0): 10, ("t", 1): 20}
    assert not unstable(service, 0)
    broker.close()


async def test_offsets_of_an_aborted_transaction_are_never_fetched(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker, service = await started(tmp_path, nursery)
    await txn_commit(service, (0, 10))
    await end_txn(service, commit=False)
    assert fetched(service) == {} and not unstable(service, 0)
    broker.close()


async def test_the_records_are_a_transactional_batch_of_the_producer(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker, service = await started(tmp_path, nursery)
    await txn_commit(service, (0, 10))
    replica = offsets_replica(broker, service.partition_for(GROUP))
    assert replica.log.ongoing_transaction_first_offset(PRODUCER.producer_id) == 0
    await end_txn(service, commit=True)
    assert replica.log.ongoing_transaction_first_offset(PRODUCER.producer_id) is None
    broker.close()


async def test_a_restarted_broker_reads_back_committed_aborted_and_open_transactions(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker, service = await started(tmp_path, nursery)
    await txn_commit(service, (0, 10))
    await end_txn(service, commit=True)
    aborted = TxnProducer(producer_id=4001, producer_epoch=0)
    await txn_commit(service, (0, 99), producer=aborted)
    await end_txn(service, commit=False, producer=aborted)
    still_open = TxnProducer(producer_id=4002, producer_epoch=0)
    await txn_commit(service, (1, 30), producer=still_open)
    broker.close()

    broker, service = await started(tmp_path, nursery)
    assert fetched(service) == {("t", 0): 10}
    assert unstable(service, 1) and not unstable(service, 0)
    # The coordinator writes the open transaction's marker after the restart.
    await end_txn(service, commit=True, producer=still_open)
    assert fetched(service) == {("t", 0): 10, ("t", 1): 30}
    broker.close()


async def test_a_fenced_producer_epoch_is_refused_and_the_group_stays_served(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    broker, service = await started(tmp_path, nursery)
    bumped = TxnProducer(PRODUCER.producer_id, PRODUCER.producer_epoch + 1)
    assert await txn_commit(service, (0, 10), producer=bumped) == [ErrorCode.NONE]
    assert await txn_commit(service, (0, 5)) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert service.available(GROUP)
    await end_txn(service, commit=True, producer=bumped)
    assert fetched(service) == {("t", 0): 10}
    assert broker.partition(OFFSETS_TOPIC_NAME, service.partition_for(GROUP)) is not None
    broker.close()
