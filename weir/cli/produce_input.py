"""Reading `weir produce`'s input: stdin's lines (`LineReader`, which also says
whether more input is ready now, for kcat-style linger), each line made a record
(`parse_input`: the whole line, key and value split at a separator, or the fields of a
kcat-style format, with the options' key and headers), and a bad line reported with
its number (`InputLineError`), if need be before anything is sent (`checked_ahead`).
Nothing here talks to a broker; `weir.cli.produce_command` sends what this reads."""

from __future__ import annotations

import os
import select
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from weir.cli.errors import CliError
from weir.cli.record_format import FormatError, InputRecord, Token, parse_line

RECORD_OVERHEAD_BYTES = 24
LINE_BYTES_MAX = 8 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024


class InputOptions(Protocol):
    """What parsing needs of the produce options (`ProduceOptions` has it)."""

    @property
    def key_separator(self) -> bytes | None: ...

    @property
    def record_format(self) -> Sequence[Token] | None: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...

    @property
    def max_records(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class InputLine:
    line_number: int
    record: InputRecord
    size_bytes: int


class InputLineError(CliError):
    """A line that cannot become a record; nothing from it on is sent."""

    def __init__(self, line_number: int, reason: str) -> None:
        super().__init__(f"line {line_number}: {reason}")
        self.line_number = line_number


class LineReader:
    """Lines of a byte stream without their line ending (\\n or \\r\\n), and whether
    more input is ready now (`input_waiting`), so a producer can send what it has
    while a slow pipe (`tail -f log | weir produce`) is quiet, as kcat's linger does.
    A line longer than LINE_BYTES_MAX is an InputLineError.

    Input is read in chunks and each chunk split into its whole lines at once; the
    unfinished last line waits in `_partial` for the next chunk."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.line_number = 0
        self._lines: list[bytes] = []
        self._next_index = 0
        self._partial = bytearray()
        self._at_eof = False
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None

    def __iter__(self) -> Iterator[bytes]:
        while True:
            line = self._next_line()
            if line is None:
                return
            yield line

    def is_regular_file(self) -> bool:
        return self._fd is not None and stat.S_ISREG(os.fstat(self._fd).st_mode)

    def input_waiting(self) -> bool:
        """A whole line is buffered, or the stream has bytes (or its end) ready now."""
        if self._fd is None or self._next_index < len(self._lines) or self._at_eof:
            return True
        readable, _, _ = select.select([self._fd], [], [], 0)
        return bool(readable)

    def _next_line(self) -> bytes | None:
        while self._next_index >= len(self._lines):
            if self._at_eof:
                if not self._partial:
                    return None
                self._lines, self._next_index = [bytes(self._partial)], 0
                self._partial.clear()
                break
            self._read_lines()
        line = self._lines[self._next_index]
        self._next_index += 1
        self.line_number += 1
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > LINE_BYTES_MAX:
            raise InputLineError(self.line_number, f"longer than {LINE_BYTES_MAX} bytes")
        return line

    def _read_lines(self) -> None:
        """One chunk: its whole lines become the next to hand out."""
        chunk = self._read_chunk()
        if not chunk:
            self._at_eof = True
            return
        if b"\n" not in chunk:
            self._partial += chunk
            if len(self._partial) > LINE_BYTES_MAX + 1:  # stop holding it: report it
                self._lines, self._next_index = [bytes(self._partial)], 0
                self._partial.clear()
            return
        lines = (bytes(self._partial) + chunk).split(b"\n")
        self._partial = bytearray(lines.pop())
        self._lines, self._next_index = lines, 0

    def _read_chunk(self) -> bytes:
        if self._fd is not None:
            return os.read(self._fd, READ_CHUNK_BYTES)
        return self.stream.read(READ_CHUNK_BYTES) or b""


def read_lines(stream: BinaryIO) -> Iterator[bytes]:
    """The lines of `stream` (see LineReader)."""
    return iter(LineReader(stream))


def split_line(
    line: bytes, separator: bytes | None, line_number: int
) -> tuple[bytes | None, bytes]:
    """(key, value) of one input line: the whole line is the value without a separator."""
    if separator is None:
        return None, line
    key, found, value = line.partition(separator)
    if not found:
        raise InputLineError(
            line_number, f"no key separator {separator.decode(errors='replace')!r}"
        )
    return key, value


def parse_input(lines: Iterable[bytes], options: InputOptions) -> Iterator[InputLine]:
    """Each line as a record, with the options' key and headers; InputLineError on a
    line that does not fit."""
    for line_number, line in enumerate(lines, start=1):
        if options.max_records is not None and line_number > options.max_records:
            return
        if options.record_format is not None:
            try:
                record = parse_line(options.record_format, line)
            except FormatError as exc:
                raise InputLineError(line_number, f"does not match the format: {exc}") from None
        else:
            key, value = split_line(line, options.key_separator, line_number)
            record = InputRecord(key=key, value=value)
        if record.key is None:
            record.key = options.key
        record.headers[:0] = options.headers
        if record.timestamp_ms is not None and record.timestamp_ms < 0:
            raise InputLineError(line_number, f"timestamp {record.timestamp_ms} is negative")
        yield InputLine(line_number, record, len(line) + RECORD_OVERHEAD_BYTES)


def checked_ahead(
    lines: Iterator[InputLine], limit_bytes: int, check: Callable[[InputLine], None]
) -> Iterator[InputLine]:
    """Read and check up to `limit_bytes` of input before yielding any of it, so a bad
    line there stops the command before anything is sent."""
    ahead: list[InputLine] = []
    size = 0
    for item in lines:
        check(item)
        ahead.append(item)
        size += item.size_bytes
        if size >= limit_bytes:
            break
    yield from ahead
    for item in lines:
        check(item)
        yield item
