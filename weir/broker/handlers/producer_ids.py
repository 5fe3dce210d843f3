"""InitProducerId v0–v4: producer ids for idempotent producers.

A producer without a transactional id gets a fresh producer id with epoch 0,
also when it names its previous id and epoch (v3+, KIP-360): that is what
Kafka does for non-transactional producers, which then restart their
sequences. A transactional id goes to its transaction coordinator
(`weir.broker.handlers.transactions`).
"""

from __future__ import annotations

import logging
from functools import partial

from weir.broker.broker import Broker
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.transactions import handle_transactional_init_producer_id
from weir.controller.controller import ControllerError
from weir.format.errors import ErrorCode
from weir.wire.messages.transactions import InitProducerIdRequest, InitProducerIdResponse

log = logging.getLogger(__name__)


def handle_init_producer_id(
    ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse | Deferred[InitProducerIdResponse]:
    if request.transactional_id is not None:
        return handle_transactional_init_producer_id(ctx, request)
    producer_id = ctx.broker.producer_ids.take()
    if producer_id is None:  # the block is used up: reserve one on the disk executor
        return Deferred(partial(_reserve_then_take, ctx.broker))
    ctx.broker.metrics.producer_ids_allocated_total += 1
    return _response(ErrorCode.NONE, producer_id, 0)


async def _reserve_then_take(broker: Broker) -> InitProducerIdResponse:
    # Another request may have reserved a block meanwhile, or used one up.
    while (producer_id := broker.producer_ids.take()) is None:
        try:
            await broker.topic_changes.reserve_producer_ids()
        except (ControllerError, OSError) as exc:
            log.error("InitProducerId: no producer id: %s", exc)
            return _response(ErrorCode.UNKNOWN_SERVER_ERROR)
    broker.metrics.producer_ids_allocated_total += 1
    return _response(ErrorCode.NONE, producer_id, 0)


def _response(
    error: ErrorCode, producer_id: int = -1, producer_epoch: int = -1
) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=error, producer_id=producer_id, producer_epoch=producer_epoch
    )
