"""TEMPORARY: the REST admin API's stand-in for the lead's `kafka_gateway.py`
(`HttpCaller`, `http_caller`, `KafkaGateway.send`), with the same interface, to be
replaced by it at merge. Runs a Kafka request as the HTTP caller on this broker: the
API's authorization rule (RULES) for the caller's session, then its handler; a
request for another broker goes over a peer connection as this broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from weir.broker.authorization.rules import RULES
from weir.broker.broker import Broker
from weir.broker.cluster.peer_client import PeerError, PeerPool, peer_security
from weir.broker.handlers.apis import HANDLERS
from weir.broker.handlers.context import EncodedResponse, RequestContext, resolve
from weir.broker.handlers.request_authorization import RequestAuthorization, Session
from weir.broker.http.authentication import PRINCIPAL_SCOPE_KEY
from weir.wire.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)

PEER_TIMEOUT_S = 10.0
CLIENT_ID = "weir-http"


class GatewayError(Exception):
    """The request could not be answered (the broker closed on it, a peer failed)."""


@dataclass(frozen=True)
class HttpCaller:
    session: Session | None


def http_caller(broker: Broker, request: Request) -> HttpCaller:
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY)
    client = request.client
    if principal is None:
        return HttpCaller(None)
    return HttpCaller(Session(principal, client.host if client else "", "HTTP"))


class KafkaGateway:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._peers: PeerPool | None = None
        self._correlation_id = 0

    async def send(
        self,
        caller: HttpCaller,
        api_key: int,
        version: int,
        body: dict[str, Any],
        *,
        node_id: int | None = None,
    ) -> Any:
        broker = self.broker
        if node_id is not None and node_id != broker.config.node_id:
            return await self._send_to_peer(node_id, api_key, version, body)
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        frame = memoryview(encode_request(api_key, version, self._correlation_id, CLIENT_ID, body))[
            4:
        ]
        header = parse_request_header(frame)
        request = decode_request(header, frame)
        context = RequestContext(header, broker)
        complete = None
        if broker.authorizer is not None and caller.session is not None:
            authorization = RequestAuthorization(
                broker.authorizer, caller.session, f"HTTP {api_key}"
            )
            context.authorization = authorization
            gate = RULES[api_key](authorization, context, request)
            if gate.request is None:
                return self._decoded(header.correlation_id, api_key, version, gate.answer)
            request, complete = gate.request, gate.complete
        answer = await resolve(HANDLERS[api_key](context, request))
        if complete is not None and answer is not None:
            answer = complete(answer)
        return self._decoded(header.correlation_id, api_key, version, answer)

    @staticmethod
    def _decoded(correlation_id: int, api_key: int, version: int, answer: object) -> Any:
        if answer is None:
            raise GatewayError(f"the broker did not answer api {api_key} v{version}")
        if isinstance(answer, EncodedResponse):
            encoded = answer.frame
        else:
            encoded = encode_response(api_key, version, correlation_id, answer)
        return decode_response(api_key, version, memoryview(encoded)[4:])[1]

    async def _send_to_peer(
        self, node_id: int, api_key: int, version: int, body: dict[str, Any]
    ) -> Any:
        broker = self.broker
        if self._peers is None:
            self._peers = PeerPool(
                f"{CLIENT_ID}-{broker.config.node_id}",
                frame_bytes_max=broker.config.limits.frame_bytes_max,
                timeout_s=PEER_TIMEOUT_S,
                security=peer_security(broker.config),
            )
        try:
            return await self._peers.request_live(broker.cluster, node_id, api_key, version, body)
        except PeerError as exc:
            raise GatewayError(f"broker {node_id}: {exc}") from exc


_GATEWAYS: dict[int, KafkaGateway] = {}


def gateway_of(broker: Broker) -> KafkaGateway:
    gateway = _GATEWAYS.get(id(broker))
    if gateway is None or gateway.broker is not broker:
        gateway = _GATEWAYS[id(broker)] = KafkaGateway(broker)
    return gateway
