"""Kafka requests made by the HTTP APIs (REST, SQS-compatible, push, console): any
served Kafka API, run as the HTTP caller's principal under the Kafka listener's own
authorization rules, on the broker that serves it.

The HTTP APIs have no private way into the broker: what a REST call, an SQS action
or a console page does is one or more Kafka requests, so their ACLs, validation,
leadership checks and errors are exactly the Kafka API's, and a request made to
any broker of a cluster reaches the one that can answer it:

1. the caller: `http_caller` takes the principal the HTTP authentication put in
   the request's scope (ANONYMOUS when security is on but the listener let the
   request in without credentials); with no authorizer there is no session and
   everything is allowed, as on the Kafka listener; `BROKER`, the broker's own work
   for an authorized request (push deliveries), is allowed everything, as the
   inter-broker user is;
2. the request is encoded and decoded as the wire does (so a malformed body fails
   here as it would there), then the API's rule (`RULES`) is applied for the
   caller's session, on this broker, whichever broker runs it: the gate may
   refuse the whole request or take out what the caller may not touch;
3. it runs on this broker (`node_id` None or this broker's id) through the same
   handler the Kafka listener uses, admin requests audited as there; or on broker
   `node_id` over an inter-broker connection (the broker's own principal, which is
   a super user: the caller was authorized in step 2);
4. the answer comes back decoded from its bytes, with the gate's completion (the
   refused resources' error entries) added.

Client quotas do not apply to HTTP callers (the HTTP listener has no throttle to
answer with). A peer connection carries one request at a time, so each peer has a
small pool of them (`CONNECTIONS_PER_PEER_MAX`): a long ShareFetch wait does not
hold up the other HTTP calls to that broker.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Any

import trio
from starlette.requests import Request

from weir.broker.authorization.audit import ADMIN_API_KEYS, audit_admin_request
from weir.broker.authorization.rules import RULES
from weir.broker.broker import Broker
from weir.broker.cluster.peer_client import PeerConnection, PeerError, peer_security
from weir.broker.handlers.apis import HANDLERS
from weir.broker.handlers.context import (
    ClientConnection,
    EncodedResponse,
    RequestContext,
    resolve,
)
from weir.broker.handlers.request_authorization import RequestAuthorization, Session
from weir.broker.http.authentication import PRINCIPAL_SCOPE_KEY
from weir.broker.roles import live_broker
from weir.controller.partition_state import NO_LEADER
from weir.security.principal import ANONYMOUS, KafkaPrincipal
from weir.wire.api_keys import ApiKey
from weir.wire.protocol import (
    DecodeError,
    EncodeError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    is_supported,
    parse_request_header,
)

log = logging.getLogger(__name__)

# The listener name HTTP callers' sessions and audit lines carry.
HTTP_LISTENER = "HTTP"
# Concurrent requests to one peer broker: each has its own connection (a peer
# connection carries one request at a time). 16 is well above what the HTTP APIs
# keep in flight per peer in normal use and bounds descriptors if a peer is slow.
CONNECTIONS_PER_PEER_MAX = 16
# How long a request to a peer may take beyond its own wait (a ShareFetch's or a
# Fetch's MaxWaitMs): a produce waiting for acks=all, a write to etcd.
PEER_TIMEOUT_S = 30.0
CLIENT_ID = "weir-http"


class GatewayError(Exception):
    """The request could not be run: refused as a whole (no rule for the API, an
    unsupported version, a malformed body), or the broker that serves it is not live
    or did not answer. `retriable` when another attempt may succeed."""

    def __init__(self, message: str, *, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable


@dataclass(frozen=True)
class HttpCaller:
    """Who an HTTP request runs as: a session when an authorizer is on, else None
    (everything allowed, as on the Kafka listener with no authorizer). `BROKER` is
    the broker itself, for work it does on its own once an authorized caller asked
    for it (push deliveries of a subscription whose creator was checked): like the
    inter-broker user, it is not checked against ACLs."""

    session: Session | None
    is_broker: bool = False

    @property
    def principal(self) -> KafkaPrincipal | None:
        return None if self.session is None else self.session.principal


BROKER = HttpCaller(None, is_broker=True)


def http_caller(broker: Broker, request: Request) -> HttpCaller:
    if broker.authorizer is None:
        return HttpCaller(None)
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY)
    if not isinstance(principal, KafkaPrincipal):
        principal = ANONYMOUS
    client = request.client
    return HttpCaller(Session(principal, client.host if client is not None else "", HTTP_LISTENER))


class KafkaGateway:
    """One per broker (`gateway_of`): see the module's steps."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._peers = _PeerConnections(broker)

    async def send(
        self,
        caller: HttpCaller,
        api_key: int,
        version: int,
        body: object,
        *,
        node_id: int | None = None,
        wait_ms: int = 0,
    ) -> Any:
        """Run one Kafka request as `caller` (steps 2-4); `body` is the request's
        generated class or a mapping of its fields. `wait_ms`: how long the request
        itself may wait (its MaxWaitMs), added to a peer's answer timeout.
        Raises GatewayError."""
        if not is_supported(api_key, version):
            raise GatewayError(f"{_api_name(api_key)} v{version} is not served")
        try:
            frame = memoryview(encode_request(api_key, version, 0, CLIENT_ID, body))[4:]
        except EncodeError as exc:
            raise GatewayError(f"malformed {_api_name(api_key)} request: {exc}") from exc
        header = parse_request_header(frame)
        try:
            request = decode_request(header, frame)
        except DecodeError as exc:
            raise GatewayError(f"malformed {_api_name(api_key)} request: {exc}") from exc
        connection = ClientConnection(HTTP_LISTENER)
        connection.session = caller.session
        context = RequestContext(
            header,
            self.broker,
            "" if caller.session is None else f"/{caller.session.client_address}",
            connection,
        )
        complete = None
        if self.broker.authorizer is not None and not caller.is_broker:
            gate = self._authorize(caller, context, request)
            if gate.request is None:
                return _decoded(api_key, version, gate.answer)
            request, complete = gate.request, gate.complete
        if api_key in ADMIN_API_KEYS:
            audit_admin_request(api_key, _api_name(api_key), caller.session, request)
        if node_id is None or node_id == self.broker.config.node_id:
            answer = await self._run_here(context, request)
        else:
            answer = await self._peers.request(node_id, api_key, version, request, wait_ms)
        if complete is not None:
            answer = complete(answer)
        return answer

    def _authorize(self, caller: HttpCaller, context: RequestContext, request: object) -> Any:
        api_key = context.header.api_key
        rule = RULES.get(api_key)
        if rule is None or caller.session is None or self.broker.authorizer is None:
            raise GatewayError(f"{_api_name(api_key)} has no authorization rule")
        authorization = RequestAuthorization(
            self.broker.authorizer, caller.session, _api_name(api_key)
        )
        context.authorization = authorization
        return rule(authorization, context, request)

    async def _run_here(self, context: RequestContext, request: object) -> Any:
        api_key, version = context.header.api_key, context.header.api_version
        handler = HANDLERS.get(api_key)
        if handler is None:
            raise GatewayError(f"{_api_name(api_key)} is not served")
        self.broker.metrics.requests_total[_api_name(api_key)] += 1
        try:
            body = await resolve(handler(context, request))
        except Exception as exc:
            log.exception("handler for %s (HTTP) failed", _api_name(api_key))
            self.broker.metrics.request_errors_total[_api_name(api_key)] += 1
            raise GatewayError(f"{_api_name(api_key)} failed: {exc}") from exc
        if isinstance(body, EncodedResponse):  # Produce encodes its own response
            return decode_response(api_key, version, memoryview(body.frame)[4:])[1]
        return _decoded(api_key, version, body)

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The partition's leader now (None: unknown topic or partition, or no leader)."""
        record = self.broker.controller.topic(topic)
        if record is None or not 0 <= partition < record.partition_count:
            return None
        cluster = self.broker.cluster
        if cluster is None:
            return self.broker.config.node_id
        leader = cluster.partition_state(record, partition).leader
        return None if leader == NO_LEADER else leader

    async def coordinator_of(self, caller: HttpCaller, key: str, key_type: int = 0) -> int | None:
        """The coordinator of a group (`key_type` 0), a transactional id (1) or a share
        group's state (2), as FindCoordinator answers `caller`; None when it has none."""
        response = await self.send(
            caller,
            ApiKey.FIND_COORDINATOR,
            4,
            {"key_type": key_type, "coordinator_keys": [key]},
        )
        for coordinator in response.coordinators:
            if coordinator.error_code == 0:
                return int(coordinator.node_id)
        return None

    def controller_id(self) -> int:
        cluster = self.broker.cluster
        return self.broker.config.node_id if cluster is None else cluster.controller_id

    async def aclose(self) -> None:
        await self._peers.aclose()


class _PeerConnections:
    """Up to CONNECTIONS_PER_PEER_MAX connections per peer, reused while healthy and
    dropped on any failure."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._idle: dict[int, list[PeerConnection]] = {}
        self._slots: dict[int, trio.Semaphore] = {}

    async def request(
        self, node_id: int, api_key: int, version: int, request: object, wait_ms: int
    ) -> Any:
        cluster = self._broker.cluster
        peer = None if cluster is None else live_broker(cluster, node_id)
        if peer is None:
            raise GatewayError(f"broker {node_id} is not live", retriable=True)
        timeout_s = PEER_TIMEOUT_S + max(wait_ms, 0) / 1000
        slots = self._slots.setdefault(node_id, trio.Semaphore(CONNECTIONS_PER_PEER_MAX))
        async with slots:
            idle = self._idle.setdefault(node_id, [])
            try:
                connection = idle.pop() if idle else await self._open(peer.host, peer.port)
            except PeerError as exc:
                raise GatewayError(f"broker {node_id}: {exc}", retriable=True) from exc
            try:
                answer = await connection.request(api_key, version, request, timeout_s)
            except PeerError as exc:
                await connection.aclose()
                raise GatewayError(f"broker {node_id}: {exc}", retriable=True) from exc
            except BaseException:
                await connection.aclose()  # cancelled mid-request: the stream is unusable
                raise
            idle.append(connection)
            return answer

    async def _open(self, host: str, port: int) -> PeerConnection:
        config = self._broker.config
        return await PeerConnection.open(
            host,
            port,
            f"{CLIENT_ID}-{config.node_id}",
            frame_bytes_max=config.limits.frame_bytes_max,
            timeout_s=PEER_TIMEOUT_S,
            security=peer_security(config),
        )

    async def aclose(self) -> None:
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await connection.aclose()


def _decoded(api_key: int, version: int, body: object) -> Any:
    """A handler's response as a client would decode it from its bytes."""
    encoded = encode_response(api_key, version, 0, body)
    return decode_response(api_key, version, memoryview(encoded)[4:])[1]


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API {api_key}"


_GATEWAYS: weakref.WeakKeyDictionary[Broker, KafkaGateway] = weakref.WeakKeyDictionary()


def gateway_of(broker: Broker) -> KafkaGateway:
    """The broker's one gateway, made on first use."""
    gateway = _GATEWAYS.get(broker)
    if gateway is None:
        gateway = _GATEWAYS[broker] = KafkaGateway(broker)
    return gateway
