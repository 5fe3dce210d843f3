"""`__transaction_state` records: Kafka's TransactionLogKey/TransactionLogValue bytes,
built here by hand from the specs, and hostile bytes refused."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.format.versioned_records import RecordFormatError
from weir.txn.transaction_records import (
    TransactionLogEntry,
    TxnState,
    decode_transaction_key,
    decode_transaction_value,
    encode_transaction_key,
    encode_transaction_value,
    is_transaction_key,
    transaction_record,
)

ONGOING = TransactionLogEntry(
    producer_id=5,
    producer_epoch=1,
    timeout_ms=60_000,
    state=TxnState.ONGOING,
    partitions=frozenset({("t", 1), ("t", 0), ("u", 2)}),
    last_update_ms=10,
    start_ms=9,
)


def test_key_is_version_0_then_the_transactional_id_as_a_string() -> None:
    assert encode_transaction_key("tx") == struct.pack(">hh2s", 0, 2, b"tx")
    assert decode_transaction_key(encode_transaction_key("tx")) == "tx"
    assert is_transaction_key(encode_transaction_key("tx"))


def test_value_version_0_is_kafkas_non_flexible_layout() -> None:
    expected = (
        struct.pack(">hqhib", 0, 5, 1, 60_000, 1)
        + struct.pack(">i", 2)  # two topics, sorted
        + struct.pack(">h1si", 1, b"t", 2)
        + struct.pack(">ii", 0, 1)
        + struct.pack(">h1si", 1, b"u", 1)
        + struct.pack(">i", 2)
        + struct.pack(">qq", 10, 9)
    )
    assert encode_transaction_value(ONGOING, 0) == expected
    assert decode_transaction_value(expected) == ONGOING


def test_value_version_1_is_flexible_with_tagged_fields_only_when_not_default() -> None:
    entry = dataclasses.replace(ONGOING, previous_producer_id=3, client_transaction_version=2)
    expected = (
        struct.pack(">hqhib", 1, 5, 1, 60_000, 1)
        + bytes([3])  # compact array of two topics
        + bytes([2]) + b"t" + bytes([3]) + struct.pack(">ii", 0, 1) + bytes([0])
        + bytes([2]) + b"u" + bytes([2]) + struct.pack(">i", 2) + bytes([0])
        + struct.pack(">qq", 10, 9)
        + bytes([2])  # two tagged fields: PreviousProducerId (0), ClientTransactionVersion (2)
        + bytes([0, 8]) + struct.pack(">q", 3)
        + bytes([2, 2]) + struct.pack(">h", 2)
    )  # fmt: skip
    assert encode_transaction_value(entry, 1) == expected
    assert decode_transaction_value(expected) == entry


def test_an_empty_transaction_stores_null_partitions() -> None:
    empty = TransactionLogEntry(7, 0, 1000, TxnState.EMPTY, last_update_ms=4)
    v0 = encode_transaction_value(empty, 0)
    assert v0 == struct.pack(">hqhibiqq", 0, 7, 0, 1000, 0, -1, 4, -1)
    v1 = encode_transaction_value(empty, 1)
    assert v1 == struct.pack(">hqhib", 1, 7, 0, 1000, 0) + bytes([0]) + struct.pack(
        ">qq", 4, -1
    ) + bytes([0])
    assert decode_transaction_value(v0) == empty
    assert decode_transaction_value(v1) == empty
    with pytest.raises(RecordFormatError):
        encode_transaction_value(
            TransactionLogEntry(7, 0, 1000, TxnState.EMPTY, frozenset({("t", 0)})), 1
        )


def test_a_tombstone_decodes_to_none_and_the_record_carries_its_id() -> None:
    assert decode_transaction_value(None) is None
    record = transaction_record("tx", None, 1)
    assert record.value is None and record.transactional_id == "tx"
    assert record.key == encode_transaction_key("tx")


def test_kafka_state_names_round_trip() -> None:
    assert TxnState.PREPARE_EPOCH_FENCE.kafka_name == "PrepareEpochFence"
    assert TxnState.COMPLETE_COMMIT.kafka_name == "CompleteCommit"
    for state in TxnState:
        assert TxnState.from_kafka_name(state.kafka_name) is state
    assert TxnState.from_kafka_name("Bogus") is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        struct.pack(">h", 2) + b"\x00" * 30,  # unknown version
        encode_transaction_value(ONGOING, 0)[:-1],  # truncated
        encode_transaction_value(ONGOING, 1) + b"\x00",  # trailing byte
        struct.pack(">hqhib", 0, 5, 1, 60_000, 9) + struct.pack(">iqq", -1, 0, 0),  # status 9
        struct.pack(">hqhib", 0, 5, 1, 60_000, 1) + struct.pack(">i", 1_000_000_000),
    ],
)
def test_malformed_values_are_refused(data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode_transaction_value(data)


@given(
    producer_id=st.integers(0, 2**63 - 1),
    epoch=st.integers(0, 32767),
    state=st.sampled_from([s for s in TxnState if s != TxnState.EMPTY]),
    partitions=st.frozensets(
        st.tuples(st.sampled_from(["a", "bb", "ü"]), st.integers(0, 2**31 - 1))
    ),
    version=st.sampled_from([0, 1]),
    previous=st.integers(-1, 2**40),
    client_version=st.integers(0, 2),
)
def test_every_entry_round_trips(
    producer_id: int,
    epoch: int,
    state: TxnState,
    partitions: frozenset[tuple[str, int]],
    version: int,
    previous: int,
    client_version: int,
) -> None:
    entry = TransactionLogEntry(
        producer_id,
        epoch,
        1234,
        state,
        partitions,
        5,
        6,
        previous_producer_id=previous if version else -1,
        next_producer_id=previous if version else -1,
        client_transaction_version=client_version if version else 0,
    )
    assert decode_transaction_value(encode_transaction_value(entry, version)) == entry
