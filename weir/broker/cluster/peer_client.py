"""A broker's own Kafka client of another broker: the follower's connection to a
partition's leader (Fetch with its replica id, OffsetForLeaderEpoch).

One request at a time on one TCP stream; every response frame's size is checked
against `frame_bytes_max` before it is read, and every wait is bounded.
"""

from __future__ import annotations

import functools
import ssl
import struct
from dataclasses import dataclass
from typing import Any

import trio

from weir.broker.config import BrokerConfig
from weir.broker.roles import ClusterRole, live_broker
from weir.format.errors import ErrorCode
from weir.format.primitives import DecodeError
from weir.security.sasl_client import SaslClientError, client_exchange
from weir.wire.api_keys import ApiKey
from weir.wire.messages.security import SaslAuthenticateRequest, SaslHandshakeRequest
from weir.wire.protocol import decode_response, encode_request

_INT32 = struct.Struct(">i")
# One receive at most (a large frame arrives in pieces of this size).
RECEIVE_BYTES_MAX = 1024 * 1024


class PeerError(Exception):
    """The peer is unreachable, closed the connection, or answered nonsense."""


@dataclass(frozen=True)
class PeerSecurity:
    """How this broker connects to the others' inter-broker listener: TLS (trusting
    `ssl_cafile`, checking the peer's name, presenting this broker's own certificate
    when client certificates are asked for) and SASL with the inter-broker user."""

    tls: ssl.SSLContext | None
    sasl_mechanism: str | None
    username: str = ""
    password: str = ""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> PeerSecurity | None:
        """None when the inter-broker listener is PLAINTEXT. Built once per config
        (`peer_security`): its TLS context reads the CA and certificate files."""
        security = config.security
        listeners = config.kafka_listeners
        name = security.inter_broker_listener_name
        listener = next((item for item in listeners if item.name == name), listeners[0])
        protocol = listener.protocol
        if not (protocol.uses_tls or protocol.uses_sasl):
            return None
        tls = None
        if protocol.uses_tls:
            tls = ssl.create_default_context(cafile=security.ssl_cafile or None)
            tls.minimum_version = ssl.TLSVersion.TLSv1_2
            if security.ssl_client_auth != "none":
                tls.load_cert_chain(security.ssl_certfile, security.ssl_keyfile)
        mechanism = security.inter_broker_sasl_mechanism if protocol.uses_sasl else None
        return cls(
            tls, mechanism, security.inter_broker_sasl_username, security.inter_broker_sasl_password
        )


@functools.cache
def peer_security(config: BrokerConfig) -> PeerSecurity | None:
    """The broker's one `PeerSecurity`, shared by every connection it opens to another
    broker (replication, marker writes, KIP-890 checks, the group views)."""
    return PeerSecurity.from_config(config)


class PeerConnection:
    def __init__(self, stream: trio.abc.Stream, client_id: str, *, frame_bytes_max: int) -> None:
        self._stream = stream
        self._client_id = client_id
        self._frame_bytes_max = frame_bytes_max
        self._correlation_id = 0
        self._buffer = bytearray()

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        client_id: str,
        *,
        frame_bytes_max: int,
        timeout_s: float,
        security: PeerSecurity | None = None,
    ) -> PeerConnection:
        stream: trio.abc.Stream
        try:
            with trio.fail_after(timeout_s):
                stream = await trio.open_tcp_stream(host, port)
                if security is not None and security.tls is not None:
                    stream = trio.SSLStream(stream, security.tls, server_hostname=host)
                    await stream.do_handshake()
        except (OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
            raise PeerError(f"cannot connect to {host}:{port}: {exc!r}") from exc
        connection = cls(stream, client_id, frame_bytes_max=frame_bytes_max)
        if security is not None and security.sasl_mechanism is not None:
            try:
                await connection._authenticate(security, security.sasl_mechanism, timeout_s)
            except PeerError:
                await connection.aclose()
                raise
        return connection

    async def _authenticate(self, security: PeerSecurity, mechanism: str, timeout_s: float) -> None:
        """SaslHandshake v1, then SaslAuthenticate v2 rounds of the mechanism."""
        handshake = await self.request(
            ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism), timeout_s
        )
        if handshake.error_code != ErrorCode.NONE:
            raise PeerError(f"SaslHandshake for {mechanism} refused: error {handshake.error_code}")
        try:
            exchange = client_exchange(mechanism, security.username, security.password)
            token: bytes | None = exchange.first()
            while token is not None:
                response = await self.request(
                    ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(token), timeout_s
                )
                if response.error_code != ErrorCode.NONE:
                    raise PeerError(f"{mechanism} login refused: {response.error_message}")
                token = exchange.next(bytes(response.auth_bytes))
        except SaslClientError as exc:
            raise PeerError(f"{mechanism} login: {exc}") from exc

    async def request(self, api_key: int, api_version: int, body: object, timeout_s: float) -> Any:
        """Send one request and return its decoded response body."""
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        frame = encode_request(api_key, api_version, correlation_id, self._client_id, body)
        try:
            with trio.fail_after(timeout_s):
                await self._stream.send_all(frame)
                response = await self._read_frame()
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise PeerError(f"connection lost: {exc}") from exc
        except trio.TooSlowError as exc:
            raise PeerError(f"no answer within {timeout_s:.1f} s") from exc
        try:
            answered_id, decoded = decode_response(api_key, api_version, memoryview(response))
        except DecodeError as exc:
            raise PeerError(f"undecodable response: {exc}") from exc
        if answered_id != correlation_id:
            raise PeerError(f"response to request {answered_id}, expected {correlation_id}")
        return decoded

    async def _read_frame(self) -> bytes:
        size = _INT32.unpack(await self._read_exactly(4))[0]
        if not 4 <= size <= self._frame_bytes_max:
            raise PeerError(f"response frame of {size} bytes")
        return await self._read_exactly(size)

    async def _read_exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:
            chunk = await self._stream.receive_some(
                min(count - len(self._buffer), RECEIVE_BYTES_MAX)
            )
            if not chunk:
                raise PeerError("the peer closed the connection")
            self._buffer += chunk
        taken = bytes(self._buffer[:count])
        del self._buffer[:count]
        return taken

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._stream.aclose()


class PeerPool:
    """One connection per peer broker for a broker's own requests to the others
    (the transaction coordinator's WriteTxnMarkers, a leader's AddPartitionsToTxn
    verification): opened on first use, one request at a time per peer, dropped
    on any failure (the next request opens a new one)."""

    def __init__(
        self,
        client_id: str,
        *,
        frame_bytes_max: int,
        timeout_s: float,
        security: PeerSecurity | None = None,
    ) -> None:
        self._client_id = client_id
        self._security = security
        self._frame_bytes_max = frame_bytes_max
        self._timeout_s = timeout_s
        self._connections: dict[int, PeerConnection] = {}
        self._locks: dict[int, trio.Lock] = {}

    async def request(
        self, node_id: int, address: tuple[str, int], api_key: int, api_version: int, body: object
    ) -> Any:
        """Send one request to broker `node_id` at `address`; PeerError on failure."""
        async with self._locks.setdefault(node_id, trio.Lock()):
            connection = self._connections.get(node_id)
            if connection is None:
                connection = await PeerConnection.open(
                    *address,
                    self._client_id,
                    frame_bytes_max=self._frame_bytes_max,
                    timeout_s=self._timeout_s,
                    security=self._security,
                )
                self._connections[node_id] = connection
            try:
                return await connection.request(api_key, api_version, body, self._timeout_s)
            except PeerError:
                self._connections.pop(node_id, None)
                await connection.aclose()
                raise

    async def request_live(
        self,
        cluster: ClusterRole | None,
        node_id: int,
        api_key: int,
        api_version: int,
        body: object,
    ) -> Any:
        """`request` to broker `node_id` at its address while it is live; PeerError
        when it is not (or there is no cluster)."""
        peer = None if cluster is None else live_broker(cluster, node_id)
        if peer is None:
            raise PeerError(f"broker {node_id} is not live")
        return await self.request(node_id, (peer.host, peer.port), api_key, api_version, body)

    async def aclose(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.aclose()
