"""`weir txn`: its arguments, the requests it builds and how it reads and shows answers
(pure functions; the end-to-end tests are in test_txn_cli.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from weir.cli.arguments import parse_args
from weir.cli.errors import BrokerProtocolError, CliError
from weir.cli.formatting import render_json
from weir.cli.txn_commands import (
    MINUTE_MS,
    AbortSpec,
    ListFilters,
    OpenTransaction,
    abort_error,
    abort_spec_for_start_offset,
    abort_spec_from_arguments,
    hanging,
    hanging_row,
    list_request,
    open_transactions,
    partitions_text,
    render_aborted,
    render_hanging,
    render_transaction_description,
    render_transaction_list,
    transaction_document,
)
from weir.cli.txn_commands import _marker_error as marker_error
from weir.format.errors import ErrorCode

NOW_MS = 1_800_000_000_000
TIMEOUT_MS = 15 * MINUTE_MS


def producer(
    producer_id: int, start_offset: int, last_timestamp: int, coordinator_epoch: int = 2
) -> dict[str, Any]:
    return {
        "producer_id": producer_id,
        "producer_epoch": 3,
        "last_sequence": 9,
        "last_timestamp": last_timestamp,
        "coordinator_epoch": coordinator_epoch,
        "current_txn_start_offset": start_offset,
    }


# -- arguments ----------------------------------------------------------------------


def test_txn_list_collects_repeated_filters() -> None:
    args = parse_args(
        ["txn", "list", "--state", "Ongoing", "--state", "PrepareAbort", "--producer-id", "7",
         "--duration-filter", "60000", "--transactional-id-pattern", "app-.*"]
    )  # fmt: skip
    assert (args.command, args.txn_command) == ("txn", "list")
    assert args.states == ["Ongoing", "PrepareAbort"]
    assert args.producer_ids == [7]
    assert args.duration_filter_ms == 60000
    assert args.transactional_id_pattern == "app-.*"


def test_txn_list_without_filters_filters_nothing() -> None:
    args = parse_args(["txn", "list"])
    assert (args.states, args.producer_ids) == ([], [])
    assert (args.duration_filter_ms, args.transactional_id_pattern) == (None, None)


@pytest.mark.parametrize(
    "argv", [["txn", "describe", "tx"], ["txn", "describe", "--transactional-id", "tx"]]
)
def test_txn_describe_takes_the_id_as_kafka_transactions_sh_or_positionally(
    argv: list[str],
) -> None:
    assert parse_args(argv).transactional_id == "tx"


@pytest.mark.parametrize(
    "argv", [["txn", "describe"], ["txn", "describe", "a", "--transactional-id", "b"]]
)
def test_txn_describe_needs_the_id_exactly_once(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)


def test_txn_abort_by_start_offset_or_by_producer() -> None:
    by_offset = parse_args(
        ["txn", "abort", "--topic", "t", "--partition", "1", "--start-offset", "40"]
    )
    assert (by_offset.topic, by_offset.partition, by_offset.start_offset) == ("t", 1, 40)
    by_producer = parse_args(
        ["txn", "abort", "--topic", "t", "--partition", "1", "--producer-id", "5",
         "--producer-epoch", "2", "--coordinator-epoch", "-1"]
    )  # fmt: skip
    assert (by_producer.producer_id, by_producer.producer_epoch) == (5, 2)
    assert by_producer.coordinator_epoch == -1


@pytest.mark.parametrize(
    "extra",
    [
        [],  # neither way
        ["--producer-id", "5", "--producer-epoch", "2"],  # no coordinator epoch
        ["--start-offset", "4", "--producer-id", "5"],  # both ways
    ],
)
def test_txn_abort_refuses_an_incomplete_or_ambiguous_transaction(extra: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["txn", "abort", "--topic", "t", "--partition", "0", *extra])


def test_txn_find_hanging_defaults_to_fifteen_minutes() -> None:
    args = parse_args(["txn", "find-hanging", "--broker-id", "2"])
    assert (args.broker_id, args.topic, args.partition) == (2, None, None)
    assert args.max_transaction_timeout_minutes == 15


@pytest.mark.parametrize(
    "argv",
    [["txn", "find-hanging"], ["txn", "find-hanging", "--broker-id", "1", "--partition", "0"]],
)
def test_txn_find_hanging_needs_a_scope_and_a_topic_for_a_partition(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)


# -- list -----------------------------------------------------------------------------


def test_list_request_sends_every_filter_at_v2() -> None:
    filters = ListFilters(("Ongoing",), (7, 8), duration_ms=60_000, transactional_id_pattern="a.*")
    assert list_request(filters, 2, node_id=1) == {
        "state_filters": ["Ongoing"],
        "producer_id_filters": [7, 8],
        "duration_filter": 60_000,
        "transactional_id_pattern": "a.*",
    }


def test_list_request_without_filters_is_unfiltered() -> None:
    body = list_request(ListFilters(), 0, node_id=1)
    assert body == {
        "state_filters": [],
        "producer_id_filters": [],
        "duration_filter": -1,
        "transactional_id_pattern": None,
    }


def test_a_filter_the_broker_lacks_is_refused_not_dropped() -> None:
    with pytest.raises(CliError, match="broker 3 cannot filter transactions by duration"):
        list_request(ListFilters(duration_ms=1), 0, node_id=3)
    with pytest.raises(CliError, match="KIP-1152's filter needs v2"):
        list_request(ListFilters(transactional_id_pattern="x"), 1, node_id=3)


def test_transaction_list_table_and_unknown_states() -> None:
    document = {
        "transactions": [
            {"transactional_id": "tx-1", "coordinator": 2, "producer_id": 7, "state": "Ongoing"}
        ],
        "unknown_state_filters": ["Bogus"],
    }
    assert render_transaction_list(document) == (
        "TRANSACTIONAL-ID  COORDINATOR  PRODUCER-ID  STATE\n"
        "tx-1              2            7            Ongoing\n"
        "note: the brokers know no state Bogus\n"
    )
    empty = {"transactions": [], "unknown_state_filters": []}
    assert render_transaction_list(empty) == "no transactions\n"


# -- describe -------------------------------------------------------------------------


def described(start_ms: int, topics: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "error_code": 0,
        "transactional_id": "tx-1",
        "transaction_state": "Ongoing",
        "transaction_timeout_ms": 60_000,
        "transaction_start_time_ms": start_ms,
        "producer_id": 7,
        "producer_epoch": 4,
        "topics": topics,
    }


def test_a_described_transaction_has_its_duration_and_sorted_partitions() -> None:
    topics = [{"topic": "b", "partitions": [2, 0]}, {"topic": "a", "partitions": [5]}]
    document = transaction_document(described(NOW_MS - 1234, topics), 3, NOW_MS)
    assert document == {
        "transactional_id": "tx-1",
        "coordinator": 3,
        "producer_id": 7,
        "producer_epoch": 4,
        "state": "Ongoing",
        "transaction_timeout_ms": 60_000,
        "transaction_start_time_ms": NOW_MS - 1234,
        "transaction_duration_ms": 1234,
        "partitions": [
            {"topic": "a", "partition": 5},
            {"topic": "b", "partition": 0},
            {"topic": "b", "partition": 2},
        ],
    }
    assert json.loads(render_json(document)) == document
    assert render_transaction_description(document).splitlines()[1].split()[-1] == "a:5;b:0,2"


def test_a_transaction_not_started_has_no_start_time_or_duration() -> None:
    document = transaction_document(described(-1, []), 3, NOW_MS)
    assert (document["transaction_start_time_ms"], document["transaction_duration_ms"]) == (
        None,
        None,
    )
    row = render_transaction_description(document).splitlines()[1].split()
    assert row[-3:] == ["-", "-", "-"]
    assert partitions_text([]) == "-"


# -- abort ----------------------------------------------------------------------------


def test_abort_by_start_offset_picks_the_producer_whose_transaction_starts_there() -> None:
    producers = [producer(7, 10, NOW_MS), producer(8, 40, NOW_MS, coordinator_epoch=-1)]
    spec = abort_spec_for_start_offset("t", 1, 40, producers)
    assert spec == AbortSpec("t", 1, 8, 3, 0, start_offset=40)  # coordinator epoch -1 -> 0


def test_abort_by_start_offset_without_such_a_transaction_is_an_error() -> None:
    with pytest.raises(CliError, match="no open transaction starts at offset 11 on topic 't'"):
        abort_spec_for_start_offset("t", 1, 11, [producer(7, 10, NOW_MS), producer(9, -1, 0)])


def test_abort_by_producer_takes_a_coordinator_epoch_of_minus_one_as_zero() -> None:
    assert abort_spec_from_arguments("t", 0, 5, 2, -1).coordinator_epoch == 0
    assert abort_spec_from_arguments("t", 0, 5, 2, 6).coordinator_epoch == 6


SPEC = AbortSpec("t", 1, 8, 3, 0, start_offset=40)


def marker_response(producer_id: int, partition: int, error: int) -> dict[str, Any]:
    partitions = [{"partition_index": partition, "error_code": error}]
    topics = [{"name": "t", "partitions": partitions}]
    return {"markers": [{"producer_id": producer_id, "topics": topics}]}


def test_the_marker_result_is_read_for_the_aborted_partition_only() -> None:
    assert marker_error(marker_response(8, 1, ErrorCode.NONE), SPEC) == ErrorCode.NONE
    code = ErrorCode.INVALID_PRODUCER_EPOCH
    assert marker_error(marker_response(8, 1, code), SPEC) == code
    with pytest.raises(BrokerProtocolError, match="no result for producer 8"):
        marker_error(marker_response(9, 1, ErrorCode.NONE), SPEC)
    with pytest.raises(BrokerProtocolError):
        marker_error(marker_response(8, 2, ErrorCode.NONE), SPEC)


def test_abort_errors_say_what_to_check() -> None:
    fenced = abort_error(ErrorCode.TRANSACTION_COORDINATOR_FENCED, SPEC).message
    assert fenced == (
        "cannot abort the transaction of producer 8 (epoch 3) on topic 't' partition 1: "
        "coordinator epoch 0 is older than the one the partition has seen "
        "(TRANSACTION_COORDINATOR_FENCED)"
    )
    assert "newer epoch than 3" in abort_error(ErrorCode.INVALID_PRODUCER_EPOCH, SPEC).message
    assert render_aborted(
        {"producer_id": 8, "producer_epoch": 3, "topic": "t", "partition": 1}
    ) == ("aborted the transaction of producer 8 (epoch 3) on topic 't' partition 1\n")


# -- find-hanging ---------------------------------------------------------------------


def test_open_transactions_older_than_the_timeout_are_candidates() -> None:
    producers = [
        producer(1, 5, NOW_MS - TIMEOUT_MS - 1),  # open, older: a candidate
        producer(2, 6, NOW_MS - TIMEOUT_MS),  # open, exactly the timeout: not yet
        producer(3, -1, 0),  # no open transaction
    ]
    found = open_transactions(
        "t", 0, producers, now_ms=NOW_MS, max_transaction_timeout_ms=TIMEOUT_MS
    )
    assert found == [OpenTransaction("t", 0, 1, 3, 2, 5, NOW_MS - TIMEOUT_MS - 1)]


def candidate(producer_id: int, partition: int) -> OpenTransaction:
    return OpenTransaction("t", partition, producer_id, 0, 0, 10, NOW_MS - 2 * TIMEOUT_MS)


def test_hanging_are_those_no_coordinator_has_in_a_transaction() -> None:
    ongoing = described(NOW_MS, [{"topic": "t", "partitions": [0]}])
    candidates = [
        candidate(1, 0),  # its transaction includes t-0: the coordinator will end it
        candidate(1, 1),  # the same transaction does not include t-1: hanging
        candidate(2, 0),  # no transactional id has producer id 2: hanging
        candidate(3, 0),  # the coordinator no longer knows the id: hanging
    ]
    found = hanging(candidates, {1: "tx-1", 3: "tx-3"}, {"tx-1": ongoing, "tx-3": None})
    assert found == candidates[1:]


def test_hanging_rows_give_the_duration_in_whole_minutes() -> None:
    row = hanging_row(candidate(2, 0), NOW_MS)
    assert (row["duration_minutes"], row["start_offset"], row["coordinator_epoch"]) == (30, 10, 0)
    text = render_hanging({"max_transaction_timeout_ms": TIMEOUT_MS, "hanging": [row]})
    lines = text.splitlines()
    assert lines[0].split() == [
        "TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH", "COORDINATOR-EPOCH",
        "START-OFFSET", "LAST-TIMESTAMP-MS", "DURATION-MIN",
    ]  # fmt: skip
    assert lines[1].split() == ["t", "0", "2", "0", "0", "10", str(NOW_MS - 2 * TIMEOUT_MS), "30"]
    assert lines[2].startswith("1 hanging transaction;")
    assert render_hanging({"hanging": []}) == "no hanging transactions\n"
