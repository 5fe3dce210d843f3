"""The SQS API with security on (a real `weir serve` with the authorizer and
`security.sqs_access_keys`): boto3's AWS Signature Version 4 is checked, each access
key runs as its Weir user under the Kafka API's ACLs, and anything unsigned, signed
with an unknown key, a wrong secret or an old date is refused with SQS's errors."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any
from unittest import mock

import boto3
import httpx
import pytest
from botocore import UNSIGNED
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from compat_tests.harness import WeirProcess

pytestmark = pytest.mark.timeout(120)

KEYS = {"admin": ("AKIDADMIN", "admin-secret"), "alice": ("AKIDALICE", "alice-secret")}
SETTINGS = """
[security]
authorizer_enabled = true
# The Kafka listener is PLAINTEXT: its ANONYMOUS clients (this test's admin client)
# may do anything; HTTP callers are who their credentials say.
super_users = ["User:admin", "User:ANONYMOUS"]
sqs_access_keys = [
    {access_key_id = "AKIDADMIN", secret_access_key = "admin-secret", user = "admin"},
    {access_key_id = "AKIDALICE", secret_access_key = "alice-secret", user = "alice"},
]
"""


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("weir-sqs-secured"), SETTINGS)
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


def _client(broker: WeirProcess, key: str, secret: str, **config: Any) -> Any:
    return boto3.session.Session(
        aws_access_key_id=key, aws_secret_access_key=secret, region_name="us-east-1"
    ).client(
        "sqs",
        endpoint_url=broker.http_url,
        config=Config(retries={"max_attempts": 1}, **config),
    )


def _as(broker: WeirProcess, name: str) -> Any:
    return _client(broker, *KEYS[name])


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def _allow(broker: WeirProcess, principal: str, bindings: list[tuple[Any, str, Any]]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    acls = [
        AclBinding(
            kind,
            name,
            ResourcePatternType.LITERAL,
            principal,
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for kind, name, operation in bindings
    ]
    for future in admin.create_acls(acls).values():
        future.result(10)


def test_a_signed_request_runs_as_its_access_keys_user(secured: WeirProcess) -> None:
    admin = _as(secured, "admin")
    url = admin.create_queue(QueueName=f"sec-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    admin.send_message(QueueUrl=url, MessageBody="signed")
    (message,) = admin.receive_message(
        QueueUrl=url, WaitTimeSeconds=5, AttributeNames=["SenderId"]
    )["Messages"]
    assert message["Body"] == "signed"
    assert message["Attributes"]["SenderId"] == "admin"


def test_acls_decide_what_a_user_may_do_with_a_queue(secured: WeirProcess) -> None:
    admin, alice = _as(secured, "admin"), _as(secured, "alice")
    name = f"acl-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ClientError) as create:
        alice.create_queue(QueueName=name)
    assert _code(create) == "AccessDenied"
    url = admin.create_queue(QueueName=name)["QueueUrl"]
    with pytest.raises(ClientError) as hidden:  # no DESCRIBE: not even its URL
        alice.get_queue_url(QueueName=name)
    assert _code(hidden) == "AWS.SimpleQueueService.NonExistentQueue"
    assert url not in alice.list_queues().get("QueueUrls", [])
    with pytest.raises(ClientError) as send:
        alice.send_message(QueueUrl=url, MessageBody="no")
    assert _code(send) == "AccessDenied"
    _allow(
        secured,
        "User:alice",
        [
            (ResourceType.TOPIC, name, AclOperation.WRITE),
            (ResourceType.TOPIC, name, AclOperation.DESCRIBE),
        ],
    )
    assert alice.get_queue_url(QueueName=name)["QueueUrl"] == url
    alice.send_message(QueueUrl=url, MessageBody="yes")
    with pytest.raises(ClientError) as receive:  # no READ on the topic and the group
        alice.receive_message(QueueUrl=url)
    assert _code(receive) == "AccessDenied"
    _allow(
        secured,
        "User:alice",
        [
            (ResourceType.TOPIC, name, AclOperation.READ),
            (ResourceType.GROUP, f"sqs.{name}", AclOperation.READ),
        ],
    )
    (message,) = alice.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert message["Body"] == "yes"
    alice.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


@pytest.mark.parametrize(
    ("key", "secret", "code"),
    [
        ("AKIDADMIN", "wrong-secret", "SignatureDoesNotMatch"),
        ("AKIDNOBODY", "admin-secret", "InvalidClientTokenId"),
    ],
)
def test_a_bad_signature_is_refused_with_sqs_errors(
    secured: WeirProcess, key: str, secret: str, code: str
) -> None:
    with pytest.raises(ClientError) as refused:
        _client(secured, key, secret).list_queues()
    assert _code(refused) == code
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_an_unsigned_request_is_refused(secured: WeirProcess) -> None:
    unsigned = _client(secured, "x", "y", signature_version=UNSIGNED)
    with pytest.raises(ClientError) as refused:
        unsigned.list_queues()
    assert _code(refused) == "MissingAuthenticationToken"
    # The other HTTP endpoints still want their own credentials.
    assert httpx.get(secured.http_url + "/v1/groups", timeout=10).status_code == 401


def test_a_request_signed_20_minutes_ago_is_expired(secured: WeirProcess) -> None:
    body = b"{}"
    request = AWSRequest(
        method="POST",
        url=secured.http_url + "/",
        data=body,
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "AmazonSQS.ListQueues",
        },
    )
    then = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(minutes=20)
    with mock.patch("botocore.auth.get_current_datetime", return_value=then):
        SigV4Auth(Credentials(*KEYS["admin"]), "sqs", "us-east-1").add_auth(request)
    response = httpx.post(
        secured.http_url + "/", content=body, headers=dict(request.headers), timeout=10
    )
    assert response.status_code == 400
    assert response.headers["x-amzn-query-error"] == "RequestExpired;Sender"
    # The same request signed now passes.
    fresh = AWSRequest(
        method="POST",
        url=secured.http_url + "/",
        data=body,
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "AmazonSQS.ListQueues",
        },
    )
    SigV4Auth(Credentials(*KEYS["admin"]), "sqs", "us-east-1").add_auth(fresh)
    ok = httpx.post(secured.http_url + "/", content=body, headers=dict(fresh.headers), timeout=10)
    assert ok.status_code == 200, ok.text
