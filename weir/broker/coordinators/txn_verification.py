"""A partition leader's check of a transactional batch (KIP-890), the transaction
service's side of it: `TransactionService`'s base class.

Before a leader appends the first transactional batch of a producer to a partition
it asks the id's coordinator: version 1 (Produce < v12) whether the partition is in
the transaction (verify only), version 2 (Produce v12) to add it. The group
coordinator asks the same before a TxnOffsetCommit (`check_txn_offsets`). The
coordinator is this broker's service or, in a cluster, another broker's
(AddPartitionsToTxn v5 over a connection of its own).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.cluster.peer_client import PeerError, PeerPool
from weir.broker.coordinators.group_transactions import TxnOffsetsCheck
from weir.broker.roles import live_broker
from weir.controller.controller import OFFSETS_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from weir.format.errors import ErrorCode
from weir.txn.pending import Effects, Reply
from weir.txn.transaction_coordinator import TransactionCoordinator
from weir.txn.transaction_records import TopicPartition, partitions_by_topic
from weir.wire.api_keys import ApiKey
from weir.wire.messages.transactions import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnRequestTopic,
    AddPartitionsToTxnRequestTransaction,
    AddPartitionsToTxnResponse,
)

log = logging.getLogger(__name__)

# A leader's check of a transactional batch retries CONCURRENT_TRANSACTIONS this long,
# from the first backoff doubling to the max (Kafka's add.partitions.to.txn.retry.*).
VERIFICATION_RETRY_MS = 5_000
VERIFICATION_BACKOFF_MS = 20
VERIFICATION_BACKOFF_MAX_MS = 100
ADD_PARTITIONS_TO_TXN_BROKER_VERSION = 5


class TransactionVerification:
    """What the service provides: its broker, coordinator and connections, and the
    methods below the line."""

    broker: Broker
    coordinator: TransactionCoordinator
    verification_peers: PeerPool

    def available(self, transactional_id: str) -> bool:
        raise NotImplementedError

    def partition_for(self, transactional_id: str) -> int:
        raise NotImplementedError

    async def settle(self, reply: Reply[Any] | Effects) -> ErrorCode:
        raise NotImplementedError

    async def verify_for_produce(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        """Before a leader appends the first transactional batch of a producer to a
        partition: is the partition in the producer's open transaction? With `add`
        (Produce v12, transaction version 2) the coordinator adds it instead (the
        client sent no AddPartitionsToTxn). Asks this broker's coordinator, or the
        coordinator's broker with AddPartitionsToTxn v5.

        CONCURRENT_TRANSACTIONS (the producer's last transaction is still writing its
        markers: version 2 starts the next one as soon as EndTxn answers) is retried
        here, as Kafka's `add.partitions.to.txn.retry.backoff.ms` does, for up to
        `VERIFICATION_RETRY_MS`, so the batch is not sent back to the client for a
        wait of a few milliseconds."""
        backoff_ms = VERIFICATION_BACKOFF_MS
        deadline_s = trio.current_time() + VERIFICATION_RETRY_MS / 1000
        while True:
            errors = await self._verify_once(
                transactional_id, producer_id, producer_epoch, partitions, add
            )
            if ErrorCode.CONCURRENT_TRANSACTIONS not in errors.values():
                return errors
            if trio.current_time() + backoff_ms / 1000 > deadline_s:
                return errors
            await trio.sleep(backoff_ms / 1000)
            backoff_ms = min(backoff_ms * 2, VERIFICATION_BACKOFF_MAX_MS)

    async def _verify_once(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        if self.available(transactional_id):
            return await self.verify_here(
                transactional_id, producer_id, producer_epoch, partitions, add
            )
        node = self.coordinator_node(transactional_id)
        if node is None or node[0] == self.broker.config.node_id:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return await self._verify_remote(
            node, transactional_id, producer_id, producer_epoch, partitions, add
        )

    async def verify_here(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        if not add:
            return self.coordinator.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions
            )
        reply = self.coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, wall_clock_ms(),
            transaction_version=2,
        )  # fmt: skip
        error = await self.settle(reply)
        return dict.fromkeys(partitions, reply.pending.result if error == ErrorCode.NONE else error)

    def coordinator_node(self, transactional_id: str) -> tuple[int, str, int] | None:
        """(node id, host, port) of the id's coordinator: this broker on a single
        node; in a cluster the live leader of its partition; None when unknown."""
        cluster = self.broker.cluster
        advertised = self.broker.config.advertised
        if cluster is None:
            return self.broker.config.node_id, advertised.host, advertised.port
        topic = self.broker.controller.topic(TRANSACTION_STATE_TOPIC_NAME)
        if topic is None:
            return None
        leader = cluster.partition_state(topic, self.partition_for(transactional_id)).leader
        peer = live_broker(cluster, leader)
        return None if peer is None else (peer.node_id, peer.host, peer.port)

    async def _verify_remote(
        self,
        node: tuple[int, str, int],
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        topics = partitions_by_topic(partitions)
        request = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnRequestTransaction(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    verify_only=not add,
                    topics=[
                        AddPartitionsToTxnRequestTopic(name=name, partitions=indexes)
                        for name, indexes in topics.items()
                    ],
                )
            ]
        )
        node_id, host, port = node
        try:
            response: AddPartitionsToTxnResponse = await self.verification_peers.request(
                node_id,
                (host, port),
                ApiKey.ADD_PARTITIONS_TO_TXN,
                ADD_PARTITIONS_TO_TXN_BROKER_VERSION,
                request,
            )
        except PeerError as exc:
            log.info("AddPartitionsToTxn to broker %d failed: %s", node_id, exc)
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        errors: dict[TopicPartition, ErrorCode] = {}
        for result in response.results_by_transaction:
            for topic_result in result.topic_results:
                for partition in topic_result.results_by_partition:
                    errors[(topic_result.name, partition.partition_index)] = ErrorCode(
                        partition.partition_error_code
                    )
        return {tp: errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in partitions}

    async def check_txn_offsets(self, check: TxnOffsetsCheck) -> ErrorCode:
        """The group coordinator's question before a TxnOffsetCommit is appended:
        is the group's offsets partition in the producer's transaction (KIP-890
        part 1), or (v5, transaction version 2) add it. The coordinator's
        retriable errors become COORDINATOR_LOAD_IN_PROGRESS (clients retry it
        without looking the group coordinator up again)."""
        partition = (OFFSETS_TOPIC_NAME, check.offsets_partition)
        errors = await self.verify_for_produce(
            check.transactional_id,
            check.producer_id,
            check.producer_epoch,
            [partition],
            check.add_partition,
        )
        error = errors[partition]
        if error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if error == ErrorCode.TRANSACTION_ABORTABLE and not check.add_partition:
            return ErrorCode.INVALID_TXN_STATE
        return error
