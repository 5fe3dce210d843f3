"""Reading `weir produce`'s input (weir.cli.produce_input): lines, keys, limits."""

import io

import pytest

from weir.cli.errors import CliError
from weir.cli.produce_input import (
    LINE_BYTES_MAX,
    READ_CHUNK_BYTES,
    InputLineError,
    read_lines,
    split_line,
)


def test_lines_lose_their_line_endings_only() -> None:
    stream = io.BytesIO(b"a\nb\r\n\n  c  \nlast")
    assert list(read_lines(stream)) == [b"a", b"b", b"", b"  c  ", b"last"]


def test_key_separator_splits_at_the_first_occurrence() -> None:
    assert split_line(b"k:v:w", b":", 1) == (b"k", b"v:w")
    assert split_line(b"::", b"::", 1) == (b"", b"")
    assert split_line(b"no key", None, 1) == (None, b"no key")
    with pytest.raises(CliError, match="line 3: no key separator ':'"):
        split_line(b"nokey", b":", 3)


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
