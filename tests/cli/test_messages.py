import io

import pytest

from weir.cli.errors import CliError, describe_kafka_error, error_name
from weir.cli.partitioner import partition_for_key
from weir.cli.produce_command import (
    LINE_BYTES_MAX,
    READ_CHUNK_BYTES,
    InputLineError,
    PartitionChooser,
    read_lines,
    split_line,
)
from weir.format.errors import ErrorCode


def test_unknown_topic_message() -> None:
    assert (
        describe_kafka_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic="x")
        == "topic 'x' does not exist (UNKNOWN_TOPIC_OR_PARTITION)"
    )


def test_existing_topic_message() -> None:
    assert (
        describe_kafka_error(ErrorCode.TOPIC_ALREADY_EXISTS, topic="x", action="create")
        == "topic 'x' already exists (TOPIC_ALREADY_EXISTS)"
    )


def test_broker_message_is_kept_with_the_code_name() -> None:
    assert describe_kafka_error(
        ErrorCode.INVALID_CONFIG, topic="x", action="create", message="retention.ms: not a number"
    ) == ("cannot create topic 'x': retention.ms: not a number (INVALID_CONFIG)")


def test_partition_errors_name_the_partition() -> None:
    assert describe_kafka_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, topic="x", partition=2) == (
        "topic 'x' partition 2: not leader or follower (NOT_LEADER_OR_FOLLOWER)"
    )


def test_unknown_error_codes_still_have_a_name() -> None:
    assert error_name(9999) == "ERROR_9999"


def test_lines_lose_their_line_endings_only() -> None:
    stream = io.BytesIO(b"a\nb\r\n\n  c  \nlast")
    assert list(read_lines(stream)) == [b"a", b"b", b"", b"  c  ", b"last"]


def test_key_separator_splits_at_the_first_occurrence() -> None:
    assert split_line(b"k:v:w", b":", 1) == (b"k", b"v:w")
    assert split_line(b"::", b"::", 1) == (b"", b"")
    assert split_line(b"no key", None, 1) == (None, b"no key")
    with pytest.raises(CliError, match="line 3: no key separator ':'"):
        split_line(b"nokey", b":", 3)


def test_partition_choice_follows_kafka_default_partitioner() -> None:
    chooser = PartitionChooser(5, fixed=None)
    assert chooser.choose(b"21") == partition_for_key(b"21", 5)
    sticky = chooser.choose(None)
    assert chooser.choose(None) == sticky
    chooser.next_request()
    assert chooser.choose(None) == (sticky + 1) % 5
    assert PartitionChooser(5, fixed=3).choose(b"21") == 3


def test_lines_that_span_read_chunks_come_out_whole() -> None:
    long_line = b"x" * (3 * READ_CHUNK_BYTES + 17)
    stream = io.BytesIO(b"a\r\n" + long_line + b"\nb\n" + long_line)
    assert list(read_lines(stream)) == [b"a", long_line, b"b", long_line]


def test_an_overlong_line_is_reported_with_its_number() -> None:
    stream = io.BytesIO(b"ok\n" + b"y" * (LINE_BYTES_MAX + 5) + b"\nnever\n")
    lines = read_lines(stream)
    assert next(lines) == b"ok"
    with pytest.raises(InputLineError, match=f"line 2: longer than {LINE_BYTES_MAX} bytes"):
        next(lines)
