"""Hostile and broken clients on raw sockets: the broker answers with an error or closes
the connection, never crashes, never allocates by an untrusted length, and keeps serving.

Requests are encoded by hand with struct (not with weir.wire) so these tests check the
bytes on the wire against Kafka's protocol, independently of the broker's own schemas.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from compat_tests.harness import WeirProcess

API_VERSIONS = 18
METADATA = 3
UNSUPPORTED_VERSION = 35
IO_TIMEOUT_S = 5.0
RSS_GROWTH_MAX_BYTES = 64 * 1024 * 1024


# -- encoding by hand --------------------------------------------------------------------------


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def compact_string(text: str) -> bytes:
    data = text.encode()
    return uvarint(len(data) + 1) + data


def request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str = "hostile",
    *,
    flexible: bool,
) -> bytes:
    client = client_id.encode()
    header = struct.pack(">hhih", api_key, api_version, correlation_id, len(client)) + client
    return header + (b"\x00" if flexible else b"")  # header v2 adds empty tagged fields


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def api_versions_v0(correlation_id: int) -> bytes:
    return frame(request_header(API_VERSIONS, 0, correlation_id, flexible=False))


def api_versions_flexible(correlation_id: int, version: int) -> bytes:
    body = compact_string("weir-hostile-tests") + compact_string("1.0") + b"\x00"
    return frame(request_header(API_VERSIONS, version, correlation_id, flexible=True) + body)


# -- decoding by hand --------------------------------------------------------------------------


def recv_exact(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {count} bytes")
        data += chunk
    return bytes(data)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    assert 0 <= size < 1 << 20, f"implausible response size {size}"
    return recv_exact(sock, size)


def parse_api_versions_v0(payload: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """(correlation_id, error_code, {api_key: (min, max)}); asserts nothing is left over."""
    correlation_id, error_code, count = struct.unpack_from(">ihi", payload, 0)
    pos = 10
    assert 0 <= count < 1000, f"implausible api count {count}"
    ranges: dict[int, tuple[int, int]] = {}
    for _ in range(count):
        api_key, low, high = struct.unpack_from(">hhh", payload, pos)
        pos += 6
        ranges[api_key] = (low, high)
    assert pos == len(payload), f"{len(payload) - pos} unexpected trailing bytes in v0 response"
    return correlation_id, error_code, ranges


def read_uvarint(payload: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = payload[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def skip_tagged_fields(payload: bytes, pos: int) -> int:
    count, pos = read_uvarint(payload, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(payload, pos)
        size, pos = read_uvarint(payload, pos)
        pos += size
    return pos


def parse_api_versions_v3(payload: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """ApiVersions v3 response (response header v0, flexible body)."""
    correlation_id, error_code = struct.unpack_from(">ih", payload, 0)
    count_plus_one, pos = read_uvarint(payload, 6)
    ranges: dict[int, tuple[int, int]] = {}
    for _ in range(count_plus_one - 1):
        api_key, low, high = struct.unpack_from(">hhh", payload, pos)
        pos = skip_tagged_fields(payload, pos + 6)
        ranges[api_key] = (low, high)
    (_throttle_time_ms,) = struct.unpack_from(">i", payload, pos)
    pos = skip_tagged_fields(payload, pos + 4)
    assert pos == len(payload), f"{len(payload) - pos} unexpected trailing bytes in v3 response"
    return correlation_id, error_code, ranges


# -- connections -------------------------------------------------------------------------------


@contextlib.contextmanager
def connect(broker: WeirProcess) -> Iterator[socket.socket]:
    sock = socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=IO_TIMEOUT_S)
    try:
        yield sock
    finally:
        sock.close()


def closed_by_peer(sock: socket.socket, timeout_s: float = IO_TIMEOUT_S) -> bool:
    """True if the broker closes the connection within `timeout_s` (any bytes it sends first
    are ignored); False if it is still open then."""
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        sock.settimeout(remaining)
        try:
            if not sock.recv(65536):
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False


def response_or_close(sock: socket.socket) -> bytes | None:
    """The next response frame, or None if the broker closed the connection. Neither within
    the socket timeout (no answer, connection left hanging) fails the test."""
    try:
        return recv_frame(sock)
    except ConnectionError:
        return None
    except TimeoutError:
        pytest.fail(f"no response and no close within {IO_TIMEOUT_S}s")


def assert_serves_api_versions(broker: WeirProcess) -> dict[int, tuple[int, int]]:
    """A fresh connection gets a correct ApiVersions v0 answer (the broker is healthy)."""
    assert broker.is_running(), f"broker died:\n{broker.stderr_text()}"
    with connect(broker) as sock:
        sock.sendall(api_versions_v0(4242))
        correlation_id, error_code, ranges = parse_api_versions_v0(recv_frame(sock))
    assert (correlation_id, error_code) == (4242, 0)
    assert API_VERSIONS in ranges and ranges[API_VERSIONS][0] == 0
    assert ranges[API_VERSIONS][1] >= 3
    return ranges


@pytest.fixture
def broker(module_broker: WeirProcess) -> WeirProcess:
    """Every test here shares one broker of its own and leaves it healthy."""
    assert_serves_api_versions(module_broker)
    return module_broker


# -- the tests ---------------------------------------------------------------------------------


def test_api_versions_v0_and_v3_answer_with_the_same_ranges(broker: WeirProcess) -> None:
    ranges_v0 = assert_serves_api_versions(broker)
    with connect(broker) as sock:
        sock.sendall(api_versions_flexible(7, 3))
        correlation_id, error_code, ranges_v3 = parse_api_versions_v3(recv_frame(sock))
    assert (correlation_id, error_code) == (7, 0)
    assert ranges_v3 == ranges_v0
    for api_key in (0, 1, 2, 3, 18):  # Produce, Fetch, ListOffsets, Metadata, ApiVersions
        assert api_key in ranges_v0, f"api key {api_key} not advertised"


def test_unsupported_api_versions_version_gets_v0_unsupported_version_and_ranges(
    broker: WeirProcess,
) -> None:
    supported = assert_serves_api_versions(broker)
    with connect(broker) as sock:
        sock.sendall(api_versions_flexible(99, 32000))
        correlation_id, error_code, ranges = parse_api_versions_v0(recv_frame(sock))
        assert (correlation_id, error_code) == (99, UNSUPPORTED_VERSION)
        assert ranges == supported
        # KIP-511: the client then retries with a version it knows, on the same connection.
        sock.sendall(api_versions_v0(100))
        correlation_id, error_code, ranges = parse_api_versions_v0(recv_frame(sock))
        assert (correlation_id, error_code, ranges) == (100, 0, supported)


def test_http_request_on_kafka_port_closes_connection(broker: WeirProcess) -> None:
    with connect(broker) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")  # size prefix 0x47455420
        assert closed_by_peer(sock), "connection left open after an HTTP request"
    assert_serves_api_versions(broker)


def test_random_garbage_then_eof_is_survived(broker: WeirProcess) -> None:
    rng = random.Random(20240611)
    for _ in range(5):
        with connect(broker) as sock:
            sock.sendall(rng.randbytes(4096))
            sock.shutdown(socket.SHUT_WR)
            assert closed_by_peer(sock), "connection left open after garbage and EOF"
    assert_serves_api_versions(broker)


def test_valid_size_with_garbage_payload_is_survived(broker: WeirProcess) -> None:
    rng = random.Random(7)
    for i in range(20):
        payload = rng.randbytes(64)
        if i % 2:  # a plausible header (Metadata v1) followed by garbage
            payload = request_header(METADATA, 1, i, flexible=False) + payload
        with connect(broker) as sock:
            sock.sendall(frame(payload))
            sock.shutdown(socket.SHUT_WR)
            assert closed_by_peer(sock), "connection left open after a garbage frame and EOF"
    assert_serves_api_versions(broker)


@pytest.mark.parametrize(
    "size",
    [2**31 - 1, -1, -(2**31), 0, 3],
    ids=["int32-max", "minus-one", "int32-min", "zero", "three"],
)
def test_out_of_range_size_prefix_closes_connection_at_once(broker: WeirProcess, size: int) -> None:
    rss_before = broker.rss_bytes()
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", size) + b"\x00" * 16)
        assert closed_by_peer(sock), f"connection left open after size prefix {size}"
    assert broker.rss_bytes() - rss_before < RSS_GROWTH_MAX_BYTES
    assert_serves_api_versions(broker)


def test_a_connection_the_broker_closes_is_counted_by_its_reason(broker: WeirProcess) -> None:
    def closed(reason: str) -> float:
        samples = broker.metric_samples("weir_connections_closed_by_broker_total")
        return samples.get(f'reason="{reason}"', 0.0)

    def served_once(sock: socket.socket) -> None:
        """The broker has answered on `sock`: it was not refused at accept
        (connection limits), which closes without these reasons."""
        sock.sendall(api_versions_v0(1))
        assert parse_api_versions_v0(recv_frame(sock))[1] == 0

    frame_size_before, request_before = closed("frame_size"), closed("request")
    with connect(broker) as sock:
        served_once(sock)
        sock.sendall(struct.pack(">i", 2**31 - 1))
        assert closed_by_peer(sock)
    with connect(broker) as sock:
        served_once(sock)
        sock.sendall(frame(request_header(METADATA, 1, 7, flexible=False) + b"\xff" * 3))
        assert closed_by_peer(sock)
    assert closed("frame_size") == frame_size_before + 1
    assert closed("request") == request_before + 1


def test_truncated_frame_then_close_is_survived(broker: WeirProcess) -> None:
    for cut in (1, 3, 4, 9, 14):
        request = api_versions_v0(cut)
        with connect(broker) as sock:
            sock.sendall(request[:cut])
        # and a frame that promises more than it sends
        with connect(broker) as sock:
            sock.sendall(struct.pack(">i", 1000) + request[4:])
    assert_serves_api_versions(broker)


def test_unknown_api_key_gets_error_or_close_and_broker_keeps_serving(broker: WeirProcess) -> None:
    for api_key in (9999, 32767, -1):
        with connect(broker) as sock:
            sock.sendall(frame(request_header(api_key, 0, 55, flexible=False)))
            response = response_or_close(sock)
            if response is not None:
                (correlation_id,) = struct.unpack_from(">i", response)
                assert correlation_id == 55
    assert_serves_api_versions(broker)


def test_unsupported_version_of_known_api_gets_error_or_close(broker: WeirProcess) -> None:
    with connect(broker) as sock:
        sock.sendall(frame(request_header(METADATA, 32000, 56, flexible=True) + b"\x00" * 8))
        response = response_or_close(sock)
        if response is not None:
            assert struct.unpack_from(">i", response)[0] == 56
    assert_serves_api_versions(broker)


def metadata_with_topic_count(version: int, correlation_id: int, count: int) -> bytes:
    flexible = version >= 9
    header = request_header(METADATA, version, correlation_id, flexible=flexible)
    topics = uvarint(count + 1) if flexible else struct.pack(">i", count)
    return frame(header + topics)  # the promised topics (and the rest of the body) never come


@pytest.mark.parametrize("flexible", [False, True], ids=["classic", "flexible"])
def test_huge_array_count_in_metadata_request_is_rejected_without_allocation(
    broker: WeirProcess, flexible: bool
) -> None:
    ranges = assert_serves_api_versions(broker)
    low, high = ranges[METADATA]
    version = high if flexible else min(max(low, 1), 8)
    if flexible:
        assert high >= 9, f"Metadata {low}-{high}: no flexible version advertised"
    else:
        assert low <= 8, f"Metadata {low}-{high}: no classic version advertised"
    rss_before = broker.rss_bytes()
    for count in (2**31 - 1, 2**30, 100_000_000):
        with connect(broker) as sock:
            sock.sendall(metadata_with_topic_count(version, 77, count))
            assert closed_by_peer(sock), f"Metadata v{version} with {count} topics left open"
    assert broker.rss_bytes() - rss_before < RSS_GROWTH_MAX_BYTES
    assert_serves_api_versions(broker)


def test_millions_of_tiny_array_elements_close_the_connection_without_memory_growth(
    broker: WeirProcess,
) -> None:
    """Every promised element is really sent (2 bytes each, 8 MiB in all): byte
    checks pass, and only the per-frame element budget stops 4 million objects."""
    count = 4_000_000
    header = request_header(METADATA, 1, 78, flexible=False)
    payload = frame(header + struct.pack(">i", count) + struct.pack(">h", 0) * count)
    rss_before = broker.rss_bytes()
    with connect(broker) as sock:
        sock.sendall(payload)
        assert closed_by_peer(sock), "a Metadata request with 4M topic names was not refused"
    assert broker.rss_bytes() - rss_before < RSS_GROWTH_MAX_BYTES
    assert_serves_api_versions(broker)


def test_many_idle_connections_do_not_stop_service_or_grow_memory(broker: WeirProcess) -> None:
    rss_before = broker.rss_bytes()
    idle: list[socket.socket] = []
    try:
        for i in range(300):
            # From three loopback addresses: within connections_per_address_max of each.
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((f"127.0.0.{2 + i % 3}", 0))
            sock.settimeout(IO_TIMEOUT_S)
            sock.connect(("127.0.0.1", broker.kafka_port))
            idle.append(sock)
        started = time.monotonic()
        assert_serves_api_versions(broker)
        assert time.monotonic() - started < 2.0
        # Every idle connection is still usable.
        for i, sock in enumerate(idle[:20]):
            sock.sendall(api_versions_v0(i))
            assert parse_api_versions_v0(recv_frame(sock))[:2] == (i, 0)
        assert broker.rss_bytes() - rss_before < RSS_GROWTH_MAX_BYTES
    finally:
        for sock in idle:
            sock.close()
    assert_serves_api_versions(broker)


def test_partial_huge_frames_do_not_allocate_their_declared_size(broker: WeirProcess) -> None:
    rss_before = broker.rss_bytes()
    declared = 100 * 1024 * 1024 - 1
    sent_per_connection = 256 * 1024
    held: list[socket.socket] = []
    try:
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=IO_TIMEOUT_S)
            held.append(sock)
            header = request_header(0, 3, 1, flexible=False)  # a Produce v3 header, then filler
            data = (
                struct.pack(">i", declared) + header + b"\x00" * (sent_per_connection - len(header))
            )
            with contextlib.suppress(OSError):  # the broker may refuse the size and close
                sock.sendall(data)
        time.sleep(0.5)  # let the broker take in what was sent before measuring RSS
        growth = broker.rss_bytes() - rss_before
        assert growth < RSS_GROWTH_MAX_BYTES, (
            f"RSS grew by {growth / 2**20:.0f} MiB for 20 x {sent_per_connection // 1024} KiB sent "
            f"(declared {20 * declared / 2**30:.1f} GiB)"
        )
    finally:
        for sock in held:
            sock.close()
    assert_serves_api_versions(broker)


def test_pipelined_requests_from_a_client_that_never_reads_keep_memory_bounded(
    broker: WeirProcess,
) -> None:
    rss_before = broker.rss_bytes()
    requests = b"".join(api_versions_v0(i) for i in range(50_000))
    with connect(broker) as sock:
        sock.setblocking(False)
        sent = 0
        deadline = time.monotonic() + 5
        while sent < len(requests) and time.monotonic() < deadline:
            try:
                sent += sock.send(requests[sent : sent + 65536])
            except BlockingIOError:
                time.sleep(0.01)  # the socket buffer is full: the broker stopped reading
        time.sleep(0.5)  # let the broker take in what was sent before measuring RSS
        growth = broker.rss_bytes() - rss_before
        assert growth < RSS_GROWTH_MAX_BYTES, f"RSS grew by {growth / 2**20:.0f} MiB"
    assert_serves_api_versions(broker)


def test_broker_rss_stays_bounded_overall(broker: WeirProcess) -> None:
    rss = broker.rss_bytes()
    assert rss < 512 * 1024 * 1024, f"broker RSS is {rss / 2**20:.0f} MiB after the hostile tests"
