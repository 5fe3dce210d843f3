import json

from weir.cli.consume_command import ConsumedRecord, record_json_line, record_text_line
from weir.cli.formatting import bytes_fields, counted, headers_for, render_json, render_table
from weir.cli.produce_command import render_summary
from weir.cli.topic_commands import (
    render_altered,
    render_created,
    render_description,
    render_topic_list,
)


def test_table_columns_are_aligned_without_trailing_spaces() -> None:
    text = render_table(["NAME", "N"], [["a", 1], ["longer-name", None], ["b", [1, 2]]])
    assert text == "NAME         N\na            1\nlonger-name  -\nb            1,2\n"


def test_table_with_no_rows_is_just_the_header() -> None:
    assert render_table(["TOPIC", "PARTITIONS"], []) == "TOPIC  PARTITIONS\n"


def test_json_is_one_line_document() -> None:
    text = render_json({"topics": [{"name": "é", "partitions": 3}]})
    assert text.endswith("\n") and text.count("\n") == 1
    assert json.loads(text) == {"topics": [{"name": "é", "partitions": 3}]}


def test_bytes_fields_fall_back_to_base64_for_binary() -> None:
    assert bytes_fields("value", b"hi") == {"value": "hi"}
    assert bytes_fields("value", None) == {"value": None}
    assert bytes_fields("key", b"\xff\x00") == {"key_base64": "/wA="}


def test_topic_list_table() -> None:
    document = {
        "topics": [
            {"name": "orders", "topic_id": None, "partitions": 3, "replication_factor": 1,
             "is_internal": False},
            {"name": "__consumer_offsets", "topic_id": None, "partitions": 50,
             "replication_factor": 1, "is_internal": True},
        ]
    }  # fmt: skip
    assert render_topic_list(document) == (
        "TOPIC               PARTITIONS  REPLICATION  INTERNAL\n"
        "orders              3           1            no\n"
        "__consumer_offsets  50          1            yes\n"
    )


def _description(error: str | None = None) -> dict[str, object]:
    return {
        "name": "orders",
        "topic_id": "7d0c9d6e-1111-2222-3333-444455556666",
        "is_internal": False,
        "partition_count": 2,
        "replication_factor": 1,
        "partitions": [
            {"partition": 0, "leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1],
             "log_start_offset": 0, "log_end_offset": 12, "error": None},
            {"partition": 1, "leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1],
             "log_start_offset": 3, "log_end_offset": 4, "error": error},
        ],
        "configs": {"retention.ms": "60000", "secret": None},
    }  # fmt: skip


def test_topic_description_shows_partitions_offsets_and_configs() -> None:
    assert render_description(_description()) == (
        "Topic: orders  id: 7d0c9d6e-1111-2222-3333-444455556666  partitions: 2"
        "  replication factor: 1\n"
        "PARTITION  LEADER  REPLICAS  ISR  LOG-START-OFFSET  LOG-END-OFFSET\n"
        "0          1       1         1    0                 12\n"
        "1          1       1         1    3                 4\n"
        "Configs:\n"
        "  retention.ms=60000\n"
        "  secret=(sensitive)\n"
    )


def test_topic_description_adds_an_error_column_only_when_needed() -> None:
    text = render_description(_description(error="LEADER_NOT_AVAILABLE"))
    assert "ERROR" in text.splitlines()[1]
    assert text.splitlines()[3].endswith("LEADER_NOT_AVAILABLE")


def test_created_and_altered_messages() -> None:
    created = {"name": "t", "partitions": 3, "replication_factor": 1}
    assert render_created(created) == "created topic 't' (3 partitions, replication factor 1)\n"
    one = {"name": "t", "partitions": 1, "replication_factor": 1}
    assert render_created(one) == "created topic 't' (1 partition, replication factor 1)\n"
    altered = {"name": "t", "set": {"retention.ms": "5"}, "deleted": ["cleanup.policy"]}
    assert render_altered(altered) == (
        "updated topic 't': set retention.ms=5, deleted cleanup.policy\n"
    )


def test_produce_summary_lists_partitions_when_several() -> None:
    one = {"topic": "t", "acks": "all", "records_acknowledged": 1, "lines_acknowledged": "1",
           "lines_sent_unconfirmed": "", "lines_refused": "", "lines_not_sent": "",
           "partitions": [{"partition": 0, "records_acknowledged": 1, "first_offset": 4,
                           "last_offset": 4}], "errors": []}  # fmt: skip
    assert render_summary(one) == "wrote 1 record to topic 't'\n"
    two = dict(one, records_acknowledged=3, partitions=[
        {"partition": 0, "records_acknowledged": 1, "first_offset": 4, "last_offset": 4},
        {"partition": 2, "records_acknowledged": 2, "first_offset": 0, "last_offset": 1},
    ])  # fmt: skip
    assert render_summary(two) == (
        "wrote 3 records to topic 't'\n"
        "PARTITION  RECORDS-ACKNOWLEDGED  FIRST-OFFSET  LAST-OFFSET\n"
        "0          1                     4             4\n"
        "2          2                     0             1\n"
    )


def test_produce_summary_names_the_lines_of_each_outcome() -> None:
    document = {"topic": "t", "acks": "all", "records_acknowledged": 3,
                "lines_acknowledged": "1-2,4", "lines_sent_unconfirmed": "5-6",
                "lines_refused": "3", "lines_not_sent": "7", "partitions": [],
                "errors": ["x"]}  # fmt: skip
    assert render_summary(document) == (
        "wrote 3 records to topic 't' (lines 1-2,4)\n"
        "unconfirmed (sent, no answer; may or may not be written): lines 5-6\n"
        "refused by the broker: lines 3\n"
        "not sent: lines 7\n"
    )


def test_consumed_record_lines() -> None:
    record = ConsumedRecord("t", 1, 7, 1700000000000, b"k", b"v", [("h", b"x"), ("n", None)])
    assert record_text_line(record, print_key=False) == b"v\n"
    assert record_text_line(record, print_key=True) == b"k\tv\n"
    keyless = ConsumedRecord("t", 0, 0, 0, None, None, [])
    assert record_text_line(keyless, print_key=True) == b"null\tnull\n"
    assert json.loads(record_json_line(record)) == {
        "topic": "t",
        "partition": 1,
        "offset": 7,
        "timestamp_ms": 1700000000000,
        "key": "k",
        "value": "v",
        "headers": [{"key": "h", "value": "x"}, {"key": "n", "value": None}],
    }


def test_counted_nouns_agree_with_their_count() -> None:
    assert [counted(n, "partition") for n in (0, 1, 2)] == [
        "0 partitions", "1 partition", "2 partitions",
    ]  # fmt: skip


def test_headers_for_json_fields_are_upper_case_with_dashes() -> None:
    assert headers_for(("node_id", "leader_epoch", "isr")) == ("NODE-ID", "LEADER-EPOCH", "ISR")
