"""The records API over HTTP (docs/http-records.md) against a real `weir serve`, with
httpx and curl on one side and confluent-kafka on the other: Confluent REST Proxy
v3 produce (one record, and the streaming mode's report per record), reads of a
partition from an offset or a timestamp (read_committed too), server-sent-event
streams that follow a topic live, and every class of bad input answered 4xx."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from compat_tests.harness import WeirProcess, create_topic, unique_topic_name
from weir.format.partitioner import partition_for_key

pytestmark = pytest.mark.timeout(90)

HTTP_REQUEST_TIMEOUT_MS = 2000
HTTP_CONNECTIONS_MAX = 6
HTTP_BODY_BYTES_MAX = 64 * 1024
CLIENT_WAIT_S = 15.0
JSON_HEADERS = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(
        tmp_path_factory.mktemp("rest-records"),
        f"""
[limits]
http_request_timeout_ms = {HTTP_REQUEST_TIMEOUT_MS}
http_connections_max = {HTTP_CONNECTIONS_MAX}
http_body_bytes_max = {HTTP_BODY_BYTES_MAX}
""",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def cluster_id(broker: WeirProcess) -> str:
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    return str(metadata.cluster_id)


@pytest.fixture
def http(broker: WeirProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.http_url, timeout=10.0) as client:
        yield client


def topic_url(cluster_id: str, topic: str) -> str:
    return f"/v3/clusters/{cluster_id}/topics/{topic}"


def new_topic(broker: WeirProcess, partitions: int = 1, **config: str) -> str:
    topic = unique_topic_name("rest")
    create_topic(broker.bootstrap, topic, partitions=partitions, config=config or None)
    return topic


def consume(broker: WeirProcess, topic: str, partition: int, count: int) -> list[Any]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": unique_topic_name("g"),
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages: list[Any] = []
    deadline = time.monotonic() + CLIENT_WAIT_S
    try:
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                messages.append(message)
    finally:
        consumer.close()
    assert len(messages) == count, f"consumed {len(messages)} of {count}"
    return messages


def produce_with_kafka(broker: WeirProcess, topic: str, records: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for record in records:
        producer.produce(topic, **record)
    assert producer.flush(CLIENT_WAIT_S) == 0


# Produce ----------------------------------------------------------------------------


def test_a_record_produced_over_rest_is_consumed_by_kafka_with_key_value_headers_and_time(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    requests = [
        {"key": {"type": "STRING", "data": "k-1"}, "value": {"type": "JSON", "data": {"n": 1}},
         "headers": [{"name": "trace", "value": base64.b64encode(b"\x01\x02").decode()}],
         "timestamp": "2026-01-02T03:04:05.678Z"},
        {"value": {"type": "BINARY", "data": base64.b64encode(b"\x00\xffraw").decode()}},
        {"key": {"type": "JSON", "data": [1, "two"]}, "value": {"type": "STRING", "data": "héllo"}},
    ]  # fmt: skip
    reports = []
    for body in requests:
        answer = http.post(f"{topic_url(cluster_id, topic)}/records", json=body)
        assert answer.status_code == 200, answer.text
        reports.append(answer.json())
    assert [r["offset"] for r in reports] == [0, 1, 2]
    assert reports[0] == {
        "error_code": 200, "cluster_id": cluster_id, "topic_name": topic, "partition_id": 0,
        "offset": 0, "timestamp": "2026-01-02T03:04:05.678Z",
        "key": {"type": "STRING", "size": 3}, "value": {"type": "JSON", "size": 7},
    }  # fmt: skip
    assert "key" not in reports[1] and reports[1]["value"] == {"type": "BINARY", "size": 5}
    messages = consume(broker, topic, 0, 3)
    assert [(m.key(), m.value()) for m in messages] == [
        (b"k-1", b'{"n":1}'), (None, b"\x00\xffraw"), (b'[1,"two"]', "héllo".encode()),
    ]  # fmt: skip
    assert messages[0].headers() == [("trace", b"\x01\x02")]
    assert messages[0].timestamp()[1] == 1767323045678


def test_keyed_records_land_where_the_java_partitioner_puts_them(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker, partitions=6)
    keys = [f"customer-{i}" for i in range(12)]
    for key in keys:
        answer = http.post(
            f"{topic_url(cluster_id, topic)}/records",
            json={"key": {"type": "STRING", "data": key}, "value": {"data": key}},
        )
        assert answer.json()["partition_id"] == partition_for_key(key.encode(), 6), key
    # librdkafka's murmur2_random is the Java client's default: the same partitions.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    placed: dict[str, int] = {}
    for key in keys:
        producer.produce(
            topic, key=key, value=b"k",
            on_delivery=lambda err, msg: placed.__setitem__(msg.key().decode(), msg.partition()),
        )  # fmt: skip
    assert producer.flush(CLIENT_WAIT_S) == 0
    assert placed == {key: partition_for_key(key.encode(), 6) for key in keys}


def test_several_records_in_one_body_get_a_report_each_in_order(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker, partitions=2)
    body = "".join(
        json.dumps({"partition_id": i % 2, "value": {"type": "STRING", "data": f"v{i}"}})
        for i in range(6)
    )
    body += json.dumps({"partition_id": 7, "value": {"data": 1}})
    answer = http.post(
        f"{topic_url(cluster_id, topic)}/records", content=body, headers=JSON_HEADERS
    )
    assert answer.status_code == 200
    reports = [json.loads(line) for line in answer.text.splitlines()]
    assert [(r["partition_id"], r["offset"]) for r in reports[:6]] == [
        (0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)
    ]  # fmt: skip
    assert reports[6]["error_code"] == 40402


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class RawStream:
    """A chunked POST over a plain socket, to interleave sending and reading."""

    def __init__(self, broker: WeirProcess, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.http_port), timeout=10)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: weir\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        self.sock.sendall(head.encode())
        self.received = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(chunk(data))

    def end(self) -> None:
        self.sock.sendall(b"0\r\n\r\n")

    def read_until(self, marker: bytes, timeout_s: float = 10.0) -> bytes:
        deadline = time.monotonic() + timeout_s
        while marker not in self.received and time.monotonic() < deadline:
            data = self.sock.recv(65536)
            if not data:
                break
            self.received += data
        assert marker in self.received, self.received
        return self.received

    def reports(self) -> list[dict[str, Any]]:
        body = self.received.split(b"\r\n\r\n", 1)[1]
        text = b""
        while body:  # de-chunk what arrived
            size_text, _, rest = body.partition(b"\r\n")
            size = int(size_text, 16)
            text, body = text + rest[:size], rest[size + 2 :]
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def close(self) -> None:
        self.sock.close()


def test_streaming_mode_reports_each_record_as_it_is_written_before_the_body_ends(
    broker: WeirProcess, cluster_id: str
) -> None:
    topic = new_topic(broker)
    stream = RawStream(broker, f"{topic_url(cluster_id, topic)}/records")
    try:
        for i in range(3):
            # Half a record, then the rest: records span chunks.
            text = json.dumps({"value": {"type": "STRING", "data": f"r{i}"}}).encode()
            stream.send(text[:5])
            stream.send(text[5:] + b"\n")
            stream.read_until(f'"offset":{i}'.encode())  # answered while the body is open
        assert stream.received.startswith(b"HTTP/1.1 200")
        stream.send(b'{"value": {"data": "not base64"}, "partition_id": -4}')
        stream.send(b'{"value": {"type": "STRING", "data": "after the bad one"}}')
        stream.end()
        stream.read_until(b"0\r\n\r\n")
        reports = stream.reports()
    finally:
        stream.close()
    assert [r["error_code"] for r in reports] == [200, 200, 200, 400, 200]
    assert [r.get("offset") for r in reports] == [0, 1, 2, None, 3]
    assert [m.value() for m in consume(broker, topic, 0, 4)] == [
        b"r0", b"r1", b"r2", b"after the bad one",
    ]  # fmt: skip


def test_a_stream_runs_past_the_body_bound_one_bounded_record_at_a_time(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    record = json.dumps({"value": {"type": "STRING", "data": "y" * 1000}}).encode()
    count = 3 * HTTP_BODY_BYTES_MAX // len(record)

    def body() -> Iterator[bytes]:  # a generator: httpx sends it chunked
        for _ in range(count):
            yield record

    answer = http.post(
        f"{topic_url(cluster_id, topic)}/records", content=body(), headers=JSON_HEADERS
    )
    reports = [json.loads(line) for line in answer.text.splitlines()]
    assert [r["offset"] for r in reports] == list(range(count))


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_curl_streams_records_from_stdin_and_reads_reports_as_they_come(
    broker: WeirProcess, cluster_id: str
) -> None:
    topic = new_topic(broker)
    url = f"{broker.http_url}{topic_url(cluster_id, topic)}/records"
    # `-T .`: stdin uploaded as it comes, chunked, while the answer is read.
    curl = subprocess.Popen(
        ["curl", "-sS", "-N", "-T", ".", "-X", "POST", "-H", "Content-Type: application/json",
         "-H", "Transfer-Encoding: chunked", url],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert curl.stdin is not None and curl.stdout is not None
    try:
        for i in range(3):
            curl.stdin.write(json.dumps({"value": {"data": {"seq": i}}}).encode() + b"\n")
            curl.stdin.flush()
            report = json.loads(curl.stdout.readline())  # before stdin is closed
            assert (report["error_code"], report["offset"]) == (200, i)
        curl.stdin.close()
        assert curl.wait(timeout=10) == 0
    finally:
        curl.kill()
    assert [m.value() for m in consume(broker, topic, 0, 3)] == [
        b'{"seq":0}', b'{"seq":1}', b'{"seq":2}'
    ]  # fmt: skip


# Read -------------------------------------------------------------------------------


def test_records_produced_by_kafka_are_read_from_an_offset_and_from_a_timestamp(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    produce_with_kafka(
        broker, topic,
        [{"key": b"k0", "value": b'{"a": 1}', "timestamp": 1_000_000, "headers": [("h", b"v")]},
         {"value": b"text value", "timestamp": 2_000_000},
         {"value": b"\x00\x01\x02", "timestamp": 3_000_000},
         {"value": None, "timestamp": 4_000_000}],
    )  # fmt: skip
    url = f"{topic_url(cluster_id, topic)}/partitions/0/records"
    page = http.get(url, params={"offset": 0}).json()
    assert [r["offset"] for r in page["records"]] == [0, 1, 2, 3]
    assert page["next_offset"] == 4 and page["high_watermark"] == 4
    first = page["records"][0]
    assert first["key"] == {"type": "STRING", "data": "k0"}
    assert first["value"] == {"type": "JSON", "data": {"a": 1}}
    assert first["headers"] == [{"name": "h", "value": base64.b64encode(b"v").decode()}]
    assert first["timestamp_ms"] == 1_000_000
    assert page["records"][1]["value"] == {"type": "STRING", "data": "text value"}
    assert page["records"][2]["value"] == {"type": "BINARY", "data": "AAEC"}
    assert page["records"][3]["value"] is None
    by_time = http.get(url, params={"timestamp": 2_500_000, "max_records": 1}).json()
    assert [r["offset"] for r in by_time["records"]] == [2] and by_time["next_offset"] == 3
    binary = http.get(url, params={"offset": 1, "format": "binary", "max_records": 1}).json()
    assert binary["records"][0]["value"]["data"] == base64.b64encode(b"text value").decode()
    late = http.get(url, params={"timestamp": 9_000_000}).json()
    assert late["records"] == [] and late["next_offset"] == 4


def test_a_filtered_read_returns_only_records_matching_key_header_and_value_substring(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    records: list[dict[str, Any]] = [
        {"key": f"customer-{i % 3}".encode(),
         "value": f'{{"n": {i}, "item": "{"book" if i % 4 == 0 else "pen"}"}}'.encode(),
         "headers": [("tenant", b"acme" if i % 2 else b"globex")]}
        for i in range(12)
    ]  # fmt: skip
    produce_with_kafka(broker, topic, records)
    url = f"{topic_url(cluster_id, topic)}/partitions/0/records"

    def offsets(**params: Any) -> list[int]:
        page = http.get(url, params={"offset": 0, **params}).json()
        assert page["stopped"] == "end" and page["next_offset"] == 12, page
        return [r["offset"] for r in page["records"]]

    assert offsets(key="customer-1") == [1, 4, 7, 10]
    assert offsets(header_name="tenant", header_value="acme") == [1, 3, 5, 7, 9, 11]
    assert offsets(header_name="tenant") == list(range(12))
    assert offsets(header_name="missing") == []
    assert offsets(value_contains='"book"') == [0, 4, 8]
    assert offsets(key="customer-0", value_contains="book", header_name="tenant") == [0]
    # The filter is on the stored bytes; the format only changes how they are written.
    page = http.get(url, params={"key": "customer-2", "format": "binary"}).json()
    assert page["records"][0]["key"]["data"] == base64.b64encode(b"customer-2").decode()


def test_a_filtered_read_scans_a_bounded_number_of_records_and_says_where_to_go_on(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    produce_with_kafka(
        broker, topic, [{"value": b"needle" if i == 25 else b"hay"} for i in range(30)]
    )
    url = f"{topic_url(cluster_id, topic)}/partitions/0/records"
    params: dict[str, Any] = {"offset": 0, "value_contains": "needle", "scan_max_records": 10}
    pages = []
    while True:
        page = http.get(url, params=params).json()
        pages.append(page)
        if page["stopped"] == "end":
            break
        assert page["stopped"] == "scan_limit" and page["scanned_records"] == 10
        params["offset"] = page["next_offset"]
    assert [p["next_offset"] for p in pages] == [10, 20, 30]
    assert [[r["offset"] for r in p["records"]] for p in pages] == [[], [], [25]]
    # A byte bound stops the scan too (each record scanned is 3 bytes here).
    by_bytes = http.get(
        url, params={"offset": 0, "value_contains": "needle", "scan_max_bytes": 30}
    ).json()
    assert by_bytes["stopped"] == "scan_limit" and by_bytes["next_offset"] == 10
    # Unfiltered reads say why they stopped as well.
    plain = http.get(url, params={"offset": 0, "max_records": 5}).json()
    assert (plain["stopped"], plain["next_offset"], plain["scanned_records"]) == (
        "max_records",
        5,
        5,
    )


def test_a_filtered_stream_sends_only_matching_records(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker, partitions=2)
    produce_with_kafka(
        broker, topic,
        [{"key": f"k{i % 2}".encode(), "value": f"v{i}".encode(), "partition": i % 2}
         for i in range(6)],
    )  # fmt: skip
    params = {"from": "beginning", "key": "k1"}
    with http.stream("GET", f"{topic_url(cluster_id, topic)}/records/stream", params=params) as r:
        assert [e["data"]["value"]["data"] for e in events(r, 3)] == ["v1", "v3", "v5"]


def test_read_committed_leaves_out_an_aborted_transaction(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": unique_topic_name("tx")}
    )
    producer.init_transactions(CLIENT_WAIT_S)
    for value, commit in ((b"committed", True), (b"aborted", False), (b"committed too", True)):
        producer.begin_transaction()
        producer.produce(topic, value=value)
        producer.flush(CLIENT_WAIT_S)
        if commit:
            producer.commit_transaction(CLIENT_WAIT_S)
        else:
            producer.abort_transaction(CLIENT_WAIT_S)
    url = f"{topic_url(cluster_id, topic)}/partitions/0/records"
    # The last commit's marker may land just after commit_transaction returns (as on
    # Kafka): until then the last stable offset stops the read before that record.
    deadline = time.monotonic() + CLIENT_WAIT_S
    while True:
        committed = http.get(url, params={"isolation_level": "read_committed"}).json()
        values = [r["value"]["data"] for r in committed["records"]]
        if values != ["committed"] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert values == ["committed", "committed too"]
    everything = http.get(url).json()
    assert [r["value"]["data"] for r in everything["records"]] == [
        "committed", "aborted", "committed too",
    ]  # fmt: skip


# Server-sent events ---------------------------------------------------------------


def events(response: httpx.Response, wanted: int, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """The next `wanted` record events of an open stream (comments skipped)."""
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    event: dict[str, Any] = {}
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = {"event": line[7:]}
        elif line.startswith("id: "):
            event["id"] = line[4:]
        elif line.startswith("data: "):
            event["data"] = json.loads(line[6:])
            found.append(event)
            if len(found) == wanted:
                return found
        assert time.monotonic() < deadline, f"got {len(found)} of {wanted} events"
    raise AssertionError(f"the stream ended after {len(found)} of {wanted} events")


def test_a_stream_follows_every_partition_live_from_the_end(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker, partitions=3)
    produce_with_kafka(broker, topic, [{"value": b"before", "partition": 0}])
    with http.stream("GET", f"{topic_url(cluster_id, topic)}/records/stream") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        time.sleep(0.5)  # the stream has taken its start offsets (the end)
        produce_with_kafka(
            broker, topic, [{"value": f"live-{p}".encode(), "partition": p} for p in range(3)]
        )
        got = events(response, 3)
    assert sorted(e["id"] for e in got) == ["0:1", "1:0", "2:0"]
    assert sorted(e["data"]["value"]["data"] for e in got) == ["live-0", "live-1", "live-2"]


def test_a_stream_of_one_partition_starts_at_an_offset_or_after_its_last_event_id(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker, partitions=2)
    produce_with_kafka(
        broker, topic, [{"value": f"v{i}".encode(), "partition": 1} for i in range(4)]
    )
    url = f"{topic_url(cluster_id, topic)}/partitions/1/records"
    with http.stream("GET", url + "/stream", params={"offset": 2}) as response:
        assert [e["data"]["value"]["data"] for e in events(response, 2)] == ["v2", "v3"]
    headers = {"Accept": "text/event-stream"}
    with http.stream("GET", url, params={"from": "beginning"}, headers=headers) as response:
        assert [e["id"] for e in events(response, 4)] == ["1:0", "1:1", "1:2", "1:3"]
    # An EventSource reconnecting sends the last id it saw: the stream resumes after it.
    headers["Last-Event-ID"] = "1:1"
    with http.stream("GET", url, params={"from": "beginning"}, headers=headers) as response:
        assert [e["id"] for e in events(response, 2)] == ["1:2", "1:3"]


def test_a_quiet_stream_gets_keep_alive_comments_and_outlives_the_request_timeout(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    lines: list[str] = []
    started = time.monotonic()
    with http.stream("GET", f"{topic_url(cluster_id, topic)}/records/stream") as response:
        for line in response.iter_lines():
            lines.append(line)
            if time.monotonic() - started > 3 * HTTP_REQUEST_TIMEOUT_MS / 1000:
                break
    assert lines.count(": keep-alive") >= 3, lines


def test_streams_end_when_their_clients_disconnect(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    """More streams opened and dropped than the HTTP pool holds: a stream that went
    on after its client left would hold its slot, and the last ones would be refused."""
    topic = new_topic(broker)
    url = f"{broker.http_url}{topic_url(cluster_id, topic)}/records/stream"
    for _ in range(2 * HTTP_CONNECTIONS_MAX):
        with httpx.Client(timeout=5.0) as client, client.stream("GET", url) as response:
            assert response.status_code == 200
            next(response.iter_lines())  # the opening comment
    time.sleep(0.5)
    assert http.get("/health/live").status_code == 200


# Bad input ------------------------------------------------------------------------


def produce_raw(http: httpx.Client, url: str, content: bytes, **headers: str) -> httpx.Response:
    return http.post(url, content=content, headers={**JSON_HEADERS, **headers})


@pytest.mark.parametrize(
    ("content", "status", "error_code"),
    [
        (b'{"value": ', 400, 400),  # bad JSON
        (b'{"value": {"type": "BINARY", "data": "***"}}', 400, 400),  # bad base64
        (b'{"partition_id": -1}', 400, 400),
        (b'{"partition_id": 99999999999}', 400, 400),
        (b'{"partition_id": 5}', 404, 40402),
        (b"", 400, 400),
        (b"[" * 5000, 400, 400),  # deep nesting
    ],
)
def test_bad_records_are_refused_with_4xx(
    broker: WeirProcess, cluster_id: str, http: httpx.Client,
    content: bytes, status: int, error_code: int,
) -> None:  # fmt: skip
    topic = new_topic(broker)
    answer = produce_raw(http, f"{topic_url(cluster_id, topic)}/records", content)
    assert answer.status_code == status, answer.text
    assert answer.json()["error_code"] == error_code


def test_an_unknown_topic_or_cluster_is_404_with_confluents_codes(
    cluster_id: str, http: httpx.Client
) -> None:
    answer = http.post(f"{topic_url(cluster_id, 'no-such-topic')}/records", json={})
    assert (answer.status_code, answer.json()["error_code"]) == (404, 40401)
    answer = http.get(f"{topic_url(cluster_id, 'no-such-topic')}/partitions/0/records")
    assert (answer.status_code, answer.json()["error_code"]) == (404, 40401)
    answer = http.post(f"{topic_url('not-this-cluster', 'no-such-topic')}/records", json={})
    assert answer.status_code == 404


def test_a_record_over_the_topics_max_message_bytes_is_422(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker, **{"max.message.bytes": "2000"})
    big = {"value": {"type": "STRING", "data": "x" * 5000}}
    answer = http.post(f"{topic_url(cluster_id, topic)}/records", json=big)
    assert (answer.status_code, answer.json()["error_code"]) == (422, 42201)


def test_a_body_over_the_bound_is_413_unread(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    url = f"{topic_url(cluster_id, topic)}/records"
    answer = produce_raw(http, url, b" " * (HTTP_BODY_BYTES_MAX + 1))
    assert answer.status_code == 413


def test_a_streamed_record_over_the_bound_ends_the_stream_with_413(
    broker: WeirProcess, cluster_id: str
) -> None:
    topic = new_topic(broker)
    stream = RawStream(broker, f"{topic_url(cluster_id, topic)}/records")
    try:
        stream.send(b'{"value": {"type": "STRING", "data": "ok"}}')
        stream.send(b'{"value": {"type": "STRING", "data": "' + b"x" * HTTP_BODY_BYTES_MAX)
        try:
            for _ in range(3):
                stream.send(b"x" * HTTP_BODY_BYTES_MAX)
        except (BrokenPipeError, ConnectionResetError):
            pass
        stream.read_until(b"0\r\n\r\n")
        reports = stream.reports()
    finally:
        stream.close()
    assert [r["error_code"] for r in reports] == [200, 413]


def test_a_stream_that_stops_sending_ends_with_408(broker: WeirProcess, cluster_id: str) -> None:
    topic = new_topic(broker)
    stream = RawStream(broker, f"{topic_url(cluster_id, topic)}/records")
    try:
        stream.send(b'{"value": {"type": "STRING", "data": "one"}}')
        stream.send(b'{"value": {"type": "STRING", "da')  # and then nothing
        started = time.monotonic()
        stream.read_until(b"0\r\n\r\n", timeout_s=3 * HTTP_REQUEST_TIMEOUT_MS / 1000)
        waited_s = time.monotonic() - started
        reports = stream.reports()
    finally:
        stream.close()
    assert [r["error_code"] for r in reports] == [200, 408]
    assert waited_s < 2 * HTTP_REQUEST_TIMEOUT_MS / 1000


def test_a_body_that_is_not_json_is_415(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    answer = http.post(
        f"{topic_url(cluster_id, topic)}/records",
        content=b"value=1",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 415


@pytest.mark.parametrize(
    "params",
    [{"offset": "-1"}, {"offset": "x"}, {"max_records": "0"}, {"max_bytes": str(2**40)},
     {"format": "avro"}, {"isolation_level": "dirty"}, {"offset": "1", "timestamp": "1"},
     {"scan_max_records": "0"}, {"scan_max_bytes": str(2**40)}, {"header_value": "v"},
     {"key": "k" * 1025}],
)  # fmt: skip
def test_bad_read_options_are_400(
    broker: WeirProcess, cluster_id: str, http: httpx.Client, params: dict[str, str]
) -> None:
    topic = new_topic(broker)
    answer = http.get(f"{topic_url(cluster_id, topic)}/partitions/0/records", params=params)
    assert (answer.status_code, answer.json()["error_code"]) == (400, 400)


def test_a_partition_that_is_not_there_is_404_or_400(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    base = f"{topic_url(cluster_id, topic)}/partitions"
    assert http.get(f"{base}/1/records").json()["error_code"] == 40402
    assert http.get(f"{base}/-1/records").status_code == 400
    assert http.get(f"{base}/{2**40}/records").status_code == 400
    assert http.get(f"{base}/1/records/stream").status_code == 404


def test_an_offset_past_the_end_is_422(
    broker: WeirProcess, cluster_id: str, http: httpx.Client
) -> None:
    topic = new_topic(broker)
    answer = http.get(f"{topic_url(cluster_id, topic)}/partitions/0/records?offset=50")
    assert (answer.status_code, answer.json()["error_code"]) == (422, 42202)
