"""A dead letter's record (Kafka 4.4's headers) and the writer's pure rules."""

from __future__ import annotations

from weir.broker.coordinators.dead_letters import _entry_bytes, _first_records
from weir.sharecoord.dead_letter_records import (
    REDRIVE_SOURCE,
    DeadLetter,
    dead_letter_headers,
    dead_letter_partition,
    parse_dead_letter,
    reason_of,
    redrive_headers,
    redrive_source,
    written_offsets,
)
from weir.sharecoord.share_partition import Archived, ArchiveReason


def test_headers_are_kafkas_names_in_kafkas_order_as_utf8_decimal_text():
    """As a Kafka 4.4 broker wrote them for a rejected record (docs/queues.md)."""
    assert dead_letter_headers("g", "orders", 1, 42, 3, ArchiveReason.REJECTED) == [
        ("__dlq.errors.topic", b"orders"),
        ("__dlq.errors.partition", b"1"),
        ("__dlq.errors.offset", b"42"),
        ("__dlq.errors.group", b"g"),
        ("__dlq.errors.delivery.count", b"3"),
        ("__dlq.errors.message", b"Offset rejected by client."),
    ]
    limit = dead_letter_headers("g", "orders", 0, 0, 5, ArchiveReason.DELIVERY_LIMIT)
    assert limit[-1] == ("__dlq.errors.message", b"Offset delivery count exceeded the threshold.")


def test_headers_parse_back_with_the_reason():
    headers = dead_letter_headers("g", "orders", 1, 42, 3, ArchiveReason.DELIVERY_LIMIT)
    letter = parse_dead_letter([("other", b"x"), *headers])
    assert letter == DeadLetter(
        "g", "orders", 1, 42, 3, "Offset delivery count exceeded the threshold."
    )
    assert letter.reason is ArchiveReason.DELIVERY_LIMIT
    assert reason_of("something else") is None


def test_records_that_are_not_dead_letters_parse_to_none():
    headers = dead_letter_headers("g", "orders", 1, 42, 3, ArchiveReason.REJECTED)
    assert parse_dead_letter([]) is None
    assert parse_dead_letter([h for h in headers if h[0] != "__dlq.errors.offset"]) is None
    broken = [(n, b"x" if n == "__dlq.errors.partition" else v) for n, v in headers]
    assert parse_dead_letter(broken) is None
    assert (
        parse_dead_letter([(n, b"\xff" if n == "__dlq.errors.group" else v) for n, v in headers])
        is None
    )


def test_the_dead_letter_partition_is_the_source_partition_modulo_the_count():
    assert [dead_letter_partition(p, 3) for p in range(5)] == [0, 1, 2, 0, 1]


def test_written_offsets_are_those_of_the_same_group_topic_and_partition():
    def letter(group: str, topic: str, partition: int, offset: int) -> DeadLetter:
        return DeadLetter(group, topic, partition, offset, 1, None)

    letters = [
        letter("g", "t", 0, 5),
        letter("g", "t", 1, 6),
        letter("h", "t", 0, 7),
        letter("g", "u", 0, 8),
        None,
        letter("g", "t", 0, 9),
    ]
    assert written_offsets(letters, "g", "t", 0) == {5, 9}


def test_a_redriven_record_drops_kafkas_headers_and_names_its_source():
    source = redrive_source("dlq.orders", 0, 17)
    headers = [
        *dead_letter_headers("g", "orders", 1, 42, 3, ArchiveReason.REJECTED),
        ("trace", b"abc"),
        (REDRIVE_SOURCE, b"older"),
    ]
    assert redrive_headers(headers, source) == [
        ("trace", b"abc"),
        (REDRIVE_SOURCE, b"dlq.orders/0/17"),
    ]


def test_a_round_takes_the_first_records_up_to_its_bound():
    pending = [
        Archived(0, 4, 1, ArchiveReason.REJECTED),
        Archived(7, 9, 5, ArchiveReason.DELIVERY_LIMIT),
    ]
    assert _first_records(pending, 100) == pending
    assert _first_records(pending, 6) == [
        Archived(0, 4, 1, ArchiveReason.REJECTED),
        Archived(7, 7, 5, ArchiveReason.DELIVERY_LIMIT),
    ]
    assert _first_records(pending, 3) == [Archived(0, 2, 1, ArchiveReason.REJECTED)]


def test_an_entry_is_sized_with_its_key_value_and_headers():
    headers = dead_letter_headers("g", "t", 0, 0, 1, ArchiveReason.REJECTED)
    small = _entry_bytes((None, None, headers))
    assert _entry_bytes((b"k" * 10, b"v" * 100, headers)) == small + 110
