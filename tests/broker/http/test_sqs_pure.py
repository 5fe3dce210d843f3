"""The SQS API's pure parts: message attributes and SQS's MD5s, receipt handles,
queue attributes and the configs they map to, queue names and URLs, error shapes."""

from __future__ import annotations

import base64
import json

import pytest

from weir.broker.http.sqs.attributes import (
    Bounds,
    QueueState,
    check_attributes,
    group_configs,
    parse_redrive_policy,
    queue_state_of,
    topic_configs,
)
from weir.broker.http.sqs.errors import SqsError, queue_does_not_exist
from weir.broker.http.sqs.message_attributes import (
    MessageAttribute,
    attribute_headers,
    attributes_from_headers,
    check_body,
    md5_of_attributes,
    md5_of_body,
    parse_message_attributes,
    select_attributes,
)
from weir.broker.http.sqs.names import check_queue_name, queue_from_arn, queue_from_url
from weir.broker.http.sqs.receipts import Receipt, decode_receipt, encode_receipt, receipt_key

BOUNDS = Bounds(15_000, 60_000, 2, 10)


# -- message attributes ----------------------------------------------------------------


def test_md5_of_attributes_matches_published_values() -> None:
    # Values other SQS implementations check against real SQS's answers.
    two = {
        "ordinal": MessageAttribute("Number", "1"),
        "category": MessageAttribute("String", "test"),
    }
    assert md5_of_attributes(two) == "d21ae90c49061e927f57df5f5d72be1f"
    one = {"SellerName": MessageAttribute("String", "Example Store")}
    assert md5_of_attributes(one) == "cd28f3b68aeee4b2eac9c66f2f694b58"
    assert md5_of_attributes({}) is None
    assert md5_of_body("hello") == "5d41402abc4b2a76b9719d911017c592"


def test_attributes_survive_record_headers_with_their_types() -> None:
    attributes = parse_message_attributes({
        "s": {"DataType": "String", "StringValue": "a:b"},
        "n": {"DataType": "Number.int", "StringValue": "-1.5e3"},
        "b": {"DataType": "Binary", "BinaryValue": base64.b64encode(b"\x00:\xff").decode()},
    })  # fmt: skip
    headers = attribute_headers(attributes)
    assert ("sqs.attr.s", b"String:a:b") in headers
    assert (
        attributes_from_headers([*headers, ("other", b"x"), ("sqs.attr.bad", b"Nope:1")])
        == attributes
    )


@pytest.mark.parametrize(
    "raw",
    [
        {"AWS.x": {"DataType": "String", "StringValue": "v"}},
        {"a..b": {"DataType": "String", "StringValue": "v"}},
        {".a": {"DataType": "String", "StringValue": "v"}},
        {"a": {"DataType": "Date", "StringValue": "v"}},
        {"a": {"DataType": "String"}},
        {"a": {"DataType": "String", "StringValue": ""}},
        {"a": {"DataType": "Number", "StringValue": "1e"}},
        {"a": {"DataType": "Number", "StringValue": "1" * 39}},
        {"a": {"DataType": "Binary", "StringValue": "v"}},
        {"a": {"DataType": "Binary", "BinaryValue": "!!"}},
        {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)},
        {"a": "not a structure"},
        ["not", "a", "map"],
    ],
)
def test_message_attributes_outside_sqs_rules_are_invalid_parameters(raw: object) -> None:
    with pytest.raises(SqsError) as refused:
        parse_message_attributes(raw)
    assert refused.value.query_code == "InvalidParameterValue"


def test_message_body_characters_are_sqs_s() -> None:
    assert check_body("tab\tnew\nline ✓ \U0001f600") == "tab\tnew\nline ✓ \U0001f600"
    for bad in ("\x00", "a\x1fb", "\ufffe"):
        with pytest.raises(SqsError) as refused:
            check_body(bad)
        assert refused.value.query_code == "InvalidMessageContents"


def test_attribute_names_select_all_names_and_dotted_prefixes() -> None:
    attributes = {n: MessageAttribute("String", "v") for n in ("geo.city", "geo.zip", "city")}
    assert set(select_attributes(attributes, ["All"])) == set(attributes)
    assert set(select_attributes(attributes, ["geo.*"])) == {"geo.city", "geo.zip"}
    assert set(select_attributes(attributes, ["city"])) == {"city"}
    assert select_attributes(attributes, []) == {}


# -- receipt handles -------------------------------------------------------------------


def test_receipt_handles_round_trip_and_refuse_any_change() -> None:
    key = receipt_key("cluster-a", "")
    receipt = Receipt("jobs", 3, 1234, "sqs-abc", 2, 1_700_000_000_000)
    handle = encode_receipt(key, receipt)
    assert decode_receipt(key, handle) == receipt
    assert decode_receipt(receipt_key("cluster-b", ""), handle) is None
    assert decode_receipt(receipt_key("cluster-a", "secret"), handle) is None
    for i in range(len(handle)):
        changed = handle[:i] + ("A" if handle[i] != "A" else "B") + handle[i + 1 :]
        assert decode_receipt(key, changed) is None, i
    for bad in ("", "x", "!!!", "A" * 2000, None, 5, handle[:-1]):
        assert decode_receipt(key, bad) is None


# -- queue attributes ------------------------------------------------------------------


def test_queue_attributes_map_to_topic_and_group_configs() -> None:
    attributes = check_attributes(
        {"VisibilityTimeout": "120", "MessageRetentionPeriod": "60", "DelaySeconds": "5"},
        fifo=False,
        creating=True,
    )
    state = QueueState(attributes, False, 1, 1)
    assert queue_state_of(state.to_config()) == state
    topic = topic_configs(state)
    assert topic["retention.ms"] == topic["weir.share.record.ttl.ms"] == "60000"
    group = group_configs(state, BOUNDS)
    assert group["share.record.lock.duration.ms"] == "60000"  # within the broker's bounds
    assert group["share.auto.offset.reset"] == "earliest"
    assert group["share.delivery.count.limit"] == "10"  # no redrive: as many as allowed
    assert group["errors.deadletterqueue.topic.name"] is None


def test_a_redrive_policy_sets_the_dead_letter_topic_and_delivery_limit() -> None:
    policy = json.dumps({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:123456789012:dead",
                         "maxReceiveCount": 3})  # fmt: skip
    state = QueueState(
        check_attributes({"RedrivePolicy": policy}, fifo=False, creating=False), False, 1, 1
    )
    group = group_configs(state, BOUNDS)
    assert group["errors.deadletterqueue.topic.name"] == "dead"
    assert group["share.delivery.count.limit"] == "3"
    assert group["errors.deadletterqueue.copy.record.enable"] == "true"
    outside = QueueState({"RedrivePolicy": policy.replace("3", "11")}, False, 1, 1)
    with pytest.raises(SqsError, match="group_share_max_delivery_count_limit"):
        group_configs(outside, BOUNDS)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ({"VisibilityTimeout": "43201"}, "InvalidAttributeValue"),
        ({"DelaySeconds": "-1"}, "InvalidAttributeValue"),
        ({"MaximumMessageSize": "1023"}, "InvalidAttributeValue"),
        ({"MessageRetentionPeriod": "x"}, "InvalidAttributeValue"),
        ({"Unknown": "1"}, "InvalidAttributeName"),
        ({"ContentBasedDeduplication": "true"}, "InvalidAttributeName"),  # FIFO only
        ({"RedrivePolicy": "{"}, "InvalidAttributeValue"),
        ({"RedrivePolicy": '{"maxReceiveCount": 2}'}, "InvalidAttributeValue"),
        (
            {"RedrivePolicy": '{"deadLetterTargetArn": "nope", "maxReceiveCount": 2}'},
            "InvalidAttributeValue",
        ),
        ({"VisibilityTimeout": 30}, "InvalidAttributeValue"),
    ],
)
def test_queue_attributes_outside_sqs_bounds_are_refused(raw: dict[str, object], code: str) -> None:
    with pytest.raises(SqsError) as refused:
        check_attributes(raw, fifo=False, creating=True)
    assert refused.value.query_code == code


def test_redrive_policy_needs_a_receive_count_in_sqs_range() -> None:
    arn = "arn:aws:sqs:weir:000000000000:dead"
    assert parse_redrive_policy(json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "1000"}))
    with pytest.raises(SqsError):
        parse_redrive_policy(json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1001}))


# -- names and errors ------------------------------------------------------------------


def test_queue_names_urls_and_arns() -> None:
    check_queue_name("a-b_C9", fifo=False)
    check_queue_name("orders.fifo", fifo=True)
    for bad, fifo in (
        ("", False),
        ("a" * 81, False),
        ("a.b", False),
        ("x.fifo", False),
        ("x", True),
    ):
        with pytest.raises(SqsError):
            check_queue_name(bad, fifo=fifo)
    assert queue_from_url("http://h:1/000000000000/jobs") == "jobs"
    assert queue_from_url("https://sqs.us-east-1.amazonaws.com/123/jobs.fifo") == "jobs.fifo"
    assert queue_from_url("jobs") == "jobs"
    assert queue_from_arn("arn:aws:sqs:us-east-1:123456789012:dead") == "dead"
    with pytest.raises(SqsError) as refused:
        queue_from_url("http://h/000000000000/no%20such")
    assert refused.value.query_code == "AWS.SimpleQueueService.NonExistentQueue"


def test_errors_carry_the_shape_and_the_query_code() -> None:
    error = queue_does_not_exist()
    assert json.loads(error.body())["__type"] == "com.amazonaws.sqs#QueueDoesNotExist"
    assert error.headers() == {
        "x-amzn-query-error": "AWS.SimpleQueueService.NonExistentQueue;Sender"
    }
    assert error.status == 400
