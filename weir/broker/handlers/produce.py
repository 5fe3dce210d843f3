"""Produce v3–v12: append client batches as sent, answer once they are durable (in
a cluster, with acks=all, once the in-sync replicas have them); a broker that does
not lead a partition answers NOT_LEADER_OR_FOLLOWER with the leader (v10+, KIP-951).

Refused per partition before anything is written: internal topics (by name,
INVALID_TOPIC_EXCEPTION, as Kafka); a transactional batch without the request's
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Kafka's answer); a batch
whose producer id the broker never issued (UNKNOWN_PRODUCER_ID: ids at or past the
controller's `next_producer_id` were never reserved). The log checks the rest
(format, CRC, sequences, epochs; control batches are the coordinator's only).

A transactional batch of a producer with no open transaction of its epoch on the
partition is appended only after its coordinator confirmed the partition is in the
transaction, or (v12, transaction version 2) added it (KIP-890); the coordinator's
refusals are answered as Kafka's leaders answer them (`_produce_error`).

Record by record, only where a feature needs it: a compacted topic's records
must have keys, and a topic whose `compression.type` is not `producer` gets its
batches rewritten with that codec (weir/log/recompression.py). A batch refused
for some of its records (KIP-467) is answered with `record_errors` naming them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields

import trio

from weir.broker.broker import Broker
from weir.broker.coordinators.transaction_service import transaction_service
from weir.broker.handlers.context import Deferred, EncodedResponse, RequestContext
from weir.broker.partition_replica import PartitionReplica
from weir.controller.controller import is_internal_topic
from weir.format.errors import ErrorCode
from weir.format.record_batch import (
    BatchHeader,
    Buffer,
    InvalidBatch,
    iter_batch_headers,
    verify_crc,
)
from weir.log.compaction import compacts, require_keys
from weir.log.errors import LogError, RecordErrors
from weir.log.recompression import recompress
from weir.wire.messages.produce import (
    ProduceRequest,
    ProduceRequestPartitionData,
    ProduceResponse,
)
from weir.wire.produce_response import (
    NO_LEADER_HINT,
    NodeEndpoint,
    PartitionResult,
    encode_produce_response,
)

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
NO_PRODUCER_ID = -1


@dataclass
class PartitionOutcome:
    """The result of appending one partition's records, before the response is built."""

    index: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    replica: PartitionReplica | None = None
    next_offset: int = 0
    record_errors: list[tuple[int, str]] = field(default_factory=list)  # KIP-467
    # KIP-951: where the partition's leader is, when this broker is not it.
    leader_hint: tuple[int, int] = NO_LEADER_HINT
    # A transactional batch waiting for its coordinator's check (KIP-890).
    verification: Verification | None = None


@dataclass(frozen=True)
class Verification:
    """What a partition's append needs once its coordinator checked it."""

    partition: ProduceRequestPartitionData
    transactional_id: str
    producer_id: int
    producer_epoch: int


def handle_produce(ctx: RequestContext, request: ProduceRequest) -> Deferred[ProduceResponse]:
    """Appends now, on the reader; the Deferred waits for durability and answers.
    A transactional batch the partition has no open transaction for waits for its
    coordinator's check first (KIP-890), in the Deferred: a connection's writer
    awaits its Deferreds one at a time in request order, so a producer's later
    requests to that partition (also checked: the first is not appended yet) are
    appended after it and their sequences follow each other."""
    broker = ctx.broker
    acks = request.acks
    results: list[tuple[str, list[PartitionOutcome]]] = []
    now_ms = ctx.now_ms()
    transactional_id = request.transactional_id
    for topic in request.topic_data:
        outcomes = [
            _append(broker, topic.name, part, acks, transactional_id, now_ms)
            for part in topic.partition_data
        ]
        results.append((topic.name, outcomes))
    waiting = [(name, o) for name, outcomes in results for o in outcomes if o.verification]

    async def finish() -> EncodedResponse | None:
        if waiting:
            assert transactional_id is not None
            await _verify_then_append(ctx, waiting, transactional_id, acks)
        appended = [o for _, outcomes in results for o in outcomes if o.replica is not None]
        timed_out = not await _wait_durable(broker, appended, acks)
        if acks == 0:
            return None
        if timed_out:
            _mark_timed_out(appended)
        topics = [(name, [_partition_result(o) for o in outcomes]) for name, outcomes in results]
        endpoints = _leader_endpoints(
            broker, ctx.listener_name, [o for _, outcomes in results for o in outcomes]
        )
        return EncodedResponse(
            encode_produce_response(
                ctx.api_version, ctx.header.correlation_id, topics, node_endpoints=endpoints
            )
        )

    return Deferred(finish)


async def _verify_then_append(
    ctx: RequestContext,
    waiting: list[tuple[str, PartitionOutcome]],
    transactional_id: str,
    acks: int,
) -> None:
    service = transaction_service(ctx.broker)
    add = ctx.api_version >= 12 and service.settings.transaction_version >= 2
    by_producer: dict[tuple[int, int], list[tuple[str, PartitionOutcome]]] = {}
    for name, outcome in waiting:
        verification = outcome.verification
        assert verification is not None
        key = (verification.producer_id, verification.producer_epoch)
        by_producer.setdefault(key, []).append((name, outcome))
    for (producer_id, producer_epoch), outcomes in by_producer.items():
        errors = await service.verify_for_produce(
            transactional_id,
            producer_id,
            producer_epoch,
            [(name, o.index) for name, o in outcomes],
            add,
        )
        for name, outcome in outcomes:
            _append_verified(ctx, name, outcome, acks, errors[(name, outcome.index)])


def _append_verified(
    ctx: RequestContext, topic: str, outcome: PartitionOutcome, acks: int, error: ErrorCode
) -> None:
    verification = outcome.verification
    assert verification is not None
    outcome.verification = None
    if error != ErrorCode.NONE:
        outcome.error_code = _produce_error(error, ctx.api_version)
        outcome.error_message = f"the transaction coordinator answered {error.name}"
        return
    appended = _append(
        ctx.broker, topic, verification.partition, acks, verification.transactional_id,
        ctx.now_ms(), verified=True,
    )  # fmt: skip
    _copy_outcome(appended, outcome)


def _copy_outcome(source: PartitionOutcome, target: PartitionOutcome) -> None:
    for item in fields(PartitionOutcome):
        setattr(target, item.name, getattr(source, item.name))


def _produce_error(error: ErrorCode, api_version: int) -> ErrorCode:
    """A coordinator's verification error as Kafka's leaders answer it: fencing as
    INVALID_PRODUCER_EPOCH, the coordinator's retriable errors as NOT_ENOUGH_REPLICAS
    (every client retries it), TRANSACTION_ABORTABLE as INVALID_TXN_STATE before v11."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error in _COORDINATOR_RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error == ErrorCode.TRANSACTION_ABORTABLE and api_version < 11:
        return ErrorCode.INVALID_TXN_STATE
    return error


_COORDINATOR_RETRIABLE = frozenset({
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
})  # fmt: skip


def _mark_timed_out(appended: list[PartitionOutcome]) -> None:
    for outcome in appended:
        if outcome.error_code == ErrorCode.NONE and (
            outcome.replica is None or outcome.replica.high_watermark < outcome.next_offset
        ):
            outcome.error_code = ErrorCode.REQUEST_TIMED_OUT
            outcome.error_message = "the append was not durable within the timeout"


def _append(
    broker: Broker,
    topic: str,
    partition: ProduceRequestPartitionData,
    acks: int,
    transactional_id: str | None,
    now_ms: int,
    *,
    verified: bool = False,
) -> PartitionOutcome:
    """Check and append one partition's records; a transactional batch that needs
    its coordinator's check first comes back with `verification` set instead
    (`verified`: it was checked)."""
    outcome = PartitionOutcome(index=partition.index)
    replica = _writable_replica(broker, topic, partition, acks, outcome)
    if replica is None:
        return outcome
    records = partition.records
    assert records is not None
    refusal = _refuse_producer_fields(
        records, broker.controller.metadata.next_producer_id, transactional_id
    )
    if refusal is not None:
        outcome.error_code, outcome.error_message = refusal
        return outcome
    if transactional_id is not None and not verified:
        verification = _verification_needed(replica, partition, transactional_id)
        if verification is not None:
            outcome.verification = verification
            return outcome
    _write_records(broker, topic, replica, records, now_ms, outcome)
    return outcome


def _writable_replica(
    broker: Broker,
    topic: str,
    partition: ProduceRequestPartitionData,
    acks: int,
    outcome: PartitionOutcome,
) -> PartitionReplica | None:
    """The partition's replica when this broker may append to it now; else None
    with the error set on `outcome`."""
    replica = broker.partition(topic, partition.index)
    if acks not in VALID_ACKS:
        outcome.error_code = ErrorCode.INVALID_REQUIRED_ACKS
        return None
    if is_internal_topic(topic) or (replica is not None and replica.topic.is_internal):
        outcome.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
        outcome.error_message = f"Cannot append to internal topic {topic}"
        return None
    if replica is None:
        outcome.error_code = broker.missing_partition_error(topic, partition.index)
        if outcome.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            outcome.leader_hint = _leader_hint(broker, topic, partition.index)
        return None
    if not replica.is_leader:
        outcome.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        outcome.error_message = "this broker does not lead the partition"
        outcome.leader_hint = _leader_hint(broker, topic, partition.index)
        return None
    in_sync = _in_sync_count(replica)
    if acks == -1 and replica.log.config.min_insync_replicas > in_sync:
        outcome.error_code = ErrorCode.NOT_ENOUGH_REPLICAS
        outcome.error_message = (
            f"min.insync.replicas is {replica.log.config.min_insync_replicas}, "
            f"the ISR has {in_sync}"
        )
        return None
    records = partition.records
    if records is None or len(records) == 0:
        outcome.error_code = ErrorCode.INVALID_RECORD
        outcome.error_message = "the produce request carried no record batches"
        return None
    return replica


def _verification_needed(
    replica: PartitionReplica,
    partition: ProduceRequestPartitionData,
    transactional_id: str,
) -> Verification | None:
    """A transactional batch of a producer with no open transaction of its epoch on
    this partition must be checked by its coordinator before it is appended."""
    records = partition.records
    assert records is not None
    header = _first_transactional_header(records)
    if header is None:
        return None
    ongoing = replica.log.ongoing_transaction_first_offset(
        header.producer_id, header.producer_epoch
    )
    if ongoing is not None:
        return None
    return Verification(partition, transactional_id, header.producer_id, header.producer_epoch)


def _first_transactional_header(records: Buffer) -> BatchHeader | None:
    try:
        for _, header in iter_batch_headers(records):
            if header.is_transactional and not header.is_control:
                return header
    except InvalidBatch:
        return None  # the log's validation answers it
    return None


def _write_records(
    broker: Broker,
    topic: str,
    replica: PartitionReplica,
    records: Buffer,
    now_ms: int,
    outcome: PartitionOutcome,
) -> None:
    config = replica.log.config
    try:
        if compacts(replica.log):
            require_keys(records, f"{topic}-{replica.index}")
        if config.stored_codec is not None:  # compression.type is not `producer`
            records = recompress(
                records, config.stored_codec, batch_bytes_max=config.max_message_bytes
            )
        result = replica.log.append(records, leader_epoch=replica.leader_epoch, now_ms=now_ms)
    except LogError as exc:
        outcome.error_code = exc.error_code
        outcome.error_message = str(exc)
        if isinstance(exc, RecordErrors):
            outcome.record_errors = exc.record_errors
        return
    replica.wake_followers()
    if result.duplicate:
        broker.metrics.produced_duplicate_batches_total += 1
    else:
        broker.metrics.produced_batches_total += 1
        broker.metrics.produced_bytes_total += len(records)
        traffic = broker.metrics.traffic(topic)
        traffic.produced_bytes += len(records)
        traffic.produced_records += result.last_offset - result.base_offset + 1
    outcome.replica = replica
    outcome.base_offset = result.base_offset
    outcome.next_offset = result.last_offset + 1
    outcome.log_append_time_ms = result.log_append_time_ms
    outcome.log_start_offset = result.log_start_offset


def _refuse_producer_fields(
    records: Buffer, next_producer_id: int, transactional_id: str | None
) -> tuple[ErrorCode, str] | None:
    """The error for a transactional batch without a transactional id, or a producer
    id never issued, else None. Malformed or corrupt batches and control batches
    pass here: the log's validation answers them (CORRUPT_MESSAGE, INVALID_RECORD...)."""
    try:
        for position, header in iter_batch_headers(records):
            if header.is_control:
                continue
            refusal = _producer_refusal(header, next_producer_id, transactional_id)
            if refusal is not None:
                return refusal if verify_crc(records, position, header) else None
    except InvalidBatch:
        return None
    return None


def _producer_refusal(
    header: BatchHeader, next_producer_id: int, transactional_id: str | None
) -> tuple[ErrorCode, str] | None:
    if header.is_transactional and transactional_id is None:
        return (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "a transactional batch needs the request's transactional id",
        )
    producer_id = header.producer_id
    if producer_id != NO_PRODUCER_ID and not 0 <= producer_id < next_producer_id:
        return (
            ErrorCode.UNKNOWN_PRODUCER_ID,
            f"producer id {producer_id} was never issued by this cluster "
            "(get one with InitProducerId)",
        )
    return None


def _in_sync_count(replica: PartitionReplica) -> int:
    replication = replica.replication
    return 1 if replication is None else len(replication.in_sync_replicas)


async def _wait_durable(broker: Broker, appended: list[PartitionOutcome], acks: int) -> bool:
    """Wait for every append to be fsynced (and with acks=all, in a cluster, for
    the high watermark to pass it), then wake fetches; False on timeout."""
    timeout_s = broker.config.limits.produce_timeout_ms_max / 1000
    with trio.move_on_after(timeout_s):
        for outcome in appended:
            replica = outcome.replica
            assert replica is not None
            try:
                await replica.log.wait_durable(outcome.next_offset)
            except LogError as exc:
                # Deleted, truncated or failed fsync: never acknowledge it.
                outcome.error_code = exc.error_code
                outcome.error_message = str(exc)
                continue
            replication = replica.replication
            if replication is None:
                replica.wake_fetchers()
                continue
            replication.durable_end_moved()
            if acks == -1:
                error = await replication.wait_committed(outcome.next_offset)
                if error != ErrorCode.NONE:
                    outcome.error_code = error
                    outcome.error_message = "the ISR did not commit the append"
        return True
    log.warning("produce: fsync did not complete within %.0f s", timeout_s)
    return False


def _partition_result(outcome: PartitionOutcome) -> PartitionResult:
    return PartitionResult(
        outcome.index,
        outcome.error_code,
        outcome.base_offset if outcome.error_code == ErrorCode.NONE else -1,
        outcome.log_append_time_ms,
        outcome.log_start_offset,
        outcome.error_message,
        tuple(outcome.record_errors),
        outcome.leader_hint,
    )


def _leader_hint(broker: Broker, topic: str, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition another live broker leads (KIP-951)."""
    cluster = broker.cluster
    record = broker.controller.topic(topic)
    if cluster is None or record is None:
        return NO_LEADER_HINT
    state = cluster.partition_state(record, index)
    if state.leader in {b.node_id for b in cluster.live_brokers()}:
        return state.leader, state.leader_epoch
    return NO_LEADER_HINT


def _leader_endpoints(
    broker: Broker, listener_name: str, outcomes: list[PartitionOutcome]
) -> list[NodeEndpoint]:
    """KIP-951's node endpoints: the brokers named by the responses' leader hints."""
    leaders = {o.leader_hint[0] for o in outcomes if o.leader_hint != NO_LEADER_HINT}
    if not leaders or broker.cluster is None:
        return []
    return [
        NodeEndpoint(b.node_id, *b.endpoint(listener_name), b.rack)
        for b in broker.cluster.live_brokers()
        if b.node_id in leaders
    ]
