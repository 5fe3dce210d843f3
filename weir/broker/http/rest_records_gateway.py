"""TEMPORARY: a single-node stand-in for the lead's `weir.broker.http.kafka_gateway`
(`KafkaGateway.send`, `leader_of`, `http_caller`), with the same signatures, until
the HTTP foundation lands on main. It runs the handler in process, under the
API's authorization rule for the HTTP principal, as the Kafka listener would."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from weir.broker.authorization.rules import RULES
from weir.broker.broker import Broker
from weir.broker.handlers.apis import HANDLERS
from weir.broker.handlers.context import EncodedResponse, RequestContext, resolve
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.broker.http.authentication import http_authorization
from weir.wire.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)

HttpCaller = RequestAuthorization | None
CORRELATION_ID = 1


def http_caller(broker: Broker, request: Request) -> HttpCaller:
    return http_authorization(broker, request, "HTTP records")


class KafkaGateway:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def send(
        self,
        caller: HttpCaller,
        api_key: int,
        version: int,
        body: dict[str, Any],
        *,
        node_id: int | None = None,
    ) -> Any:
        frame = memoryview(encode_request(api_key, version, CORRELATION_ID, "weir-http", body))[4:]
        header = parse_request_header(frame)
        request = decode_request(header, frame)
        context = RequestContext(header, self.broker)
        complete = None
        answer: Any
        if caller is not None:
            context.authorization = caller
            gate = RULES[api_key](caller, context, request)
            request, complete = gate.request, gate.complete
        if request is None:
            answer = gate.answer
        else:
            answer = await resolve(HANDLERS[api_key](context, request))
            if complete is not None:
                answer = complete(answer)
        if isinstance(answer, EncodedResponse):
            encoded = answer.frame
        else:
            encoded = encode_response(api_key, version, CORRELATION_ID, answer)
        return decode_response(api_key, version, memoryview(encoded)[4:])[1]

    def leader_of(self, topic: str, partition: int) -> int | None:
        return self.broker.config.node_id


_GATEWAYS: dict[int, KafkaGateway] = {}


def gateway_of(broker: Broker) -> KafkaGateway:
    gateway = _GATEWAYS.get(id(broker))
    if gateway is None or gateway.broker is not broker:
        gateway = _GATEWAYS[id(broker)] = KafkaGateway(broker)
    return gateway
