"""How the broker answers Metadata, ListOffsets and Fetch for a topic that does not exist,
checked on the wire with requests encoded by hand (clients hide these answers).

Kafka's answers, which Weir must give: Metadata with auto-creation off names the topic
with UNKNOWN_TOPIC_OR_PARTITION and no partitions; ListOffsets and Fetch before v13
(topics by name) answer UNKNOWN_TOPIC_OR_PARTITION for each partition, Fetch with -1
watermarks and no records. Each test also asks about an existing topic, so a parser bug
cannot make it pass.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from compat_tests.harness import WeirProcess, create_topic, unique_topic_name
from compat_tests.test_hostile_input import connect, frame, recv_frame, request_header

METADATA = 3
LIST_OFFSETS = 2
FETCH = 1
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
EARLIEST_TIMESTAMP = -2


def string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


class Reader:
    """Reads the big-endian, non-flexible encoding of a response body."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self.pos = 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(">" + fmt, self.payload, self.pos)
        self.pos += struct.calcsize(">" + fmt)
        return int(value)

    def string(self) -> str | None:
        size = self.unpack("h")
        if size < 0:
            return None
        text = self.payload[self.pos : self.pos + size].decode()
        self.pos += size
        return text

    def skip_bytes(self) -> int:
        size = self.unpack("i")
        self.pos += max(size, 0)
        return size

    def skip_int32_array(self) -> None:
        count = self.unpack("i")
        self.pos += 4 * max(count, 0)

    def at_end(self) -> bool:
        return self.pos == len(self.payload)


def round_trip(sock: socket.socket, api_key: int, version: int, body: bytes) -> Reader:
    correlation_id = 7
    sock.sendall(frame(request_header(api_key, version, correlation_id, flexible=False) + body))
    reader = Reader(recv_frame(sock))
    assert reader.unpack("i") == correlation_id
    return reader


@dataclass(frozen=True)
class TopicAnswer:
    name: str | None
    error_code: int
    partitions: int


def metadata_v4(sock: socket.socket, topics: list[str]) -> list[TopicAnswer]:
    body = struct.pack(">i", len(topics)) + b"".join(string(t) for t in topics)
    reader = round_trip(sock, METADATA, 4, body + b"\x00")  # allow_auto_topic_creation=false
    reader.unpack("i")  # throttle_time_ms
    for _ in range(reader.unpack("i")):  # brokers: node_id, host, port, rack
        reader.unpack("i"), reader.string(), reader.unpack("i"), reader.string()
    reader.string(), reader.unpack("i")  # cluster_id, controller_id
    answers = []
    for _ in range(reader.unpack("i")):
        error_code, name, _internal = reader.unpack("h"), reader.string(), reader.unpack("b")
        partitions = reader.unpack("i")
        for _ in range(partitions):  # error, index, leader, replicas, isr
            reader.unpack("h"), reader.unpack("i"), reader.unpack("i")
            for _ in range(2):
                reader.skip_int32_array()
        answers.append(TopicAnswer(name, error_code, partitions))
    assert reader.at_end()
    return answers


def list_offsets_v1(sock: socket.socket, topic: str) -> list[tuple[str | None, int, int, int]]:
    """(topic, partition, error_code, offset) for the earliest offset of partition 0."""
    body = struct.pack(">ii", -1, 1) + string(topic) + struct.pack(">iiq", 1, 0, EARLIEST_TIMESTAMP)
    reader = round_trip(sock, LIST_OFFSETS, 1, body)
    answers = []
    for _ in range(reader.unpack("i")):
        name = reader.string()
        for _ in range(reader.unpack("i")):
            partition, error_code = reader.unpack("i"), reader.unpack("h")
            reader.unpack("q")  # timestamp
            answers.append((name, partition, error_code, reader.unpack("q")))
    assert reader.at_end()
    return answers


def fetch_v4(sock: socket.socket, topic: str) -> list[tuple[str | None, int, int, int, int]]:
    """(topic, partition, error_code, high_watermark, records size) for partition 0 at 0."""
    body = struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0)  # max_wait_ms 0, min_bytes 1
    body += struct.pack(">i", 1) + string(topic) + struct.pack(">iiqi", 1, 0, 0, 1 << 20)
    reader = round_trip(sock, FETCH, 4, body)
    reader.unpack("i")  # throttle_time_ms
    answers = []
    for _ in range(reader.unpack("i")):
        name = reader.string()
        for _ in range(reader.unpack("i")):
            partition, error_code = reader.unpack("i"), reader.unpack("h")
            high_watermark = reader.unpack("q")
            reader.unpack("q")  # last_stable_offset
            aborted = reader.unpack("i")
            reader.pos += 16 * max(aborted, 0)
            answers.append((name, partition, error_code, high_watermark, reader.skip_bytes()))
    assert reader.at_end()
    return answers


def test_metadata_without_auto_creation_names_a_missing_topic_unknown_and_creates_nothing(
    broker: WeirProcess, topic: str
) -> None:
    existing = unique_topic_name("exists")
    create_topic(broker.bootstrap, existing, partitions=2)
    with connect(broker) as sock:
        assert metadata_v4(sock, [topic, existing]) == [
            TopicAnswer(topic, UNKNOWN_TOPIC_OR_PARTITION, 0),
            TopicAnswer(existing, NONE, 2),
        ]
        assert metadata_v4(sock, [topic]) == [TopicAnswer(topic, UNKNOWN_TOPIC_OR_PARTITION, 0)]


def test_list_offsets_answers_unknown_topic_or_partition_for_a_missing_topic(
    broker: WeirProcess, topic: str
) -> None:
    existing = unique_topic_name("exists")
    create_topic(broker.bootstrap, existing)
    with connect(broker) as sock:
        assert list_offsets_v1(sock, topic) == [(topic, 0, UNKNOWN_TOPIC_OR_PARTITION, -1)]
        assert list_offsets_v1(sock, existing) == [(existing, 0, NONE, 0)]


def test_fetch_by_name_answers_unknown_topic_or_partition_for_a_missing_topic(
    broker: WeirProcess, topic: str
) -> None:
    existing = unique_topic_name("exists")
    create_topic(broker.bootstrap, existing)
    with connect(broker) as sock:
        assert fetch_v4(sock, topic) == [(topic, 0, UNKNOWN_TOPIC_OR_PARTITION, -1, 0)]
        assert fetch_v4(sock, existing) == [(existing, 0, NONE, 0, 0)]
