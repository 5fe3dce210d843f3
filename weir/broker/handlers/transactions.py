"""Transactions: InitProducerId with a transactional id, AddPartitionsToTxn v0-v5,
AddOffsetsToTxn, EndTxn, WriteTxnMarkers, DescribeTransactions, ListTransactions
and DescribeProducers.

The coordinator (`weir.txn.transaction_coordinator`) decides; the service
(`weir.broker.coordinators.transaction_service`) stores its records and writes the
markers. An answer is sent only once the records it rests on are durable.

Version rules, as Kafka's: PRODUCER_FENCED exists from InitProducerId v3,
AddPartitionsToTxn v2, AddOffsetsToTxn v2 and EndTxn v2; older versions get
INVALID_PRODUCER_EPOCH. EndTxn v5 is transaction version 2 (the epoch is bumped on
every end and returned). AddPartitionsToTxn v4+ is the brokers' batched form: a
transaction marked `verify_only` is checked (KIP-890 part 1), any other is added
as transaction version 2's implicit add.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from weir.broker.broker import Broker
from weir.broker.coordinators.transaction_service import TransactionService, transaction_service
from weir.broker.coordinators.txn_markers import Marker, write_markers_here
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.groups import group_service
from weir.controller.controller import OFFSETS_TOPIC_NAME, ControllerError
from weir.format.errors import ErrorCode
from weir.groupcoord.topic_regex import TopicRegexError, compile_topic_regex
from weir.txn.transaction_records import TopicPartition, partitions_by_topic
from weir.wire.messages.transactions import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnRequestTopic,
    AddPartitionsToTxnRequestTransaction,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResponseResultsByPartition,
    AddPartitionsToTxnResponseResultsByTransaction,
    AddPartitionsToTxnResponseTopicResult,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeProducersResponseActiveProducer,
    DescribeProducersResponsePartition,
    DescribeProducersResponseTopic,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeTransactionsResponseTopic,
    DescribeTransactionsResponseTransactionState,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    ListTransactionsResponseTransactionState,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
    WriteTxnMarkersResponseMarker,
    WriteTxnMarkersResponsePartition,
    WriteTxnMarkersResponseTopic,
)

log = logging.getLogger(__name__)

# The first version of each API that knows PRODUCER_FENCED (KIP-588).
_PRODUCER_FENCED_SINCE = {"InitProducerId": 3, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2,
                          "EndTxn": 2}  # fmt: skip
TRANSACTION_VERSION_2_END_TXN = 5  # EndTxn v5+: transaction version 2


def _versioned(error: ErrorCode, api: str, api_version: int) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and api_version < _PRODUCER_FENCED_SINCE[api]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _unavailable(service: TransactionService, transactional_id: str) -> ErrorCode | None:
    """Why this broker cannot coordinate the id now, or None when it can."""
    service.ensure_ready()
    if service.available(transactional_id):
        return None
    if not service.loaded:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return ErrorCode.NOT_COORDINATOR


# -- InitProducerId --------------------------------------------------------------


def handle_transactional_init_producer_id(
    ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse | Deferred[InitProducerIdResponse]:
    transactional_id = request.transactional_id
    assert transactional_id is not None
    service = transaction_service(ctx.broker)
    error = _unavailable(service, transactional_id)
    if error is not None:
        return _init_response(error)
    expected = None
    if request.producer_id != -1 or request.producer_epoch != -1:
        expected = (request.producer_id, request.producer_epoch)

    async def finish() -> InitProducerIdResponse:
        if not await _producer_id_reserved(ctx.broker):
            return _init_response(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        reply = service.coordinator.init_producer_id(
            transactional_id, request.transaction_timeout_ms, ctx.now_ms(), expected
        )
        stored = await service.settle(reply)
        if stored != ErrorCode.NONE:
            return _init_response(stored)
        result = reply.pending.result
        error = _versioned(result.error, "InitProducerId", ctx.api_version)
        return _init_response(error, result.producer_id, result.producer_epoch)

    return Deferred(finish)


async def _producer_id_reserved(broker: Broker) -> bool:
    """At least one producer id is reserved (a new id or epoch roll may take it)."""
    if broker.producer_ids.available:
        return True
    try:
        await broker.topic_changes.reserve_producer_ids()
    except (ControllerError, OSError) as exc:
        log.error("InitProducerId: no producer id: %s", exc)
        return False
    return True


def _init_response(
    error: ErrorCode, producer_id: int = -1, producer_epoch: int = -1
) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=error, producer_id=producer_id, producer_epoch=producer_epoch
    )


# -- AddPartitionsToTxn ----------------------------------------------------------


def handle_add_partitions_to_txn(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> Deferred[AddPartitionsToTxnResponse]:
    service = transaction_service(ctx.broker)
    if ctx.api_version <= 3:
        return _add_partitions_client_form(ctx, service, request)

    async def batched() -> AddPartitionsToTxnResponse:
        results = [await _add_or_verify(ctx, service, txn) for txn in request.transactions]
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results
        )

    return Deferred(batched)


def _add_partitions_client_form(
    ctx: RequestContext, service: TransactionService, request: AddPartitionsToTxnRequest
) -> Deferred[AddPartitionsToTxnResponse]:
    transactional_id = request.v3_and_below_transactional_id
    partitions = _partitions(request.v3_and_below_topics)

    async def finish() -> AddPartitionsToTxnResponse:
        errors = await _add_checked(
            ctx, service, transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, partitions, transaction_version=1,
        )  # fmt: skip
        errors = {
            tp: _versioned(e, "AddPartitionsToTxn", ctx.api_version) for tp, e in errors.items()
        }
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(errors)
        )

    return Deferred(finish)


async def _add_or_verify(
    ctx: RequestContext, service: TransactionService, txn: AddPartitionsToTxnRequestTransaction
) -> AddPartitionsToTxnResponseResultsByTransaction:
    partitions = _partitions(txn.topics)
    error = _unavailable(service, txn.transactional_id)
    if error is not None:
        errors = dict.fromkeys(partitions, error)
    elif txn.verify_only:
        errors = service.coordinator.verify_partitions(
            txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions
        )
    else:
        errors = await _add_checked(
            ctx, service, txn.transactional_id, txn.producer_id, txn.producer_epoch,
            partitions, transaction_version=2,
        )  # fmt: skip
    return AddPartitionsToTxnResponseResultsByTransaction(
        transactional_id=txn.transactional_id, topic_results=_topic_results(errors)
    )


async def _add_checked(
    ctx: RequestContext,
    service: TransactionService,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Sequence[TopicPartition],
    *,
    transaction_version: int,
) -> dict[TopicPartition, ErrorCode]:
    """Kafka's rule: when any partition is unknown, those answer
    UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED."""
    unknown = {tp for tp in partitions if not _exists(ctx.broker, tp)}
    if unknown:
        return {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in partitions
        }
    error = _unavailable(service, transactional_id)
    if error is not None:
        return dict.fromkeys(partitions, error)
    reply = service.coordinator.add_partitions(
        transactional_id, producer_id, producer_epoch, partitions, ctx.now_ms(),
        transaction_version=transaction_version,
    )  # fmt: skip
    stored = await service.settle(reply)
    return dict.fromkeys(partitions, reply.pending.result if stored == ErrorCode.NONE else stored)


def _exists(broker: Broker, partition: TopicPartition) -> bool:
    topic, index = partition
    record = broker.controller.topic(topic)
    return record is not None and 0 <= index < record.partition_count


def _partitions(topics: Sequence[AddPartitionsToTxnRequestTopic]) -> list[TopicPartition]:
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


def _topic_results(
    errors: dict[TopicPartition, ErrorCode],
) -> list[AddPartitionsToTxnResponseTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnResponseResultsByPartition]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnResponseResultsByPartition(
                partition_index=index, partition_error_code=error
            )
        )
    return [
        AddPartitionsToTxnResponseTopicResult(name=name, results_by_partition=results)
        for name, results in by_topic.items()
    ]


# -- AddOffsetsToTxn, EndTxn -----------------------------------------------------


def handle_add_offsets_to_txn(
    ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse | Deferred[AddOffsetsToTxnResponse]:
    service = transaction_service(ctx.broker)
    error = _unavailable(service, request.transactional_id)
    if error is not None:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)
    if not request.group_id:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_GROUP_ID)
    groups = group_service(ctx)
    groups.ensure_ready(ctx.now_ms())
    offsets_partition = (OFFSETS_TOPIC_NAME, groups.partition_for(request.group_id))

    async def finish() -> AddOffsetsToTxnResponse:
        reply = service.coordinator.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch,
            offsets_partition, ctx.now_ms(),
        )  # fmt: skip
        stored = await service.settle(reply)
        error = reply.pending.result if stored == ErrorCode.NONE else stored
        return AddOffsetsToTxnResponse(
            throttle_time_ms=0, error_code=_versioned(error, "AddOffsetsToTxn", ctx.api_version)
        )

    return Deferred(finish)


def handle_end_txn(
    ctx: RequestContext, request: EndTxnRequest
) -> EndTxnResponse | Deferred[EndTxnResponse]:
    service = transaction_service(ctx.broker)
    error = _unavailable(service, request.transactional_id)
    if error is not None:
        return EndTxnResponse(throttle_time_ms=0, error_code=error)
    version = 2 if ctx.api_version >= TRANSACTION_VERSION_2_END_TXN else 1

    async def finish() -> EndTxnResponse:
        reply = service.coordinator.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.committed, ctx.now_ms(), transaction_version=version,
        )  # fmt: skip
        stored = await service.settle(reply)
        if stored != ErrorCode.NONE:
            return EndTxnResponse(throttle_time_ms=0, error_code=stored)
        result = reply.pending.result
        return EndTxnResponse(
            throttle_time_ms=0,
            error_code=_versioned(result.error, "EndTxn", ctx.api_version),
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )

    return Deferred(finish)


# -- WriteTxnMarkers -------------------------------------------------------------


def handle_write_txn_markers(
    ctx: RequestContext, request: WriteTxnMarkersRequest
) -> Deferred[WriteTxnMarkersResponse]:
    """Append each marker to each named partition this broker leads (concurrently),
    answering once each is committed. The log refuses a marker of an older producer
    epoch or coordinator epoch than it has seen."""

    async def finish() -> WriteTxnMarkersResponse:
        markers = []
        for requested in request.markers:
            marker = Marker(
                requested.producer_id,
                requested.producer_epoch,
                requested.coordinator_epoch,
                requested.transaction_result,
                requested.transaction_version,
            )
            partitions = [(t.name, p) for t in requested.topics for p in t.partition_indexes]
            errors = await write_markers_here(ctx.broker, marker, partitions)
            markers.append(
                WriteTxnMarkersResponseMarker(
                    producer_id=requested.producer_id, topics=_marker_topics(errors)
                )
            )
        return WriteTxnMarkersResponse(markers=markers)

    return Deferred(finish)


def _marker_topics(errors: dict[TopicPartition, ErrorCode]) -> list[WriteTxnMarkersResponseTopic]:
    by_topic: dict[str, list[WriteTxnMarkersResponsePartition]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(
            WriteTxnMarkersResponsePartition(partition_index=index, error_code=error)
        )
    return [WriteTxnMarkersResponseTopic(name=n, partitions=p) for n, p in by_topic.items()]


# -- admin -------------------------------------------------------------------------


def handle_describe_transactions(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    service = transaction_service(ctx.broker)
    states = []
    for transactional_id in request.transactional_ids:
        error = _unavailable(service, transactional_id)
        if error is not None:
            states.append(
                DescribeTransactionsResponseTransactionState(
                    error_code=error, transactional_id=transactional_id
                )
            )
            continue
        described = service.coordinator.describe(transactional_id)
        topics = partitions_by_topic(described.partitions)
        states.append(
            DescribeTransactionsResponseTransactionState(
                error_code=described.error,
                transactional_id=transactional_id,
                transaction_state=described.state,
                transaction_timeout_ms=described.timeout_ms,
                transaction_start_time_ms=described.start_ms,
                producer_id=described.producer_id,
                producer_epoch=described.producer_epoch,
                topics=[
                    DescribeTransactionsResponseTopic(topic=name, partitions=indexes)
                    for name, indexes in topics.items()
                ],
            )
        )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


def handle_list_transactions(
    ctx: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    """The transactions of the ids this broker coordinates (clients ask every
    broker). v1's duration filter keeps those running longer than it; v2's pattern
    is a regular expression the whole id must match (Java's `matches`), run by RE2
    as the KIP-848 subscriptions are (linear time: a hostile pattern cannot stall
    the broker)."""
    service = transaction_service(ctx.broker)
    pattern = None
    if request.transactional_id_pattern:
        try:
            pattern = compile_topic_regex(request.transactional_id_pattern)
        except TopicRegexError:
            return ListTransactionsResponse(
                throttle_time_ms=0, error_code=ErrorCode.INVALID_REGULAR_EXPRESSION
            )
    unknown, listings = service.coordinator.list_transactions(
        ctx.now_ms(),
        request.state_filters,
        request.producer_id_filters,
        request.duration_filter,
    )
    return ListTransactionsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        unknown_state_filters=unknown,
        transaction_states=[
            ListTransactionsResponseTransactionState(
                transactional_id=listing.transactional_id,
                producer_id=listing.producer_id,
                transaction_state=listing.state,
            )
            for listing in listings
            if pattern is None or pattern.fullmatch(listing.transactional_id)
        ],
    )


def handle_describe_producers(
    ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    """The active producers of each partition this broker leads (their epochs, last
    sequence and open transaction's first offset), as Kafka's leaders answer."""
    topics = []
    for topic in request.topics:
        partitions = [
            _describe_partition_producers(ctx.broker, topic.name, index)
            for index in topic.partition_indexes
        ]
        topics.append(DescribeProducersResponseTopic(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def _describe_partition_producers(
    broker: Broker, topic: str, index: int
) -> DescribeProducersResponsePartition:
    replica = broker.partition(topic, index)
    if replica is None:
        return DescribeProducersResponsePartition(
            partition_index=index, error_code=broker.missing_partition_error(topic, index)
        )
    if not replica.is_leader:
        return DescribeProducersResponsePartition(
            partition_index=index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
        )
    return DescribeProducersResponsePartition(
        partition_index=index,
        error_code=ErrorCode.NONE,
        active_producers=[
            DescribeProducersResponseActiveProducer(
                producer_id=producer.producer_id,
                producer_epoch=producer.producer_epoch,
                last_sequence=producer.last_sequence,
                last_timestamp=producer.last_timestamp_ms,
                coordinator_epoch=producer.coordinator_epoch,
                current_txn_start_offset=producer.current_txn_start_offset,
            )
            for producer in replica.log.producers()
        ],
    )
