"""A share partition leader's requests to the share coordinator of its key on another
broker (KIP-932's persister): ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState and ReadShareGroupStateSummary, one key per request, over the
broker's own connection to each peer (`PeerPool`).

Also the state's wire form both ways (`state_from_wire`, `wire_batches`), which the
coordinator's handlers (`weir/broker/handlers/share_state.py`) share.

Errors: `ShareStateUnavailableError` carries the coordinator's error code for the
key (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH, ...); an unreachable peer or one that
answered nonsense is COORDINATOR_NOT_AVAILABLE. The caller
(`share_state_service.ShareStateService`) finds the coordinator again and retries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from weir.broker.broker import Broker
from weir.broker.cluster.peer_client import PeerError, PeerPool, peer_security
from weir.format.errors import ErrorCode
from weir.sharecoord.share_state import RecordState, ShareState, ShareStateKey, StateBatch
from weir.wire.api_keys import ApiKey
from weir.wire.apis.share_state import UNINITIALIZED_START_OFFSET
from weir.wire.messages.share_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateRequestPartition,
    DeleteShareGroupStateRequestTopic,
    ReadShareGroupStateRequest,
    ReadShareGroupStateRequestPartition,
    ReadShareGroupStateRequestTopic,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryRequestPartition,
    ReadShareGroupStateSummaryRequestTopic,
    WriteShareGroupStateRequest,
    WriteShareGroupStateRequestPartition,
    WriteShareGroupStateRequestStateBatch,
    WriteShareGroupStateRequestTopic,
)

log = logging.getLogger(__name__)

READ_VERSION = 0
WRITE_VERSION = 1  # carries DeliveryCompleteCount (KIP-1226)
DELETE_VERSION = 0
SUMMARY_VERSION = 1
# One request's bound: a write is answered once committed on the state partition's ISR.
PEER_TIMEOUT_S = 5.0


class ShareStateUnavailableError(Exception):
    """The key's state cannot be read or written now: the caller answers `error_code`
    (and the client retries)."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class _WireBatch(Protocol):
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int
    visible_timestamp: int


def state_from_wire(
    start_offset: int,
    state_epoch: int,
    leader_epoch: int,
    batches: Iterable[_WireBatch],
    dead_letter_mark: int,
) -> ShareState:
    """A state from a request's or response's fields (Weir's tagged fields included:
    a batch's visible time, the dead-letter mark). Raises ValueError when they are not
    one (an unknown delivery state, batches out of order, ...)."""
    return ShareState(
        start_offset,
        state_epoch,
        leader_epoch,
        tuple(
            StateBatch(
                b.first_offset,
                b.last_offset,
                RecordState(b.delivery_state),
                b.delivery_count,
                b.visible_timestamp,
            )
            for b in batches
        ),
        dead_letter_mark,
    )


def wire_batches(state: ShareState, batch_type: Any) -> list[Any]:
    """The state's batches as `batch_type` (a generated StateBatch class)."""
    return [
        batch_type(b.first_offset, b.last_offset, int(b.state), b.delivery_count, b.visible_ms)
        for b in state.batches
    ]


class ShareStateRpc:
    """This broker's requests to the share coordinators on other brokers."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.peers = PeerPool(
            f"weir-share-state-{broker.config.node_id}",
            frame_bytes_max=broker.config.limits.frame_bytes_max,
            timeout_s=PEER_TIMEOUT_S,
            security=peer_security(broker.config),
        )

    async def read(self, node_id: int, key: ShareStateKey, leader_epoch: int) -> ShareState | None:
        """The key's state (None: never written), its leader epoch now `leader_epoch`
        at the coordinator (an older leader's writes are fenced from then on)."""
        request = ReadShareGroupStateRequest(
            key.group_id,
            [
                ReadShareGroupStateRequestTopic(
                    key.topic_id, [ReadShareGroupStateRequestPartition(key.partition, leader_epoch)]
                )
            ],
        )
        result = _only_partition(
            await self._request(node_id, ApiKey.READ_SHARE_GROUP_STATE, READ_VERSION, request)
        )
        _raise_for(result, "ReadShareGroupState", node_id)
        if result.start_offset == UNINITIALIZED_START_OFFSET:
            return None
        try:
            return state_from_wire(
                result.start_offset,
                result.state_epoch,
                leader_epoch,
                result.state_batches,
                result.dead_letter_mark,
            )
        except ValueError as exc:
            raise ShareStateUnavailableError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {node_id} answered a bad state: {exc}"
            ) from exc

    async def write(self, node_id: int, key: ShareStateKey, state: ShareState) -> None:
        """Store `state` as the key's whole state; return once the coordinator has it
        committed."""
        partition = WriteShareGroupStateRequestPartition(
            partition=key.partition,
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count,
            state_batches=wire_batches(state, WriteShareGroupStateRequestStateBatch),
            dead_letter_mark=state.dead_letter_mark,
        )
        request = WriteShareGroupStateRequest(
            key.group_id, [WriteShareGroupStateRequestTopic(key.topic_id, [partition])]
        )
        result = _only_partition(
            await self._request(node_id, ApiKey.WRITE_SHARE_GROUP_STATE, WRITE_VERSION, request)
        )
        _raise_for(result, "WriteShareGroupState", node_id)

    async def delete(self, node_id: int, key: ShareStateKey) -> None:
        request = DeleteShareGroupStateRequest(
            key.group_id,
            [
                DeleteShareGroupStateRequestTopic(
                    key.topic_id, [DeleteShareGroupStateRequestPartition(key.partition)]
                )
            ],
        )
        result = _only_partition(
            await self._request(node_id, ApiKey.DELETE_SHARE_GROUP_STATE, DELETE_VERSION, request)
        )
        _raise_for(result, "DeleteShareGroupState", node_id)

    async def summary(self, node_id: int, key: ShareStateKey) -> ShareState | None:
        """The key's start offset and epochs (its batches left out), without moving
        its leader epoch: for describing, not for serving."""
        request = ReadShareGroupStateSummaryRequest(
            key.group_id,
            [
                ReadShareGroupStateSummaryRequestTopic(
                    key.topic_id, [ReadShareGroupStateSummaryRequestPartition(key.partition, -1)]
                )
            ],
        )
        result = _only_partition(
            await self._request(
                node_id, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, SUMMARY_VERSION, request
            )
        )
        _raise_for(result, "ReadShareGroupStateSummary", node_id)
        if result.start_offset == UNINITIALIZED_START_OFFSET:
            return None
        return ShareState(result.start_offset, result.state_epoch, result.leader_epoch)

    async def _request(self, node_id: int, api_key: int, version: int, body: object) -> Any:
        try:
            return await self.peers.request_live(
                self.broker.cluster, node_id, api_key, version, body
            )
        except PeerError as exc:
            log.info("%s to broker %d failed: %s", ApiKey(api_key).name, node_id, exc)
            raise ShareStateUnavailableError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {node_id}: {exc}"
            ) from exc

    async def aclose(self) -> None:
        await self.peers.aclose()


def _only_partition(response: Any) -> Any:
    """The one partition's result of a one-key request."""
    try:
        (result,) = response.results
        (partition,) = result.partitions
    except ValueError:
        raise ShareStateUnavailableError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator answered another key"
        ) from None
    return partition


def _raise_for(result: Any, api: str, node_id: int) -> None:
    if result.error_code != ErrorCode.NONE:
        error = ErrorCode(result.error_code)
        raise ShareStateUnavailableError(
            error, f"{api} at broker {node_id}: {error.name} {result.error_message or ''}".rstrip()
        )
