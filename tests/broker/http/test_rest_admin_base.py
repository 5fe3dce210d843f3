"""The REST admin API's pure rules: Kafka errors as HTTP answers in Confluent's
error shape, and the bounds on names and numbers taken from untrusted input."""

from __future__ import annotations

import pytest

from weir.broker.http.rest_admin_base import (
    RestError,
    bounded_int,
    int_text,
    kafka_failure,
    topic_name,
)
from weir.format.errors import ErrorCode


@pytest.mark.parametrize(
    ("code", "status", "error_code"),
    [
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, 403, 40301),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 403, 40301),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 404, 40401),
        (ErrorCode.TOPIC_ALREADY_EXISTS, 409, 40901),
        (ErrorCode.INVALID_CONFIG, 400, 40001),
        (ErrorCode.SECURITY_DISABLED, 400, 40001),
        (ErrorCode.NOT_COORDINATOR, 503, 50003),
        (ErrorCode.LEADER_NOT_AVAILABLE, 503, 50003),
        (ErrorCode.CORRUPT_MESSAGE, 500, 50001),
        (9999, 500, 50001),
    ],
)
def test_kafka_errors_answer_as_confluent_does(code: int, status: int, error_code: int) -> None:
    failure = kafka_failure(code, "detail", "do it")
    assert (failure.status, failure.error_code) == (status, error_code)
    assert failure.message.startswith("do it: ") and failure.message.endswith(": detail")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a b", "é", "a" * 250, 7, None, ["t"]])
def test_invalid_topic_names_are_400(name: object) -> None:
    with pytest.raises(RestError) as raised:
        topic_name(name)
    assert raised.value.status == 400


def test_valid_topic_names_pass() -> None:
    assert topic_name("orders.v2_x-1") == "orders.v2_x-1"
    assert topic_name("a" * 249) == "a" * 249


@pytest.mark.parametrize("text", ["", "-1", "x", "1.5", "99999999999", "١٢"])
def test_numbers_in_paths_are_decimal_and_bounded(text: str) -> None:
    with pytest.raises(RestError):
        int_text(text, "partition_id")


@pytest.mark.parametrize("value", [True, "3", 3.0, 0, 2**31])
def test_numbers_in_bodies_are_integers_in_range(value: object) -> None:
    with pytest.raises(RestError):
        bounded_int(value, "partitions_count", 1, 2**31 - 1)
