"""Administration over HTTP (weir/broker/http/rest_admin*.py) against a real `weir
serve`, with httpx, and real Kafka clients (confluent-kafka) to make the state the
views show and to check what the changes did: clusters and brokers, topics created,
altered and deleted over HTTP, partitions with their offsets (an open transaction
holds the last stable offset back), consumer-group lag, a share group's queue depth
and its purge, dead letters redriven (taking over from a killed `weir queue
redrive`), transactions; and one test per class of hostile input (bad JSON,
a body over the bound, invalid names and numbers, unknown resources, wrong
content type, method or query)."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests.harness import WeirProcess, clean_environment, run_cli, unique_topic_name
from weir.sharecoord.dead_letter_records import dead_letter_headers
from weir.sharecoord.share_partition import ArchiveReason

pytestmark = pytest.mark.timeout(120)

ADMIN_BODY_BYTES_MAX = 64 * 1024
CLIENT_WAIT_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("rest-admin"), "")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def http(broker: WeirProcess) -> Iterator[httpx.Client]:
    # No keep-alive: an idle connection the broker closed is never reused by a test.
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(base_url=broker.http_url, timeout=30, limits=limits) as client:
        yield client


@pytest.fixture(scope="module")
def cluster_path(http: httpx.Client) -> str:
    listed = http.get("/v3/clusters").json()
    return f"/v3/clusters/{listed['data'][0]['cluster_id']}"


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    document = response.json()
    assert document["error_code"] // 100 == status, document
    assert isinstance(document["message"], str)
    return dict(document)


def create_topic(http: httpx.Client, cluster_path: str, partitions: int = 2, **configs: str) -> str:
    name = unique_topic_name("rest-admin")
    body = {
        "topic_name": name,
        "partitions_count": partitions,
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
    }
    ok(http.post(f"{cluster_path}/topics", json=body), 201)
    return name


# -- clusters and brokers ---------------------------------------------------------------


def test_the_cluster_and_its_broker_in_confluent_shape(
    broker: WeirProcess, http: httpx.Client, cluster_path: str
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # alive until the result
    cluster_id = admin.describe_cluster().result(timeout=10).cluster_id
    listed = ok(http.get("/v3/clusters"))
    assert listed["kind"] == "KafkaClusterList"
    (cluster,) = listed["data"]
    assert cluster["kind"] == "KafkaCluster" and cluster["cluster_id"] == cluster_id
    assert cluster["metadata"]["self"] == f"{broker.http_url}/v3/clusters/{cluster_id}"
    assert cluster["topics"]["related"].endswith(f"/v3/clusters/{cluster_id}/topics")
    assert cluster["controller"]["related"].endswith("/brokers/1")
    (listed_broker,) = ok(http.get(f"{cluster_path}/brokers"))["data"]
    assert (listed_broker["broker_id"], listed_broker["port"]) == (1, broker.kafka_port)
    assert ok(http.get(f"{cluster_path}/brokers/1")) == listed_broker


# -- topics and configs -----------------------------------------------------------------------


def test_a_topic_created_over_http_is_a_kafka_topic_and_deleted_over_http_is_gone(
    broker: WeirProcess, http: httpx.Client, cluster_path: str
) -> None:
    name = unique_topic_name("rest-create")
    body = {"topic_name": name, "partitions_count": 3, "replication_factor": 1}
    created = ok(http.post(f"{cluster_path}/topics", json=body), 201)
    assert created["kind"] == "KafkaTopic"
    assert (created["topic_name"], created["partitions_count"]) == (name, 3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 3
    assert ok(http.get(f"{cluster_path}/topics/{name}"))["partitions_count"] == 3
    listed = ok(http.get(f"{cluster_path}/topics"))
    assert listed["kind"] == "KafkaTopicList"
    assert name in {t["topic_name"] for t in listed["data"]}
    assert error(http.post(f"{cluster_path}/topics", json=body), 409)["error_code"] == 40901
    ok(http.delete(f"{cluster_path}/topics/{name}"), 204)
    assert error(http.get(f"{cluster_path}/topics/{name}"), 404)["error_code"] == 40401
    assert name not in admin.list_topics(timeout=10).topics


def test_validate_only_creates_nothing(http: httpx.Client, cluster_path: str) -> None:
    name = unique_topic_name("rest-validate")
    body = {"topic_name": name, "partitions_count": 2, "validate_only": True}
    ok(http.post(f"{cluster_path}/topics", json=body), 201)
    error(http.get(f"{cluster_path}/topics/{name}"), 404)


def configs_by_name(http: httpx.Client, cluster_path: str, topic: str) -> dict[str, Any]:
    listed = ok(http.get(f"{cluster_path}/topics/{topic}/configs"))
    assert listed["kind"] == "KafkaTopicConfigList"
    return {c["name"]: c for c in listed["data"]}


def test_topic_configs_show_overrides_apart_from_defaults_and_alter_as_kafka_does(
    broker: WeirProcess, http: httpx.Client, cluster_path: str
) -> None:
    topic = create_topic(http, cluster_path, retention_ms="3600000")
    configs = configs_by_name(http, cluster_path, topic)
    retention = configs["retention.ms"]
    assert (retention["value"], retention["source"], retention["is_default"]) == (
        "3600000",
        "DYNAMIC_TOPIC_CONFIG",
        False,
    )
    assert configs["cleanup.policy"]["is_default"] is True
    assert configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    one = ok(http.get(f"{cluster_path}/topics/{topic}/configs/retention.ms"))
    assert one["kind"] == "KafkaTopicConfig" and one["value"] == "3600000"

    path = f"{cluster_path}/topics/{topic}/configs"
    ok(http.put(f"{path}/cleanup.policy", json={"value": "compact"}), 204)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(timeout=10)
    assert described["cleanup.policy"].value == "compact"

    changes = {
        "data": [
            {"name": "retention.ms", "operation": "DELETE"},
            {"name": "segment.ms", "value": "100000"},
        ]
    }
    ok(http.post(f"{path}:alter", json=changes), 204)
    configs = configs_by_name(http, cluster_path, topic)
    assert configs["retention.ms"]["is_default"] is True
    assert (configs["segment.ms"]["value"], configs["segment.ms"]["is_default"]) == (
        "100000",
        False,
    )
    ok(http.delete(f"{path}/cleanup.policy"), 204)
    assert configs_by_name(http, cluster_path, topic)["cleanup.policy"]["value"] == "delete"
    invalid = {"data": [{"name": "retention.ms", "value": "not-a-number"}]}
    error(http.post(f"{path}:alter", json=invalid), 400)


# -- partitions and transactions ----------------------------------------------------------------


def transactional_producer(broker: WeirProcess, transactional_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id}
    )
    producer.init_transactions(CLIENT_WAIT_S)
    return producer


def test_partitions_show_leader_replicas_isr_and_offsets_and_the_open_transaction(
    broker: WeirProcess, http: httpx.Client, cluster_path: str
) -> None:
    topic = create_topic(http, cluster_path)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(5):
        producer.produce(topic, b"v", partition=0)
    assert producer.flush(CLIENT_WAIT_S) == 0
    transactional_id = f"{topic}-txn"
    open_transaction = transactional_producer(broker, transactional_id)
    open_transaction.begin_transaction()
    for _ in range(3):
        open_transaction.produce(topic, b"t", partition=1)
    assert open_transaction.flush(CLIENT_WAIT_S) == 0
    try:
        listed = ok(http.get(f"{cluster_path}/topics/{topic}/partitions"))
        assert listed["kind"] == "KafkaPartitionList"
        first, second = listed["data"]
        assert (first["high_watermark"], first["last_stable_offset"]) == (5, 5)
        assert first["log_start_offset"] == 0
        # The open transaction's records are there, not yet stable.
        assert (second["high_watermark"], second["last_stable_offset"]) == (3, 0)
        assert (first["leader_id"], first["replica_ids"], first["isr"]) == (1, [1], [1])
        assert first["leader"]["related"].endswith(f"/topics/{topic}/partitions/0/replicas/1")
        assert ok(http.get(f"{cluster_path}/topics/{topic}/partitions/1")) == second
        (replica,) = ok(http.get(f"{cluster_path}/topics/{topic}/partitions/0/replicas"))["data"]
        assert replica["kind"] == "KafkaReplica"
        assert (replica["broker_id"], replica["is_leader"], replica["is_in_sync"]) == (
            1,
            True,
            True,
        )

        ongoing = ok(http.get(f"{cluster_path}/transactions", params={"state": "Ongoing"}))
        assert transactional_id in {t["transactional_id"] for t in ongoing["data"]}
        described = ok(http.get(f"{cluster_path}/transactions/{transactional_id}"))
        assert described["state"] == "Ongoing"
        assert described["partitions"] == [{"topic_name": topic, "partition_id": 1}]
    finally:
        open_transaction.abort_transaction(CLIENT_WAIT_S)
    error(http.get(f"{cluster_path}/transactions/no-such-transactional-id"), 404)


def test_an_open_transaction_aborted_over_http_frees_the_last_stable_offset(
    broker: WeirProcess, http: httpx.Client, cluster_path: str
) -> None:
    topic = create_topic(http, cluster_path, partitions=1)
    producer = transactional_producer(broker, f"{topic}-txn")
    producer.begin_transaction()
    for _ in range(3):
        producer.produce(topic, b"t", partition=0)
    assert producer.flush(CLIENT_WAIT_S) == 0
    partition_path = f"{cluster_path}/topics/{topic}/partitions/0"
    (active,) = ok(http.get(f"{partition_path}/producers"))["data"]
    assert active["current_transaction_start_offset"] == 0
    # Its coordinator counts the partition in the transaction: not hanging.
    hanging = f"{cluster_path}/hanging-transactions"
    query = {"topic_name": topic, "max_transaction_timeout_ms": "0"}
    assert ok(http.get(hanging, params=query))["data"] == []

    aborted = ok(http.post(f"{partition_path}/abort-transaction", json={"start_offset": 0}))
    assert aborted["producer_id"] == active["producer_id"]
    offsets = ok(http.get(partition_path))
    # The abort marker is a record too: the stable offset passes it.
    assert offsets["last_stable_offset"] == offsets["high_watermark"] == 4
    (after,) = ok(http.get(f"{partition_path}/producers"))["data"]
    assert after["current_transaction_start_offset"] is None
    missing = {"start_offset": 0}
    error(http.post(f"{partition_path}/abort-transaction", json=missing), 404)
    error(http.post(f"{partition_path}/abort-transaction", json={"producer_id": -1}), 400)


# -- consumer groups -------------------------------------------------------------------------------


def test_consumer_group_lag_per_partition_and_summary(
    broker: WeirProcess, http: httpx.Client, cluster_path: str
) -> None:
    topic = create_topic(http, cluster_path)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition, count in ((0, 10), (1, 4)):
        for _ in range(count):
            producer.produce(topic, b"v", partition=partition)
    assert producer.flush(CLIENT_WAIT_S) == 0
    group = f"{topic}-group"
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "lag-client"}
    )
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + CLIENT_WAIT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer was never assigned"
            consumer.poll(0.2)
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)], asynchronous=False
        )
        described = ok(http.get(f"{cluster_path}/consumer-groups/{group}"))
        assert described["kind"] == "KafkaConsumerGroup"
        assert described["state"] == "STABLE"
        listed = ok(http.get(f"{cluster_path}/consumer-groups"))
        assert group in {g["consumer_group_id"] for g in listed["data"]}
        (member,) = ok(http.get(f"{cluster_path}/consumer-groups/{group}/consumers"))["data"]
        assert member["client_id"] == "lag-client"
        assert sorted(a["partition_id"] for a in member["assignments"]) == [0, 1]
        lags = ok(http.get(f"{cluster_path}/consumer-groups/{group}/lags"))
        assert lags["kind"] == "KafkaConsumerLagList"
        by_partition = {lag["partition_id"]: lag for lag in lags["data"]}
        assert (by_partition[0]["current_offset"], by_partition[0]["log_end_offset"]) == (3, 10)
        assert (by_partition[0]["lag"], by_partition[1]["lag"]) == (7, 0)
        assert by_partition[0]["consumer_id"] == member["consumer_id"]
        one = ok(http.get(by_partition[0]["metadata"]["self"]))
        assert one == by_partition[0]
        summary = ok(http.get(f"{cluster_path}/consumer-groups/{group}/lag-summary"))
        assert summary["kind"] == "KafkaConsumerGroupLagSummary"
        assert (summary["max_lag"], summary["total_lag"], summary["max_lag_partition_id"]) == (
            7,
            7,
            0,
        )
    finally:
        consumer.close()
    error(http.get(f"{cluster_path}/consumer-groups/{group}-missing"), 404)


# -- share groups ------------------------------------------------------------------------------


def share_group_with_records(
    broker: WeirProcess, http: httpx.Client, cluster_path: str, consumed: int, waiting: int
) -> tuple[str, str]:
    """A 1-partition topic whose share group accepted its first `consumed` records,
    with `waiting` more produced after."""
    topic = create_topic(http, cluster_path, partitions=1)
    group = f"{topic}-share"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(consumed):
        producer.produce(topic, b"early")
    assert producer.flush(CLIENT_WAIT_S) == 0
    earliest = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[earliest])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=CLIENT_WAIT_S)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    try:
        seen = 0
        deadline = time.monotonic() + CLIENT_WAIT_S
        while seen < consumed:
            assert time.monotonic() < deadline, f"consumed {seen} of {consumed}"
            seen += sum(m.error() is None for m in consumer.poll(1.0))
        consumer.commit_sync(10.0)
    finally:
        consumer.close()
    for _ in range(waiting):
        producer.produce(topic, b"late")
    assert producer.flush(CLIENT_WAIT_S) == 0
    return topic, group


def test_share_group_queue_depth_and_purge(
    broker: WeirProcess, http: httpx.Client, cluster_path: str
) -> None:
    topic, group = share_group_with_records(broker, http, cluster_path, consumed=4, waiting=3)
    path = f"{cluster_path}/share-groups/{group}"
    assert group in {
        g["share_group_id"] for g in ok(http.get(f"{cluster_path}/share-groups"))["data"]
    }
    described = ok(http.get(path))
    assert described["kind"] == "WeirShareGroup" and described["queue_depth"] == 3
    (partition,) = described["partitions"]
    assert (partition["topic_name"], partition["start_offset"], partition["end_offset"]) == (
        topic,
        4,
        7,
    )
    # This broker leads the partition: it shows the records by state too.
    assert partition["records"]["available"] == 3

    planned = ok(http.post(f"{path}/purge", json={"dry_run": True}))
    assert planned["partitions"][0]["new_start_offset"] == 7
    assert ok(http.get(path))["queue_depth"] == 3
    ok(http.post(f"{path}/purge"))
    assert ok(http.get(path))["queue_depth"] == 0
    error(http.get(f"{cluster_path}/share-groups/{group}-missing"), 404)


# -- hostile input: one test per class ----------------------------------------------------------


def test_a_body_that_is_not_a_json_object_is_400(http: httpx.Client, cluster_path: str) -> None:
    headers = {"content-type": "application/json"}
    for body in (b"{not json", b"[1, 2]", b'"topic"', b"\xff\xfe", b"[" * 50_000):
        error(http.post(f"{cluster_path}/topics", content=body, headers=headers), 400)


def test_a_body_over_the_bound_is_413(
    broker: WeirProcess, http: httpx.Client, cluster_path: str
) -> None:
    big = {"topic_name": "big", "configs": [{"name": "x" * 1000, "value": "y"}] * 100}
    error(http.post(f"{cluster_path}/topics", json=big), 413)
    # Chunked, no content-length: the bound is counted as the body comes. One byte
    # over it is sent, then the answer is read before the body ends.
    head = (
        f"POST {cluster_path}/topics HTTP/1.1\r\nHost: weir\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    chunk = b"a" * 1024
    with socket.create_connection(("127.0.0.1", broker.http_port), timeout=10) as sock:
        sock.sendall(head)
        for _ in range(ADMIN_BODY_BYTES_MAX // len(chunk)):
            sock.sendall(b"400\r\n" + chunk + b"\r\n")
        sock.sendall(b"1\r\na\r\n")
        answer = b""
        while b"41301" not in answer and (piece := sock.recv(4096)):
            answer += piece  # until the body, or the broker closes
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert b"41301" in answer


@pytest.mark.parametrize(
    "body",
    [
        {"topic_name": "bad/name"},
        {"topic_name": "a" * 250},
        {"topic_name": ".."},
        {"topic_name": 7},
        {"topic_name": "ok-name", "partitions_count": "3"},
        {"topic_name": "ok-name", "partitions_count": 0},
        {"topic_name": "ok-name", "partitions_count": 2**31},
        {"topic_name": "ok-name", "replication_factor": 2**15},
        {"topic_name": "ok-name", "partitions_count": True},
        {"topic_name": "ok-name", "configs": [{"name": "retention.ms", "value": 5}]},
        {"topic_name": "ok-name", "configs": "retention.ms=5"},
        {"topic_name": "ok-name", "validate_only": "yes"},
    ],
)
def test_invalid_names_and_numbers_are_400(
    http: httpx.Client, cluster_path: str, body: dict[str, Any]
) -> None:
    error(http.post(f"{cluster_path}/topics", json=body), 400)


def test_unknown_resources_are_404_and_malformed_ids_400(
    http: httpx.Client, cluster_path: str
) -> None:
    topic = create_topic(http, cluster_path, partitions=1)
    for path in (
        "/v3/clusters/no-such-cluster",
        "/v3/clusters/no-such-cluster/topics",
        f"{cluster_path}/topics/no-such-topic",
        f"{cluster_path}/topics/no-such-topic/partitions",
        f"{cluster_path}/topics/no-such-topic/configs",
        f"{cluster_path}/topics/{topic}/partitions/5",
        f"{cluster_path}/topics/{topic}/partitions/0/replicas/9",
        f"{cluster_path}/topics/{topic}/configs/no.such.config",
        f"{cluster_path}/brokers/42",
        f"{cluster_path}/share-groups/no-such-group",
    ):
        assert error(http.get(path), 404)["error_code"] == 40401, path
    for path in (
        f"{cluster_path}/topics/{topic}/partitions/x",
        f"{cluster_path}/topics/{topic}/partitions/-1",
        f"{cluster_path}/topics/{topic}/partitions/99999999999",
        f"{cluster_path}/brokers/one",
    ):
        error(http.get(path), 400)
    error(http.delete(f"{cluster_path}/topics/no-such-topic"), 404)


def test_wrong_content_type_method_or_query_is_4xx(http: httpx.Client, cluster_path: str) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    error(http.post(f"{cluster_path}/topics", content=b"topic_name=x", headers=form), 415)
    assert http.patch(f"{cluster_path}/topics").status_code == 405
    assert http.get(f"{cluster_path}/no-such-resource").status_code == 404
    error(http.get(f"{cluster_path}/acls", params={"operation": "FLY"}), 400)
    error(http.get(f"{cluster_path}/acls?operation=READ&operation=WRITE"), 400)
    error(http.delete(f"{cluster_path}/acls"), 400)  # no resource_type: refused, not "all"
    error(http.get(f"{cluster_path}/transactions", params={"producer_id": "-1"}), 400)


# -- redrive ---------------------------------------------------------------------------------


def dead_letters_of(
    broker: WeirProcess, http: httpx.Client, cluster_path: str, count: int
) -> tuple[str, str, str]:
    """A source topic (2 partitions), a dead-letter topic holding `count` dead letters
    of a group (Kafka 4.4's headers, as the broker writes them), each followed by
    another group's dead letter and a plain record: (source, dlq, group)."""
    source = create_topic(http, cluster_path, partitions=2)
    dlq = create_topic(http, cluster_path, partitions=1)
    group = f"{source}-share"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(count):
        headers = dead_letter_headers(group, source, i % 2, 10 + i, 1, ArchiveReason.REJECTED)
        producer.produce(dlq, key=f"k{i}", value=f"v{i}", headers=headers)
        other = dead_letter_headers("someone-else", source, 0, i, 1, ArchiveReason.REJECTED)
        producer.produce(dlq, key=b"o", value=b"other", headers=other)
        producer.produce(dlq, key=b"p", value=b"plain")
    assert producer.flush(CLIENT_WAIT_S) == 0
    return source, dlq, group


def read_all(broker: WeirProcess, topic: str, partitions: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = []
    misses = 0
    while misses < 6:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            misses += 1
            continue
        records.append(message)
    consumer.close()
    return records


def test_redrive_writes_each_dead_letter_back_to_its_source_partition_once(
    broker: WeirProcess, http: httpx.Client, cluster_path: str
) -> None:
    source, dlq, group = dead_letters_of(broker, http, cluster_path, 4)
    path = f"{cluster_path}/share-groups/{group}/redrive"
    first = ok(http.post(path, json={"from_topic": dlq, "max_records": 1}))
    assert (first["redriven"], first["records_left"]) == (1, 11)
    rest = ok(http.post(path, json={"from_topic": dlq}))
    assert (rest["redriven"], rest["other_records_passed"], rest["records_left"]) == (3, 8, 0)
    assert rest["progress_group"] == f"weir-redrive.{group}"
    assert ok(http.post(path, json={"from_topic": dlq}))["redriven"] == 0
    records = read_all(broker, source, 2)
    assert sorted((m.partition(), m.value()) for m in records) == [
        (0, b"v0"),
        (0, b"v2"),
        (1, b"v1"),
        (1, b"v3"),
    ]
    headers = dict(records[0].headers())
    assert not any(name.startswith("__dlq.errors.") for name in headers)
    assert headers["weir.redrive.source"].startswith(f"{dlq}/0/".encode())


def test_an_http_redrive_finishes_what_a_killed_cli_redrive_left_without_writing_twice(
    broker: WeirProcess, http: httpx.Client, cluster_path: str
) -> None:
    """`weir queue redrive` SIGKILLs itself after producing its first batch, before
    its progress commit; the HTTP redrive finds the batch by the CLI's intent."""
    source, dlq, group = dead_letters_of(broker, http, cluster_path, 5)
    env = clean_environment(WEIR_REDRIVE_FAILPOINT="after-produce")
    killed = run_cli(
        "queue",
        "redrive",
        "--group",
        group,
        "--from",
        dlq,
        "--bootstrap",
        broker.bootstrap,
        env=env,
    )
    assert killed.returncode == -9, killed.stderr
    assert len(read_all(broker, source, 2)) == 5
    document = ok(
        http.post(f"{cluster_path}/share-groups/{group}/redrive", json={"from_topic": dlq})
    )
    assert (document["redriven"], document["recovered"]) == (0, 5)
    assert sorted(m.value() for m in read_all(broker, source, 2)) == [
        b"v0",
        b"v1",
        b"v2",
        b"v3",
        b"v4",
    ]


def test_redrive_needs_a_dead_letter_topic(http: httpx.Client, cluster_path: str) -> None:
    path = f"{cluster_path}/share-groups/group-without-dlq/redrive"
    assert "no dead-letter topic" in error(http.post(path), 409)["message"]
    error(http.post(path, json={"max_records": 0}), 400)
    error(http.post(path, json={"from_topic": "bad/name"}), 400)
