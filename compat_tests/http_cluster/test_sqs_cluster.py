"""The SQS-compatible API on a 3-broker cluster over a real etcd, with boto3: a queue
created through one broker is used through any other; messages sent to brokers that
do not lead the queue's partition reach it, a receipt handle made on one broker
deletes on another, the queue is replicated, and its messages outlive its leader."""

from __future__ import annotations

import time
import uuid
from typing import Any

import boto3
import pytest
from botocore.config import Config

from compat_tests.cluster_harness import WeirCluster
from compat_tests.harness import WeirProcess

pytestmark = pytest.mark.timeout(180)


def _sqs(broker: WeirProcess) -> Any:
    return boto3.session.Session(
        aws_access_key_id="weir", aws_secret_access_key="weir", region_name="us-east-1"
    ).client(
        "sqs",
        endpoint_url=broker.http_url,
        config=Config(retries={"max_attempts": 4, "mode": "standard"}, read_timeout=40),
    )


def _receive_all(sqs: Any, url: str, count: int, timeout_s: float) -> list[dict[str, Any]]:
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while len(received) < count and time.monotonic() < deadline:
        received += sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2
        ).get("Messages", [])
    return received


def test_any_broker_serves_the_queue_led_by_one(cluster: WeirCluster) -> None:
    name = f"cq-{uuid.uuid4().hex[:8]}"
    first = cluster.brokers[1]
    url = _sqs(first).create_queue(QueueName=name)["QueueUrl"]
    path = url.split("/", 3)[3]
    cluster.wait_full_isr(name)
    leader = cluster.leader_of(name, 0)
    others = [b for node, b in cluster.brokers.items() if node != leader]
    assert len(cluster.partitions(name)[0].replicas) == 3
    for index, broker in enumerate(cluster.brokers.values()):
        _sqs(broker).send_message(QueueUrl=f"{broker.http_url}/{path}", MessageBody=f"m{index}")
    receiver, deleter = others[0], others[1]
    received = _receive_all(_sqs(receiver), f"{receiver.http_url}/{path}", 3, 30)
    assert sorted(m["Body"] for m in received) == ["m0", "m1", "m2"]
    # Receipt handles made on one non-leader delete through another.
    deleting = _sqs(deleter)
    for message in received:
        deleting.delete_message(
            QueueUrl=f"{deleter.http_url}/{path}", ReceiptHandle=message["ReceiptHandle"]
        )
    attributes = deleting.get_queue_attributes(
        QueueUrl=f"{deleter.http_url}/{path}", AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert "Messages" not in _sqs(cluster.brokers[leader]).receive_message(
        QueueUrl=f"{cluster.brokers[leader].http_url}/{path}", WaitTimeSeconds=2
    )
    # Every broker lists it.
    for broker in cluster.brokers.values():
        listed = _sqs(broker).list_queues(QueueNamePrefix=name)["QueueUrls"]
        assert listed == [f"{broker.http_url}/{path}"]


def test_messages_outlive_the_queue_leader(cluster: WeirCluster) -> None:
    name = f"cf-{uuid.uuid4().hex[:8]}"
    url = _sqs(cluster.brokers[1]).create_queue(QueueName=name)["QueueUrl"]
    path = url.split("/", 3)[3]
    cluster.wait_full_isr(name)
    leader = cluster.leader_of(name, 0)
    survivor = next(b for node, b in cluster.brokers.items() if node != leader)
    sqs = _sqs(survivor)
    survivor_url = f"{survivor.http_url}/{path}"
    sent = sqs.send_message_batch(
        QueueUrl=survivor_url,
        Entries=[{"Id": str(i), "MessageBody": f"job {i}"} for i in range(10)],
    )
    assert len(sent["Successful"]) == 10
    cluster.brokers[leader].kill()
    try:
        cluster.wait_until(
            lambda: cluster.leader_of(name, 0) not in (leader, -1), 30, "a new leader for the queue"
        )
        received = _receive_all(sqs, survivor_url, 10, 60)
        assert sorted(m["Body"] for m in received) == sorted(f"job {i}" for i in range(10))
    finally:
        cluster.brokers[leader].start()


def test_a_fifo_deduplication_id_holds_across_brokers(cluster: WeirCluster) -> None:
    name = f"cf-{uuid.uuid4().hex[:8]}.fifo"
    brokers = list(cluster.brokers.values())
    created = _sqs(brokers[0]).create_queue(QueueName=name, Attributes={"FifoQueue": "true"})
    path = created["QueueUrl"].split("/", 3)[3]
    cluster.wait_full_isr(name)
    answers = [
        _sqs(broker).send_message(
            QueueUrl=f"{broker.http_url}/{path}",
            MessageBody="once",
            MessageGroupId="g",
            MessageDeduplicationId="d1",
        )
        for broker in brokers
    ]
    assert len({(a["MessageId"], a["SequenceNumber"]) for a in answers}) == 1, answers
    receiver = brokers[1]
    received = _receive_all(_sqs(receiver), f"{receiver.http_url}/{path}", 2, 6)
    assert [m["Body"] for m in received] == ["once"]
