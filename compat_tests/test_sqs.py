"""The SQS-compatible API (weir/broker/http/sqs, docs/http-sqs.md) against a real
`weir serve`, with real boto3 and the AWS CLI pointed at its HTTP listener
(`endpoint_url`), and raw HTTP for hostile input. One broker for the module."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from confluent_kafka import Consumer, Producer

from compat_tests.harness import WeirProcess

pytestmark = pytest.mark.timeout(120)

# Dummy credentials and region: boto3 and the CLI never look at ~/.aws or the network.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "weir-test",
    "AWS_SECRET_ACCESS_KEY": "weir-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}
SETTINGS = """
# Queues may be each other's dead-letter queues (SQS names have no `dlq.` prefix).
errors_deadletterqueue_topic_name_prefix = ""

[limits]
# SQS requests carry bodies (a batch up to 256 KiB, JSON-escaped): the listener's
# default bound (8 KiB, for GET endpoints) is raised; the SQS API bounds its own at 2 MiB.
http_body_bytes_max = 4194304
"""


@pytest.fixture(scope="module")
def sqs_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("weir-sqs"), SETTINGS)
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


@pytest.fixture
def sqs(sqs_broker: WeirProcess) -> Iterator[Any]:
    yield _client(sqs_broker)
    assert sqs_broker.is_running(), "the broker died during the test"


def _client(broker: WeirProcess, **credentials: str) -> Any:
    session = boto3.session.Session(
        aws_access_key_id=credentials.get("key", AWS_ENV["AWS_ACCESS_KEY_ID"]),
        aws_secret_access_key=credentials.get("secret", AWS_ENV["AWS_SECRET_ACCESS_KEY"]),
        region_name="us-east-1",
    )
    return session.client(
        "sqs",
        endpoint_url=broker.http_url,
        config=Config(retries={"max_attempts": 1}, read_timeout=30),
    )


def _queue(sqs: Any, **attributes: str) -> str:
    name = f"q-{uuid.uuid4().hex[:12]}"
    url: str = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return url


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


# -- queues ----------------------------------------------------------------------------


def test_queue_lifecycle_create_get_list_delete(sqs: Any, sqs_broker: WeirProcess) -> None:
    prefix = f"life{uuid.uuid4().hex[:6]}"
    urls = [sqs.create_queue(QueueName=f"{prefix}-{i}")["QueueUrl"] for i in range(3)]
    assert urls[0] == f"{sqs_broker.http_url}/000000000000/{prefix}-0"
    assert sqs.get_queue_url(QueueName=f"{prefix}-1")["QueueUrl"] == urls[1]
    # Creating it again with the same attributes answers the same URL.
    assert sqs.create_queue(QueueName=f"{prefix}-1")["QueueUrl"] == urls[1]
    assert sqs.list_queues(QueueNamePrefix=prefix)["QueueUrls"] == urls
    first = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2)
    assert first["QueueUrls"] == urls[:2]
    rest = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2, NextToken=first["NextToken"])
    assert rest["QueueUrls"] == urls[2:] and "NextToken" not in rest
    sqs.delete_queue(QueueUrl=urls[0])
    assert sqs.list_queues(QueueNamePrefix=prefix)["QueueUrls"] == urls[1:]
    with pytest.raises(ClientError) as missing:
        sqs.get_queue_url(QueueName=f"{prefix}-0")
    assert _code(missing) == "AWS.SimpleQueueService.NonExistentQueue"
    assert missing.value.response["Error"]["QueryErrorCode"] == "QueueDoesNotExist"


def test_create_queue_with_other_attributes_is_queue_name_exists(sqs: Any) -> None:
    url = _queue(sqs, VisibilityTimeout="40")
    name = url.rsplit("/", 1)[1]
    with pytest.raises(ClientError) as exc:
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "41"})
    assert _code(exc) == "QueueAlreadyExists"


def test_a_kafka_topic_is_not_taken_for_a_queue(sqs: Any, sqs_broker: WeirProcess) -> None:
    name = f"plain-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": sqs_broker.bootstrap})
    producer.produce(name, b"x")  # auto-creates a plain topic
    producer.flush(10)
    with pytest.raises(ClientError) as missing:
        sqs.get_queue_url(QueueName=name)
    assert _code(missing) == "AWS.SimpleQueueService.NonExistentQueue"
    with pytest.raises(ClientError) as exists:
        sqs.create_queue(QueueName=name)
    assert _code(exists) == "QueueAlreadyExists"


def test_queue_attributes_round_trip_and_reach_topic_and_group_configs(
    sqs: Any, sqs_broker: WeirProcess
) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    url = _queue(sqs, VisibilityTimeout="20", MessageRetentionPeriod="3600")
    sqs.set_queue_attributes(
        QueueUrl=url, Attributes={"DelaySeconds": "3", "ReceiveMessageWaitTimeSeconds": "2"}
    )
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    name = url.rsplit("/", 1)[1]
    assert attributes["VisibilityTimeout"] == "20"
    assert attributes["MessageRetentionPeriod"] == "3600"
    assert attributes["DelaySeconds"] == "3"
    assert attributes["ReceiveMessageWaitTimeSeconds"] == "2"
    assert attributes["MaximumMessageSize"] == "262144"
    assert attributes["QueueArn"] == f"arn:aws:sqs:weir:000000000000:{name}"
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert int(attributes["CreatedTimestamp"]) <= int(attributes["LastModifiedTimestamp"])
    only = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])["Attributes"]
    assert only == {"DelaySeconds": "3"}
    admin = AdminClient({"bootstrap.servers": sqs_broker.bootstrap})
    topic = ConfigResource(ResourceType.TOPIC, name)
    group = ConfigResource(ResourceType.GROUP, f"sqs.{name}")
    described = {r.restype: f.result() for r, f in admin.describe_configs([topic, group]).items()}
    assert described[ResourceType.TOPIC]["retention.ms"].value == "3600000"
    assert described[ResourceType.TOPIC]["weir.share.record.ttl.ms"].value == "3600000"
    group_configs = described[ResourceType.GROUP]
    assert group_configs["share.record.lock.duration.ms"].value == "20000"
    assert group_configs["share.auto.offset.reset"].value == "earliest"
    with pytest.raises(ClientError) as bad_name:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"NoSuchThing": "1"})
    assert _code(bad_name) == "InvalidAttributeName"
    with pytest.raises(ClientError) as bad_value:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "43201"})
    assert _code(bad_value) == "InvalidAttributeValue"


# -- messages --------------------------------------------------------------------------


def _attributes_md5(attributes: dict[str, dict[str, Any]]) -> str:
    """SQS's MD5OfMessageAttributes, written out here as the SQS docs give it."""
    digest = hashlib.md5()
    for name in sorted(attributes):
        attribute = attributes[name]
        data_type = attribute["DataType"]
        for part in (name.encode(), data_type.encode()):
            digest.update(len(part).to_bytes(4, "big") + part)
        if data_type.startswith("Binary"):
            value = attribute["BinaryValue"]
            digest.update(b"\x02" + len(value).to_bytes(4, "big") + value)
        else:
            value = attribute["StringValue"].encode()
            digest.update(b"\x01" + len(value).to_bytes(4, "big") + value)
    return digest.hexdigest()


def test_send_receive_delete_keeps_body_attributes_and_their_md5s(sqs: Any) -> None:
    url = _queue(sqs)
    attributes = {
        "city": {"DataType": "String", "StringValue": "Zürich"},
        "count": {"DataType": "Number", "StringValue": "42"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff\x10"},
        "price": {"DataType": "Number.float", "StringValue": "1.5"},
    }
    body = "hello ✓ world"
    sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
    assert sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest()
    assert sent["MD5OfMessageAttributes"] == _attributes_md5(attributes)
    received = sqs.receive_message(
        QueueUrl=url,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
        WaitTimeSeconds=5,
    )["Messages"]
    assert len(received) == 1
    message = received[0]
    assert message["Body"] == body
    assert message["MessageId"] == sent["MessageId"]
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert message["MessageAttributes"] == attributes
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    sent_ms = int(message["Attributes"]["SentTimestamp"])
    assert abs(sent_ms - time.time() * 1000) < 60_000
    assert int(message["Attributes"]["ApproximateFirstReceiveTimestamp"]) >= sent_ms
    # Only the attributes asked for, and their digest.
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    again = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["city"], WaitTimeSeconds=5)
    (second,) = again["Messages"]
    assert second["MessageAttributes"] == {"city": attributes["city"]}
    assert second["MD5OfMessageAttributes"] == _attributes_md5({"city": attributes["city"]})
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
    depth = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert depth["ApproximateNumberOfMessages"] == "0"
    assert depth["ApproximateNumberOfMessagesNotVisible"] == "0"
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)


def test_batches_send_receive_and_delete_ten(sqs: Any) -> None:
    url = _queue(sqs)
    entries = [{"Id": f"m{i}", "MessageBody": f"body {i}"} for i in range(10)]
    sent = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert sorted(s["Id"] for s in sent["Successful"]) == sorted(e["Id"] for e in entries)
    assert not sent.get("Failed")
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len(received) < 10 and time.monotonic() < deadline:
        received += sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2
        ).get("Messages", [])
    assert sorted(m["Body"] for m in received) == sorted(e["MessageBody"] for e in entries)
    deleted = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received[:9])
        ]
        + [{"Id": "bad", "ReceiptHandle": "not-a-handle"}],
    )
    assert len(deleted["Successful"]) == 9
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received[9]["ReceiptHandle"])
    assert deleted["Failed"] == [
        {
            "Id": "bad",
            "SenderFault": True,
            "Code": "ReceiptHandleIsInvalid",
            "Message": deleted["Failed"][0]["Message"],
        }
    ]
    depth = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert depth == {
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "0",
    }


def test_a_delete_batch_of_one_receive_is_one_acknowledgement(
    sqs: Any, sqs_broker: WeirProcess
) -> None:
    url = _queue(sqs)
    entries = [{"Id": f"m{i}", "MessageBody": f"body {i}"} for i in range(10)]
    sqs.send_message_batch(QueueUrl=url, Entries=entries)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2)
    assert len(received["Messages"]) == 10
    label = 'api="SHARE_ACKNOWLEDGE"'
    before = sqs_broker.metric_samples("weir_requests_total").get(label, 0)
    deleted = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(received["Messages"])
        ],
    )
    assert len(deleted["Successful"]) == 10
    assert sqs_broker.metric_samples("weir_requests_total")[label] - before == 1


def test_batch_requests_outside_sqs_limits_get_sqs_errors(sqs: Any) -> None:
    url = _queue(sqs)
    cases = [
        (
            [{"Id": f"m{i}", "MessageBody": "x"} for i in range(11)],
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        ),
        (
            [{"Id": "same", "MessageBody": "x"}, {"Id": "same", "MessageBody": "y"}],
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        ),
        ([], "AWS.SimpleQueueService.EmptyBatchRequest"),
        ([{"Id": "no spaces", "MessageBody": "x"}], "AWS.SimpleQueueService.InvalidBatchEntryId"),
        (
            [{"Id": f"m{i}", "MessageBody": "x" * 200_000} for i in range(2)],
            "AWS.SimpleQueueService.BatchRequestTooLong",
        ),
    ]
    for entries, code in cases:
        with pytest.raises(ClientError) as exc:
            sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert _code(exc) == code, entries[:1]


def test_long_poll_returns_when_a_message_arrives(sqs: Any) -> None:
    url = _queue(sqs)
    sender = _client_like(sqs)
    timer = threading.Timer(1.0, lambda: sender.send_message(QueueUrl=url, MessageBody="late"))
    started = time.monotonic()
    timer.start()
    try:
        answer = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10)
    finally:
        timer.join()
    elapsed = time.monotonic() - started
    assert [m["Body"] for m in answer["Messages"]] == ["late"]
    assert 0.8 < elapsed < 5, elapsed
    # With nothing to receive it waits WaitTimeSeconds, then answers no messages.
    started = time.monotonic()
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)
    assert 1.8 < time.monotonic() - started < 5


def _client_like(sqs: Any) -> Any:
    return boto3.session.Session(
        aws_access_key_id="weir-test",
        aws_secret_access_key="weir-test-secret",
        region_name="us-east-1",
    ).client("sqs", endpoint_url=sqs.meta.endpoint_url)


def test_concurrent_receivers_share_the_messages_without_overlap(sqs: Any) -> None:
    url = _queue(sqs, VisibilityTimeout="60")
    bodies = [f"job {i}" for i in range(40)]
    for start in range(0, 40, 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies[start : start + 10])
            ],
        )
    got: list[list[str]] = [[] for _ in range(4)]

    def work(index: int) -> None:
        client = _client_like(sqs)
        deadline = time.monotonic() + 30
        while sum(len(g) for g in got) < 40 and time.monotonic() < deadline:
            answer = client.receive_message(QueueUrl=url, MaxNumberOfMessages=3, WaitTimeSeconds=1)
            for message in answer.get("Messages", []):
                got[index].append(message["Body"])
                client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    workers = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    everything = [body for bodies_got in got for body in bodies_got]
    assert sorted(everything) == sorted(bodies)  # each exactly once
    assert sum(1 for bodies_got in got if bodies_got) >= 2  # shared, not one taking all


def test_visibility_timeout_hides_then_redelivers_with_receive_count(sqs: Any) -> None:
    url = _queue(sqs, VisibilityTimeout="30")
    sqs.send_message(QueueUrl=url, MessageBody="job")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=2, WaitTimeSeconds=5)["Messages"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    started = time.monotonic()
    second = sqs.receive_message(
        QueueUrl=url, WaitTimeSeconds=10, AttributeNames=["ApproximateReceiveCount"]
    )["Messages"]
    assert time.monotonic() - started < 5
    assert second[0]["MessageId"] == first[0]["MessageId"]
    assert second[0]["Attributes"]["ApproximateReceiveCount"] == "2"
    # The first receipt's delivery is over: its visibility cannot change, its delete is a no-op.
    with pytest.raises(ClientError) as stale:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"], VisibilityTimeout=10
        )
    assert _code(stale) == "AWS.SimpleQueueService.MessageNotInflight"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    # Extending the second receipt's lock keeps it hidden past its first timeout.
    sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[{"Id": "a", "ReceiptHandle": second[0]["ReceiptHandle"], "VisibilityTimeout": 30}],
    )
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second[0]["ReceiptHandle"])


def test_delay_seconds_holds_messages_back(sqs: Any) -> None:
    url = _queue(sqs, DelaySeconds="2")
    sqs.send_message(QueueUrl=url, MessageBody="queue delay")
    sqs.send_message(QueueUrl=url, MessageBody="no delay", DelaySeconds=0)
    first = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in first] == ["no delay"]
    delayed = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )
    assert delayed["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"
    started = time.monotonic()
    later = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10)["Messages"]
    assert [m["Body"] for m in later] == ["queue delay"]
    assert time.monotonic() - started < 5


def test_purge_queue_drops_what_was_sent(sqs: Any) -> None:
    url = _queue(sqs)
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "old"} for i in range(5)]
    )
    sqs.purge_queue(QueueUrl=url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    sqs.send_message(QueueUrl=url, MessageBody="new")
    assert [
        m["Body"] for m in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    ] == ["new"]


def test_redrive_policy_moves_a_message_to_the_dead_letter_queue(sqs: Any) -> None:
    dead_url = _queue(sqs)
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": "2"})
    url = _queue(sqs, RedrivePolicy=policy)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])[
        "Attributes"
    ] == {"RedrivePolicy": policy}
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    for count in ("1", "2"):
        (message,) = sqs.receive_message(
            QueueUrl=url, VisibilityTimeout=1, WaitTimeSeconds=10, AttributeNames=["All"]
        )["Messages"]
        assert message["Attributes"]["ApproximateReceiveCount"] == count
    dead = sqs.receive_message(QueueUrl=dead_url, WaitTimeSeconds=15, AttributeNames=["All"])
    (letter,) = dead["Messages"]
    assert letter["Body"] == "poison"
    source_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    assert letter["Attributes"]["DeadLetterQueueSourceArn"] == source_arn
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)
    sources = sqs.list_dead_letter_source_queues(QueueUrl=dead_url)["queueUrls"]
    assert sources == [url]


def test_sqs_and_kafka_clients_share_the_queue_topic(sqs: Any, sqs_broker: WeirProcess) -> None:
    url = _queue(sqs)
    name = url.rsplit("/", 1)[1]
    sqs.send_message(
        QueueUrl=url,
        MessageBody="from sqs",
        MessageAttributes={"k": {"DataType": "String", "StringValue": "v"}},
    )
    producer = Producer({"bootstrap.servers": sqs_broker.bootstrap})
    producer.produce(name, b"from kafka", headers=[("sqs.attr.origin", b"String:kafka")])
    producer.flush(10)
    consumer = Consumer(
        {
            "bootstrap.servers": sqs_broker.bootstrap,
            "group.id": f"g-{name}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([name])
    seen: list[Any] = []
    deadline = time.monotonic() + 20
    while len(seen) < 2 and time.monotonic() < deadline:
        record = consumer.poll(1.0)
        if record is not None and not record.error():
            seen.append(record)
    consumer.close()
    assert [r.value() for r in seen] == [b"from sqs", b"from kafka"]
    assert ("sqs.attr.k", b"String:v") in seen[0].headers()
    received: list[dict[str, Any]] = []
    while len(received) < 2 and time.monotonic() < deadline:
        received += sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2, MessageAttributeNames=["All"]
        ).get("Messages", [])
    by_body = {m["Body"]: m for m in received}
    assert by_body["from kafka"]["MessageAttributes"] == {
        "origin": {"DataType": "String", "StringValue": "kafka"}
    }


# -- errors and limits -----------------------------------------------------------------


def test_sqs_error_codes_for_bad_parameters(sqs: Any) -> None:
    url = _queue(sqs, MaximumMessageSize="1024")
    checks = [
        (lambda: sqs.send_message(QueueUrl=url, MessageBody="x" * 1025), "InvalidParameterValue"),
        (
            lambda: sqs.send_message(QueueUrl=url, MessageBody="bad \x01 char"),
            "InvalidMessageContents",
        ),
        (
            lambda: sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=901),
            "InvalidParameterValue",
        ),
        (
            lambda: sqs.send_message(
                QueueUrl=url,
                MessageBody="x",
                MessageAttributes={"AWS.reserved": {"DataType": "String", "StringValue": "v"}},
            ),
            "InvalidParameterValue",
        ),
        (
            lambda: sqs.send_message(
                QueueUrl=url,
                MessageBody="x",
                MessageAttributes={"n": {"DataType": "Number", "StringValue": "abc"}},
            ),
            "InvalidParameterValue",
        ),
        (
            lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11),
            "InvalidParameterValue",
        ),
        (lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=21), "InvalidParameterValue"),
        (
            lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle="garbage"),
            "ReceiptHandleIsInvalid",
        ),
        (lambda: sqs.create_queue(QueueName="bad name!"), "InvalidParameterValue"),
        (
            lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Nope"]),
            "InvalidAttributeName",
        ),
        (
            lambda: sqs.send_message(QueueUrl=url.replace("/q-", "/none-"), MessageBody="x"),
            "AWS.SimpleQueueService.NonExistentQueue",
        ),
    ]
    for call, code in checks:
        with pytest.raises(ClientError) as exc:
            call()
        assert _code(exc) == code, exc.value.response["Error"]


def test_a_message_may_be_256_kib_and_not_a_byte_more(sqs: Any) -> None:
    url = _queue(sqs)
    emoji = "\U0001f600" * (262_144 // 4)  # 4 bytes each in UTF-8, 12 JSON-escaped
    sqs.send_message(QueueUrl=url, MessageBody=emoji)
    with pytest.raises(ClientError) as over:
        sqs.send_message(QueueUrl=url, MessageBody=emoji + "x")
    assert _code(over) == "InvalidParameterValue"
    with pytest.raises(ClientError) as attributes_count:  # attributes count towards it
        sqs.send_message(
            QueueUrl=url,
            MessageBody="x" * 262_000,
            MessageAttributes={"a": {"DataType": "String", "StringValue": "y" * 200}},
        )
    assert _code(attributes_count) == "InvalidParameterValue"
    (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert message["Body"] == emoji


def test_receipt_handles_are_tamper_evident(sqs: Any) -> None:
    url = _queue(sqs)
    other = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="m")
    (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    handle = message["ReceiptHandle"]
    raw = bytearray(base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)))
    raw[10] ^= 1
    forged = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    for bad in (forged, handle[:-3], handle + "AAAA"):
        with pytest.raises(ClientError) as exc:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=bad)
        assert _code(exc) == "ReceiptHandleIsInvalid"
    with pytest.raises(ClientError) as exc:  # another queue's handle
        sqs.delete_message(QueueUrl=other, ReceiptHandle=handle)
    assert _code(exc) == "ReceiptHandleIsInvalid"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)


def _post(broker: WeirProcess, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(broker.http_url + "/", content=body, headers=headers, timeout=30)


JSON_HEADERS = {"Content-Type": "application/x-amz-json-1.0"}


@pytest.mark.parametrize(
    ("body", "headers", "status", "query_code"),
    [
        (b"{not json", {"X-Amz-Target": "AmazonSQS.ListQueues"}, 400, "MalformedQueryString"),
        (b"[1, 2]", {"X-Amz-Target": "AmazonSQS.ListQueues"}, 400, "MalformedQueryString"),
        (
            b"[" * 200_000 + b"]" * 200_000,
            {"X-Amz-Target": "AmazonSQS.ListQueues"},
            400,
            "MalformedQueryString",
        ),
        (
            b'{"MaxNumberOfMessages": 1' + b"0" * 5000 + b"}",
            {"X-Amz-Target": "AmazonSQS.ListQueues"},
            400,
            "MalformedQueryString",
        ),
        (b"\xff\xfe", {"X-Amz-Target": "AmazonSQS.ListQueues"}, 400, "MalformedQueryString"),
        (b"{}", {"X-Amz-Target": "AmazonSQS.DropEverything"}, 400, "InvalidAction"),
        (b"{}", {"X-Amz-Target": "AmazonSQS." + "A" * 2_000}, 400, "InvalidAction"),
        (b"{}", {}, 400, "InvalidAction"),
        (b"{}", {"X-Amz-Target": "AmazonSQS.SendMessage"}, 400, "MissingParameter"),
        (b'{"QueueUrl": 5}', {"X-Amz-Target": "AmazonSQS.SendMessage"}, 400, "MissingParameter"),
        (
            b'{"QueueName": ["x"]}',
            {"X-Amz-Target": "AmazonSQS.CreateQueue"},
            400,
            "InvalidParameterValue",
        ),
        (
            b"x" * (3 * 1024 * 1024),
            {"X-Amz-Target": "AmazonSQS.ListQueues"},
            413,
            "RequestEntityTooLarge",
        ),
        (
            b"Action=ListQueues",
            {"X-Amz-Target": "", "Content-Type": "application/x-www-form-urlencoded"},
            400,
            "InvalidAction",
        ),
    ],
    ids=[
        "bad-json",
        "json-array",
        "deep-nesting",
        "huge-number",
        "not-utf8",
        "unknown-action",
        "huge-action",
        "no-target",
        "missing-param",
        "wrong-type",
        "wrong-type-name",
        "huge-body",
        "query-protocol",
    ],
)
def test_hostile_requests_get_sqs_errors_and_the_broker_lives(
    sqs_broker: WeirProcess, body: bytes, headers: dict[str, str], status: int, query_code: str
) -> None:
    sent = {**JSON_HEADERS, **headers}
    if not sent.get("X-Amz-Target"):
        sent.pop("X-Amz-Target", None)
    response = _post(sqs_broker, body, sent)
    assert response.status_code == status, response.text
    assert response.headers["x-amzn-query-error"].split(";")[0] == query_code
    assert "__type" in response.json()
    assert sqs_broker.is_running()
    assert httpx.get(sqs_broker.http_url + "/health/live", timeout=5).status_code == 200


# -- the AWS CLI -----------------------------------------------------------------------


def _aws(broker: WeirProcess, *args: str) -> Any:
    executable = Path(sys.executable).parent / "aws"
    result = subprocess.run(
        [str(executable), "sqs", *args, "--endpoint-url", broker.http_url, "--output", "json"],
        env={**os.environ, **AWS_ENV},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_aws_cli_creates_sends_receives_and_deletes(sqs_broker: WeirProcess) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    url = _aws(sqs_broker, "create-queue", "--queue-name", name)["QueueUrl"]
    assert url.endswith(f"/000000000000/{name}")
    sent = _aws(
        sqs_broker,
        "send-message",
        "--queue-url",
        url,
        "--message-body",
        "from the cli",
        "--message-attributes",
        '{"k": {"DataType": "String", "StringValue": "v"}}',
    )
    assert sent["MD5OfMessageBody"] == hashlib.md5(b"from the cli").hexdigest()
    received = _aws(
        sqs_broker,
        "receive-message",
        "--queue-url",
        url,
        "--wait-time-seconds",
        "5",
        "--message-attribute-names",
        "All",
    )
    (message,) = received["Messages"]
    assert message["Body"] == "from the cli"
    assert message["MessageAttributes"] == {"k": {"DataType": "String", "StringValue": "v"}}
    _aws(
        sqs_broker,
        "delete-message",
        "--queue-url",
        url,
        "--receipt-handle",
        message["ReceiptHandle"],
    )
    attributes = _aws(
        sqs_broker, "get-queue-attributes", "--queue-url", url, "--attribute-names", "All"
    )
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"
    assert url in _aws(sqs_broker, "list-queues", "--queue-name-prefix", name)["QueueUrls"]
    _aws(sqs_broker, "delete-queue", "--queue-url", url)


# -- the docs' snippet -----------------------------------------------------------------


def test_the_boto3_snippet_of_the_docs_runs(
    sqs_broker: WeirProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = (Path(__file__).parent.parent / "docs" / "http-sqs.md").read_text()
    snippet = docs.split("```python\n", 1)[1].split("```", 1)[0]
    exec(snippet.replace("http://127.0.0.1:8090", sqs_broker.http_url), {})  # noqa: S102
    assert capsys.readouterr().out == "resize photo 42 1024\n"


# -- moving dead letters back ----------------------------------------------------------


def _arn(sqs: Any, url: str) -> str:
    return str(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
    )


def _dead_lettered(sqs: Any, bodies: list[str]) -> tuple[str, str]:
    """A source queue (maxReceiveCount 2) whose messages `bodies` all went to its
    dead-letter queue: (source URL, dead-letter queue URL)."""
    dead_url = _queue(sqs)
    policy = json.dumps({"deadLetterTargetArn": _arn(sqs, dead_url), "maxReceiveCount": 2})
    url = _queue(sqs, RedrivePolicy=policy)
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)]
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        depth = sqs.get_queue_attributes(
            QueueUrl=dead_url, AttributeNames=["ApproximateNumberOfMessages"]
        )
        if int(depth["Attributes"]["ApproximateNumberOfMessages"]) == len(bodies):
            return url, dead_url
        sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=1, WaitTimeSeconds=1
        )
    raise AssertionError("the messages did not reach the dead-letter queue")


def test_a_message_move_task_returns_dead_letters_to_their_source(sqs: Any) -> None:
    bodies = ["a", "b", "c"]
    url, dead_url = _dead_lettered(sqs, bodies)
    dead_arn = _arn(sqs, dead_url)
    handle = sqs.start_message_move_task(SourceArn=dead_arn)["TaskHandle"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        (task,) = sqs.list_message_move_tasks(SourceArn=dead_arn)["Results"]
        if task["Status"] != "RUNNING":
            break
        time.sleep(0.2)
    assert task["Status"] == "COMPLETED", task
    assert task["ApproximateNumberOfMessagesMoved"] == 3
    assert task["ApproximateNumberOfMessagesToMove"] == 3
    with pytest.raises(ClientError) as over:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert _code(over) == "ResourceNotFoundException"
    back: list[dict[str, Any]] = []
    while len(back) < 3 and time.monotonic() < deadline:
        back += sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=2,
            AttributeNames=["ApproximateReceiveCount"],
        ).get("Messages", [])
    assert sorted(m["Body"] for m in back) == bodies
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in back} == {"1"}
    assert "Messages" not in sqs.receive_message(QueueUrl=dead_url, WaitTimeSeconds=1)


def test_a_message_move_task_can_target_a_queue_and_be_cancelled(sqs: Any) -> None:
    bodies = [f"m{i}" for i in range(5)]
    _, dead_url = _dead_lettered(sqs, bodies)
    dead_arn = _arn(sqs, dead_url)
    other = _queue(sqs)
    handle = sqs.start_message_move_task(
        SourceArn=dead_arn, DestinationArn=_arn(sqs, other), MaxNumberOfMessagesPerSecond=1
    )["TaskHandle"]
    with pytest.raises(ClientError) as second:  # one running task per source
        sqs.start_message_move_task(SourceArn=dead_arn)
    assert _code(second) == "InvalidParameterValue"
    time.sleep(1.5)
    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]
    assert 1 <= moved < 5
    (task,) = sqs.list_message_move_tasks(SourceArn=dead_arn, MaxResults=10)["Results"]
    assert task["Status"] == "CANCELLED" and "TaskHandle" not in task
    received = sqs.receive_message(QueueUrl=other, MaxNumberOfMessages=10, WaitTimeSeconds=2)
    assert len(received["Messages"]) == moved
    with pytest.raises(ClientError) as not_dead_letters:
        sqs.start_message_move_task(SourceArn=_arn(sqs, other))
    assert _code(not_dead_letters) == "InvalidParameterValue"


def _fifo(sqs: Any, **attributes: str) -> str:
    name = f"f-{uuid.uuid4().hex[:8]}.fifo"
    url: str = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true", **attributes})[
        "QueueUrl"
    ]
    return url


def test_a_fifo_queue_keeps_each_message_group_in_order_one_receive_at_a_time(sqs: Any) -> None:
    url = _fifo(sqs, ContentBasedDeduplication="true")
    sent = [
        sqs.send_message(QueueUrl=url, MessageBody=f"{group}{i}", MessageGroupId=group)
        for group in "AB"
        for i in range(3)
    ]
    assert [int(s["SequenceNumber"]) for s in sent] == sorted(
        int(s["SequenceNumber"]) for s in sent
    )
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, AttributeNames=["All"])
    assert [m["Body"] for m in first["Messages"]] == ["A0", "A1"]
    attributes = first["Messages"][0]["Attributes"]
    assert attributes["MessageGroupId"] == "A"
    assert attributes["SequenceNumber"] == sent[0]["SequenceNumber"]
    assert attributes["MessageDeduplicationId"] == hashlib.sha256(b"A0").hexdigest()
    # Group A is in flight: its A2 waits; group B is delivered, in order.
    second = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    assert [m["Body"] for m in second["Messages"]] == ["B0", "B1", "B2"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    for message in first["Messages"]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    third = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)
    assert [m["Body"] for m in third["Messages"]] == ["A2"]
    # B0 made visible again while B1 and B2 are back too: B0 comes first, then B1, B2.
    sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
            for i, m in enumerate(second["Messages"])
        ],
    )
    again = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=5,
        AttributeNames=["ApproximateReceiveCount"],
    )
    assert [m["Body"] for m in again["Messages"]] == ["B0", "B1", "B2"]
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again["Messages"]} == {"2"}


def test_a_fifo_queue_drops_a_message_sent_again_within_5_minutes(sqs: Any) -> None:
    url = _fifo(sqs)
    first = sqs.send_message(
        QueueUrl=url,
        MessageBody="pay 10",
        MessageGroupId="acct",
        MessageDeduplicationId="payment-1",
    )
    again = sqs.send_message(
        QueueUrl=url,
        MessageBody="pay 10",
        MessageGroupId="acct",
        MessageDeduplicationId="payment-1",
    )
    assert (again["MessageId"], again["SequenceNumber"]) == (
        first["MessageId"],
        first["SequenceNumber"],
    )
    batch = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {
                "Id": "a",
                "MessageBody": "pay 20",
                "MessageGroupId": "acct",
                "MessageDeduplicationId": "payment-2",
            },
            {
                "Id": "b",
                "MessageBody": "pay 20",
                "MessageGroupId": "acct",
                "MessageDeduplicationId": "payment-2",
            },
            {
                "Id": "c",
                "MessageBody": "pay 10",
                "MessageGroupId": "acct",
                "MessageDeduplicationId": "payment-1",
            },
        ],
    )
    by_id = {s["Id"]: s for s in batch["Successful"]}
    assert by_id["a"]["MessageId"] == by_id["b"]["MessageId"]
    assert by_id["c"]["MessageId"] == first["MessageId"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2)
    assert [m["Body"] for m in received["Messages"]] == ["pay 10", "pay 20"]


def test_fifo_and_standard_queues_refuse_each_others_parameters(sqs: Any) -> None:
    fifo = _fifo(sqs)
    standard = _queue(sqs)
    name = f"x-{uuid.uuid4().hex[:8]}"
    checks = [
        (lambda: sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageDeduplicationId="d"),
         "MissingParameter"),
        (lambda: sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g"),
         "InvalidParameterValue"),
        (lambda: sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g",
                                  MessageDeduplicationId="d", DelaySeconds=5),
         "InvalidParameterValue"),
        (lambda: sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g" * 129,
                                  MessageDeduplicationId="d"), "InvalidParameterValue"),
        (lambda: sqs.send_message(QueueUrl=standard, MessageBody="x", MessageDeduplicationId="d"),
         "InvalidParameterValue"),
        (lambda: sqs.create_queue(QueueName=name + ".fifo"), "InvalidParameterValue"),
        (lambda: sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"}),
         "InvalidParameterValue"),
        (lambda: sqs.create_queue(QueueName=name, Attributes={"ContentBasedDeduplication": "true"}),
         "InvalidAttributeName"),
        (lambda: sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": _arn(sqs, standard), "maxReceiveCount": 3})}),
         "InvalidAttributeValue"),
    ]  # fmt: skip
    for call, code in checks:
        with pytest.raises(ClientError) as exc:
            call()
        assert _code(exc) == code, exc.value.response["Error"]


def test_the_sqs_api_answers_only_at_the_root(sqs_broker: WeirProcess) -> None:
    """Other APIs' POST paths (two segments like /v1/subscriptions) are not shadowed."""
    for path in ("/000000000000/queue", "/v1/subscriptions"):
        response = httpx.post(
            sqs_broker.http_url + path,
            content=b"{}",
            headers={**JSON_HEADERS, "X-Amz-Target": "AmazonSQS.ListQueues"},
            timeout=10,
        )
        assert "x-amzn-query-error" not in response.headers, path
        assert "QueueUrls" not in response.text, path  # not answered as ListQueues
    # /v1/subscriptions is push's: it answers (415: not its content type), not SQS
    assert response.status_code == 415, response.text
