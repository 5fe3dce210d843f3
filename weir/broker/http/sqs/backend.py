"""What the SQS actions run on: the Kafka APIs as the caller (`kafka`, the HTTP
foundation's KafkaGateway) and the share group's session-less operations
(`share`, ShareDirect), with Kafka's error codes turned into SQS's errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from weir.broker.broker import Broker
from weir.broker.handlers.admin_configs import ConfigOperation, ResourceType
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.broker.http.kafka_gateway import GatewayError, HttpCaller, KafkaGateway, gateway_of
from weir.broker.http.share_direct import ShareDirect, share_direct_of
from weir.broker.http.sqs.errors import (
    SqsError,
    access_denied,
    internal_error,
    invalid_parameter,
    queue_does_not_exist,
    service_unavailable,
)
from weir.broker.http.sqs.fifo import Deduplications
from weir.broker.http.sqs.move_task_state import MoveTasks
from weir.broker.http.sqs.receipts import receipt_key
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

AUTHORIZATION_ERRORS = (
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
)
# Errors that pass (a leader moving, a coordinator loading): the client retries.
RETRIABLE = (
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.KAFKA_STORAGE_ERROR,
)
PRODUCE_TIMEOUT_MS = 30_000


def sqs_error_of(code: int, what: str, message: str | None = None) -> SqsError:
    """The SQS error for a Kafka error code met doing `what`."""
    error = ErrorCode(code)
    detail = f"{what}: {error.name}" + (f" ({message})" if message else "")
    if error in AUTHORIZATION_ERRORS:
        return access_denied(f"Access to the resource is denied. {detail}")
    if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return queue_does_not_exist()
    if error in (ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST, ErrorCode.POLICY_VIOLATION):
        return invalid_parameter(detail)
    if error in RETRIABLE:
        return service_unavailable(f"Try again: {detail}")
    return internal_error(detail)


def gateway_failure(exc: GatewayError, what: str) -> SqsError:
    if exc.retriable:
        return service_unavailable(f"Try again: {what}: {exc}")
    return internal_error(f"{what}: {exc}")


@dataclass
class Backend:
    broker: Broker
    kafka: KafkaGateway
    share: ShareDirect
    # ApproximateFirstReceiveTimestamp: (topic, partition, offset) -> ms, this broker's
    # memory (bounded; a record first received elsewhere shows its receive here).
    first_received_ms: dict[tuple[str, int, int], int] = field(default_factory=dict)
    move_tasks: MoveTasks = field(default_factory=MoveTasks)
    deduplications: Deduplications = field(default_factory=Deduplications)
    # How far this broker has read each FIFO queue's log for deduplication ids
    # (queue -> next offset; fifo_log.py).
    fifo_read_offsets: dict[str, int] = field(default_factory=dict)
    # FIFO sends to one queue, one at a time on this broker (deduplication, then append).
    _fifo_locks: dict[str, trio.Lock] = field(default_factory=dict)

    def fifo_lock(self, queue: str) -> trio.Lock:
        lock = self._fifo_locks.get(queue)
        if lock is None:
            lock = self._fifo_locks[queue] = trio.Lock()
        return lock

    @property
    def receipt_key(self) -> bytes:
        """The receipt handles' MAC key (the cluster id is known once the broker runs)."""
        secret = self.broker.config.security.sqs_receipt_secret
        return receipt_key(self.broker.controller.cluster_id, secret)

    async def send(
        self,
        caller: HttpCaller,
        api_key: int,
        version: int,
        body: Mapping[str, Any],
        what: str,
        *,
        node_id: int | None = None,
    ) -> Any:
        """Run a Kafka API as the caller (on broker `node_id`); SqsError when it
        could not be run."""
        try:
            return await self.kafka.send(caller, api_key, version, body, node_id=node_id)
        except GatewayError as exc:
            raise gateway_failure(exc, what) from exc

    def authorization(self, caller: HttpCaller, api_name: str) -> RequestAuthorization | None:
        """The caller's authorization for checks made here (None: all allowed)."""
        authorizer = self.broker.authorizer
        if authorizer is None or caller.session is None:
            return None
        return RequestAuthorization(authorizer, caller.session, api_name)

    def leader(self, topic: str, partition: int) -> int:
        leader = self.kafka.leader_of(topic, partition)
        if leader is None:
            raise service_unavailable(f"Try again: {topic}-{partition} has no leader now")
        return leader

    async def coordinator(self, caller: HttpCaller, group_id: str) -> int:
        try:
            found = await self.kafka.coordinator_of(caller, group_id)
        except GatewayError as exc:
            raise gateway_failure(exc, f"the coordinator of {group_id}") from exc
        if found is None:
            raise service_unavailable(f"Try again: group {group_id} has no coordinator now")
        return found

    async def alter_configs(
        self,
        caller: HttpCaller,
        resource_type: ResourceType,
        name: str,
        configs: Mapping[str, str | None],
    ) -> None:
        """IncrementalAlterConfigs: SET each value, DELETE each None."""
        body = {
            "resources": [
                {
                    "resource_type": int(resource_type),
                    "resource_name": name,
                    "configs": [
                        {
                            "name": key,
                            "value": value,
                            "config_operation": int(
                                ConfigOperation.DELETE if value is None else ConfigOperation.SET
                            ),
                        }
                        for key, value in configs.items()
                    ],
                }
            ],
            "validate_only": False,
        }
        response = await self.send(
            caller, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, f"configs of {name}"
        )
        for result in response.responses:
            if result.error_code:
                raise sqs_error_of(result.error_code, f"configs of {name}", result.error_message)

    async def produce(self, caller: HttpCaller, topic: str, partition: int, records: bytes) -> int:
        """Append one batch (acks=all); its base offset."""
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": PRODUCE_TIMEOUT_MS,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        }
        response = await self.send(
            caller,
            ApiKey.PRODUCE,
            9,
            body,
            f"sending to {topic}",
            node_id=self.leader(topic, partition),
        )
        result = response.responses[0].partition_responses[0]
        if result.error_code:
            raise sqs_error_of(result.error_code, f"sending to {topic}", result.error_message)
        return int(result.base_offset)

    async def end_offsets(
        self, caller: HttpCaller, topic: str, partitions: Sequence[int]
    ) -> dict[int, int]:
        """Each partition's end offset, asked of its leader."""
        ends = {}
        for partition in partitions:
            body = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": partition, "current_leader_epoch": -1,
                             "timestamp": -1}
                        ],
                    }
                ],
            }  # fmt: skip
            response = await self.send(
                caller, ApiKey.LIST_OFFSETS, 7, body, f"end offsets of {topic}",
                node_id=self.leader(topic, partition),
            )  # fmt: skip
            for result in response.topics[0].partitions:
                if result.error_code:
                    raise sqs_error_of(result.error_code, f"end offsets of {topic}")
                ends[int(result.partition_index)] = int(result.offset)
        return ends

    def note_first_receive(self, key: tuple[str, int, int], now_ms: int) -> int:
        found = self.first_received_ms.get(key)
        if found is not None:
            return found
        if len(self.first_received_ms) >= FIRST_RECEIVES_MAX:
            for old in list(self.first_received_ms)[: FIRST_RECEIVES_MAX // 2]:
                del self.first_received_ms[old]
        self.first_received_ms[key] = now_ms
        return now_ms


FIRST_RECEIVES_MAX = 100_000


def backend_of(broker: Broker) -> Backend:
    return Backend(broker, gateway_of(broker), share_direct_of(broker))
