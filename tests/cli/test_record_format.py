"""kcat-style format strings: compiling, printing records, reading lines."""

from __future__ import annotations

import pytest

from weir.cli.record_format import (
    Field,
    FormatError,
    OutputRecord,
    check_input_format,
    compile_format,
    input_tokens,
    parse_line,
    render_record,
)

RECORD = OutputRecord("orders", 2, 41, 1700000000123, b"k", None, [("a", b"1"), ("n", None)])


def test_fields_and_escapes_render_as_kcat_prints_them() -> None:
    tokens = compile_format("%t/%p/%o %k=%s (%K,%S) [%h] %H %T %%\\t\\\\\\n")
    assert render_record(tokens, RECORD) == (
        b"orders/2/41 k= (1,-1) [a=1,n=] 2 1700000000123 %\t\\\n"
    )


def test_adjacent_literals_merge_into_one_token() -> None:
    assert compile_format("a%%b\\n%v") == [b"a%b\n", Field("v")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("%q", "unknown field %q"),
        ("abc%", "ends with a lone '%'"),
        ("\\x", "unknown escape \\x"),
    ],
)
def test_malformed_formats_are_refused(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message.replace("\\", "\\\\")):
        compile_format(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("%k%v", "no text between the fields"),
        ("%k:%o", "%o cannot be read from input"),
        ("%k:%k:%v", "reads the key twice"),
        ("%k", "has no value field"),
    ],
)
def test_produce_formats_must_be_readable(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        check_input_format(compile_format(text), text)


def test_lines_are_read_field_by_field_up_to_the_next_literal() -> None:
    tokens = input_tokens(compile_format("%p|%T|%k|%h|%v\\n"))
    record = parse_line(tokens, b"3|1700000000000|key|a=1,b=|va|lue")
    assert (record.partition, record.timestamp_ms, record.key) == (3, 1700000000000, b"key")
    assert record.headers == [("a", b"1"), ("b", b"")]
    assert record.value == b"va|lue"  # the last field takes the rest of the line


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"nokey", "no '|' after the key"),
        (b"x|y", "no '|<' after the key"),
        (b"k|<v", "no '>' after the value"),
        (b"k|<v>tail", "unexpected text after byte 5"),
    ],
)
def test_lines_that_do_not_match_say_where(line: bytes, message: str) -> None:
    tokens = input_tokens(compile_format("%k|<%v>"))
    with pytest.raises(FormatError, match=message):
        parse_line(tokens, line)


def test_a_line_must_start_with_the_formats_leading_text() -> None:
    with pytest.raises(FormatError, match="expected '<' at byte 1"):
        parse_line(input_tokens(compile_format("<%v>")), b"v>")


def test_numbers_and_headers_must_be_well_formed() -> None:
    with pytest.raises(FormatError, match="partition 'x' is not a number"):
        parse_line(input_tokens(compile_format("%p %v")), b"x v")
    with pytest.raises(FormatError, match="header 'nokv' is not key=value"):
        parse_line(input_tokens(compile_format("%h %v")), b"nokv v")
