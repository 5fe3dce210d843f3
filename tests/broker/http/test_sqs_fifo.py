"""FIFO queues' send-side rules (weir/broker/http/sqs/fifo.py): message group and
deduplication ids, content-based deduplication, the 5-minute window."""

from __future__ import annotations

import hashlib

import pytest

from weir.broker.http.sqs.attributes import Bounds, QueueState, group_configs
from weir.broker.http.sqs.errors import SqsError
from weir.broker.http.sqs.fifo import (
    DEDUPLICATION_WINDOW_MS,
    Deduplications,
    FifoIds,
    fifo_ids,
    sequence_number,
)


def test_a_fifo_message_needs_a_group_and_a_deduplication_id_or_content_based() -> None:
    entry = {"MessageGroupId": "g", "MessageDeduplicationId": "d"}
    assert fifo_ids(entry, "b", fifo=True, content_based=False) == FifoIds("g", "d")
    by_content = fifo_ids({"MessageGroupId": "g"}, "body", fifo=True, content_based=True)
    assert by_content == FifoIds("g", hashlib.sha256(b"body").hexdigest())
    refusals = [
        ({"MessageDeduplicationId": "d"}, True, "MissingParameter"),
        ({"MessageGroupId": "g"}, True, "InvalidParameterValue"),
        ({**entry, "DelaySeconds": 1}, True, "InvalidParameterValue"),
        ({**entry, "MessageGroupId": "g" * 129}, True, "InvalidParameterValue"),
        ({**entry, "MessageGroupId": "with space"}, True, "InvalidParameterValue"),
        ({"MessageDeduplicationId": "d"}, False, "InvalidParameterValue"),
    ]
    for bad, fifo, code in refusals:
        with pytest.raises(SqsError) as refused:
            fifo_ids(bad, "b", fifo=fifo, content_based=False)
        assert refused.value.query_code == code, bad
    assert fifo_ids({"MessageGroupId": "g"}, "b", fifo=False, content_based=False) is None


def test_deduplication_answers_the_first_send_for_5_minutes() -> None:
    seen = Deduplications()
    key = Deduplications.key("q.fifo", FifoIds("g", "d"), per_group=False)
    assert seen.answered(key, 0) is None
    seen.remember(key, {"MessageId": "m1"}, 1_000)
    assert seen.answered(key, 1_000 + DEDUPLICATION_WINDOW_MS - 1) == {"MessageId": "m1"}
    assert seen.answered(key, 1_000 + DEDUPLICATION_WINDOW_MS) is None
    # Scope: per queue, or per message group when DeduplicationScope is messageGroup.
    assert Deduplications.key("q.fifo", FifoIds("a", "d"), per_group=False) == key
    assert Deduplications.key("q.fifo", FifoIds("a", "d"), per_group=True) != key


def test_a_fifo_queue_orders_its_group_by_key() -> None:
    bounds = Bounds(15_000, 60_000, 2, 10)
    fifo = group_configs(QueueState({}, True, 1, 1), bounds)
    assert fifo["weir.share.key.ordering.enable"] == "true"
    assert (
        group_configs(QueueState({}, False, 1, 1), bounds)["weir.share.key.ordering.enable"] is None
    )
    assert sequence_number(42) == "00000000000000000042"
