"""A small blocking Kafka-protocol client: one socket to one broker.

On connect it sends ApiVersions and, for every API, picks the highest version
that the broker advertises, the wire layer declares (served by Weir or not: the
transaction admin APIs are declared before Weir serves them) and this CLI's
request bodies are written for. Every request has a deadline; connection failures and
bad frames become `BrokerConnectionError` / `BrokerProtocolError` with one-line messages.
"""

from __future__ import annotations

import importlib.metadata
import socket
import ssl
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from weir.cli.client_security import PLAINTEXT, ClientSecurity, authenticate, ssl_context
from weir.cli.errors import BrokerConnectionError, BrokerProtocolError
from weir.format.errors import ErrorCode
from weir.wire.protocol import (
    DECLARED_APIS,
    SUPPORTED_VERSIONS,
    ApiKey,
    DecodeError,
    decode_response,
    encode_request,
)

CLIENT_ID = "weir-cli"
CLIENT_SOFTWARE_NAME = "weir-cli"
CLIENT_SOFTWARE_VERSION_UNKNOWN = "0.0.0"
DEFAULT_PORT = 9092
RESPONSE_BYTES_MAX = 128 * 1024 * 1024
SIZE_PREFIX = struct.Struct(">i")
HTTP_RESPONSE_START = b"HTTP"
# A Kafka broker answers ApiVersions at once: a port that does not is not a Kafka one.
HANDSHAKE_TIMEOUT_MS = 5_000
NOT_KAFKA_HINT = " (is it a Kafka port? check --bootstrap)"
FIRST_BYTES_SHOWN = 40
FIRST_BYTES_WAIT_S = 0.2

# The version ranges this CLI's request bodies and response readers are written for.
# Lower bounds: Metadata v4 can refuse auto-creation; Produce v3 / Fetch v4 carry
# RecordBatch v2; ListOffsets v1 has the single-offset shape. Upper bounds stop
# before field changes the CLI does not follow (Fetch v13 and Produce v13 name
# topics by id).
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 12),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (4, 12),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_FETCH: (2, 7),  # one group per request, null topics = all
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),  # `weir queue`
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (1, 1),  # v1: the lag
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.WRITE_TXN_MARKERS: (1, 2),  # Kafka 4 refuses v0
    ApiKey.SASL_HANDSHAKE: (1, 1),  # v1: the tokens then travel in SaslAuthenticate
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_ACLS: (1, 3),  # `weir acl`; Kafka 4 refuses v0 (KIP-896)
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),  # `weir user`
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    """`HOST:PORT` (or `HOST`, port 9092; `[v6addr]:PORT`) -> Address; ValueError if malformed."""
    text = text.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"malformed address {text!r}")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, ""
    if not host:
        raise ValueError(f"missing host in {text!r}")
    if not port_text:
        return Address(host, DEFAULT_PORT)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad port in {text!r}")
    return Address(host, int(port_text))


def parse_bootstrap(text: str) -> list[Address]:
    """`HOST:PORT[,HOST:PORT...]` (as kcat's -b) -> addresses; ValueError if any is
    malformed."""
    parts = [part for part in text.split(",") if part.strip()]
    if not parts:
        raise ValueError("no address given")
    return [parse_address(part) for part in parts]


def client_software_version() -> str:
    """The installed weir version, for ApiVersions v3+ (KIP-511)."""
    try:
        return importlib.metadata.version("weir")
    except importlib.metadata.PackageNotFoundError:
        return CLIENT_SOFTWARE_VERSION_UNKNOWN


def api_name(api_key: int) -> str:
    try:
        return "".join(part.title() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"api {api_key}"


def _tls_wrap(sock: socket.socket, address: Address, security: ClientSecurity) -> socket.socket:
    """The TLS handshake over a connected socket; BrokerConnectionError if it fails."""
    context = ssl_context(security)
    try:
        return context.wrap_socket(sock, server_hostname=address.host)
    except ssl.SSLCertVerificationError as exc:
        sock.close()
        raise BrokerConnectionError(
            f"TLS to broker at {address}: its certificate is not trusted ({exc.verify_message})"
        ) from None
    except (ssl.SSLError, OSError) as exc:
        sock.close()
        raise BrokerConnectionError(
            f"TLS handshake with broker at {address} failed: {exc} (is it a TLS port?)"
        ) from None


class KafkaClient:
    """One blocking connection to one broker. Use `KafkaClient.connect(...)`."""

    def __init__(self, address: Address, sock: socket.socket, request_timeout_ms: int) -> None:
        self.address = address
        self.request_timeout_ms = request_timeout_ms
        self._sock: socket.socket | None = sock
        self._correlation_id = 0
        self.broker_versions: dict[int, tuple[int, int]] = {}

    @classmethod
    def connect(
        cls,
        address: Address,
        *,
        request_timeout_ms: int,
        security: ClientSecurity = PLAINTEXT,
    ) -> KafkaClient:
        """Open the socket (over TLS if `security` says so), negotiate versions, and
        authenticate (SASL) if `security` says so.

        Raises BrokerConnectionError, BrokerProtocolError or AuthenticationError with a
        one-line message."""
        try:
            sock = socket.create_connection(
                (address.host, address.port), timeout=request_timeout_ms / 1000
            )
        except socket.gaierror:
            raise BrokerConnectionError(f"cannot resolve broker host '{address.host}'") from None
        except ConnectionRefusedError:
            raise BrokerConnectionError(
                f"cannot connect to broker at {address}: connection refused"
            ) from None
        except TimeoutError:
            raise BrokerConnectionError(
                f"cannot connect to broker at {address}: no answer within {request_timeout_ms} ms"
            ) from None
        except OSError as exc:
            raise BrokerConnectionError(
                f"cannot connect to broker at {address}: {exc.strerror or exc}"
            ) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if security.uses_tls:
            sock = _tls_wrap(sock, address, security)
        client = cls(address, sock, min(request_timeout_ms, HANDSHAKE_TIMEOUT_MS))
        try:
            client._negotiate_versions()
        except BrokerConnectionError as exc:
            client.close()
            raise BrokerConnectionError(f"{exc.message}{NOT_KAFKA_HINT}") from None
        except BaseException:
            client.close()
            raise
        client.request_timeout_ms = request_timeout_ms
        if security.uses_sasl:
            try:
                authenticate(client.request, security, str(address))
            except BaseException:
                client.close()
                raise
        return client

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # -- versions ------------------------------------------------------------------------------

    def version(self, api_key: int) -> int:
        """The highest version of `api_key` both sides support; BrokerProtocolError if none."""
        ours = CLIENT_VERSIONS.get(api_key)
        declared = DECLARED_APIS.get(api_key)
        wire = None if declared is None else declared.versions
        broker = self.broker_versions.get(api_key)
        if ours is None or wire is None:
            raise BrokerProtocolError(f"this client does not implement {api_name(api_key)}")
        if broker is None:
            raise BrokerProtocolError(
                f"broker at {self.address} does not support {api_name(api_key)}"
            )
        low = max(ours[0], wire[0], broker[0])
        high = min(ours[1], wire[1], broker[1])
        if low > high:
            raise BrokerProtocolError(
                f"broker at {self.address} supports {api_name(api_key)} v{broker[0]}-v{broker[1]}, "
                f"this client v{max(ours[0], wire[0])}-v{min(ours[1], wire[1])}"
            )
        return high

    def _negotiate_versions(self) -> None:
        ours = CLIENT_VERSIONS[ApiKey.API_VERSIONS]
        wire = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
        version = min(ours[1], wire[1])
        body = self._api_versions(version)
        if body.get("error_code", 0) == ErrorCode.UNSUPPORTED_VERSION:
            # KIP-511: the broker answered in v0 with its own ApiVersions range; retry within it.
            advertised = {int(k["api_key"]): int(k["max_version"]) for k in body["api_keys"]}
            version = min(version, advertised.get(ApiKey.API_VERSIONS, 0))
            body = self._api_versions(version)
        error = body.get("error_code", 0)
        if error != ErrorCode.NONE:
            raise BrokerProtocolError(
                f"broker at {self.address} refused ApiVersions v{version} (error code {error})"
            )
        self.broker_versions = {
            int(k["api_key"]): (int(k["min_version"]), int(k["max_version"]))
            for k in body["api_keys"]
        }

    def _api_versions(self, version: int) -> Any:
        body = {
            "client_software_name": CLIENT_SOFTWARE_NAME,
            "client_software_version": client_software_version(),
        }
        frame = self._roundtrip_frame(ApiKey.API_VERSIONS, version, body, wait_ms=0)
        try:
            _, response = self._decode(ApiKey.API_VERSIONS, version, frame)
            if response.get("error_code", 0) != ErrorCode.UNSUPPORTED_VERSION or version == 0:
                return response
        except BrokerProtocolError:
            if version == 0:
                raise
        # An UNSUPPORTED_VERSION answer is always encoded as v0, whatever was asked.
        _, response = self._decode(ApiKey.API_VERSIONS, 0, frame)
        return response

    # -- requests ------------------------------------------------------------------------------

    def request(self, api_key: int, body: Mapping[str, Any], *, wait_ms: int = 0) -> Any:
        """Send one request at the negotiated version and return the decoded response body.

        `wait_ms` is how long the broker may legitimately hold the request (Fetch's
        max_wait_ms, Produce's timeout); it is added to the request timeout.
        """
        version = self.version(api_key)
        frame = self._roundtrip_frame(api_key, version, body, wait_ms=wait_ms)
        try:
            correlation_id, response = self._decode(api_key, version, frame)
        except BrokerProtocolError:
            self.close()
            raise
        if correlation_id != self._correlation_id:
            self.close()
            raise BrokerProtocolError(
                f"broker at {self.address} answered correlation id {correlation_id}, "
                f"expected {self._correlation_id}"
            )
        return response

    def send_without_response(self, api_key: int, body: Mapping[str, Any]) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        version = self.version(api_key)
        self._send(api_key, version, body)

    def _roundtrip_frame(
        self, api_key: int, version: int, body: Mapping[str, Any], *, wait_ms: int
    ) -> bytes:
        deadline = time.monotonic() + (self.request_timeout_ms + max(wait_ms, 0)) / 1000
        try:
            self._send(api_key, version, body)
            size_bytes = self._receive_exactly(SIZE_PREFIX.size, deadline, api_key)
            (size,) = SIZE_PREFIX.unpack(size_bytes)
            if size_bytes == HTTP_RESPONSE_START:
                raise BrokerProtocolError(
                    f"{self.address} answered in HTTP, not the Kafka protocol "
                    "(is that the broker's HTTP port, or a proxy?)"
                )
            if not SIZE_PREFIX.size <= size <= RESPONSE_BYTES_MAX and (
                api_key == ApiKey.API_VERSIONS
            ):
                raise BrokerProtocolError(
                    f"{self.address} does not speak the Kafka protocol: it answered "
                    f"{self._first_bytes(size_bytes)}{NOT_KAFKA_HINT}"
                )
            if not SIZE_PREFIX.size <= size <= RESPONSE_BYTES_MAX:
                raise BrokerProtocolError(
                    f"broker at {self.address} answered {api_name(api_key)} with a frame of "
                    f"{size} bytes (allowed: 4..{RESPONSE_BYTES_MAX})"
                )
            return self._receive_exactly(size, deadline, api_key)
        except BaseException:
            # A failed or interrupted (Ctrl-C) exchange leaves the stream out of step.
            self.close()
            raise

    def _first_bytes(self, start: bytes) -> str:
        """What a non-Kafka server said first (the size prefix and what follows, read
        without waiting), for the error message."""
        sock = self._require_socket()
        more = b""
        try:
            sock.settimeout(FIRST_BYTES_WAIT_S)
            more = sock.recv(FIRST_BYTES_SHOWN)
        except OSError:
            pass
        shown = (start + more)[:FIRST_BYTES_SHOWN]
        return repr("".join(chr(b) if 0x20 <= b < 0x7F else "." for b in shown))

    def _send(self, api_key: int, version: int, body: Mapping[str, Any]) -> None:
        sock = self._require_socket()
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, version, self._correlation_id, CLIENT_ID, body)
        try:
            sock.settimeout(self.request_timeout_ms / 1000)
            sock.sendall(frame)
        except TimeoutError:
            self.close()
            raise BrokerConnectionError(
                f"broker at {self.address} did not accept {api_name(api_key)} "
                f"within {self.request_timeout_ms} ms"
            ) from None
        except (ConnectionResetError, BrokenPipeError):
            self.close()
            raise self._closed(api_key) from None
        except OSError as exc:
            self.close()
            raise BrokerConnectionError(
                f"connection to broker at {self.address} failed: {exc.strerror or exc}"
            ) from None

    def _receive_exactly(self, count: int, deadline: float, api_key: int) -> bytes:
        sock = self._require_socket()
        buffer = bytearray(count)
        view = memoryview(buffer)
        received = 0
        while received < count:
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                raise self._timed_out(api_key)
            try:
                sock.settimeout(remaining_s)
                n = sock.recv_into(view[received:], count - received)
            except TimeoutError:
                raise self._timed_out(api_key) from None
            except ConnectionResetError:
                raise self._closed(api_key) from None
            except OSError as exc:
                raise BrokerConnectionError(
                    f"connection to broker at {self.address} failed: {exc.strerror or exc}"
                ) from None
            if n == 0:
                raise self._closed(api_key)
            received += n
        return bytes(buffer)

    def _closed(self, api_key: int) -> BrokerConnectionError:
        return BrokerConnectionError(
            f"broker at {self.address} closed the connection (during {api_name(api_key)})"
        )

    def _timed_out(self, api_key: int) -> BrokerConnectionError:
        return BrokerConnectionError(
            f"broker at {self.address} did not answer {api_name(api_key)} "
            f"within {self.request_timeout_ms} ms"
        )

    def _decode(self, api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
        try:
            correlation_id, body = decode_response(api_key, version, memoryview(frame))
        except DecodeError as exc:
            raise BrokerProtocolError(
                f"broker at {self.address} sent a malformed {api_name(api_key)} "
                f"v{version} response: {exc}"
            ) from None
        # The commands read responses as mappings of the version's own fields.
        return correlation_id, DECLARED_APIS[api_key].response.as_container(body, version)

    def _require_socket(self) -> socket.socket:
        if self._sock is None:
            raise BrokerConnectionError(f"connection to broker at {self.address} is closed")
        return self._sock
