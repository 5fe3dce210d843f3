"""kcat-style format strings: how `weir consume -f` prints records and `weir produce -f`
reads them.

A format is literal text with fields and escapes:

    %t topic        %p partition     %o offset          %T timestamp (ms)
    %k key          %K key length    %s or %v value     %S or %V value length
    %h headers as key=value,key=value                   %H header count
    %% a percent sign;  escapes \\n \\r \\t \\0 \\\\

Printing, a null key or value is empty and its length -1 (as kcat prints them).
Reading (produce), each input line is matched against the format without its line
ending: a field ends where the literal text after it starts, so two fields must be
separated by text. Produce formats may use %k %s/%v %h %p %T.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

FIELD_NAMES = {
    "t": "topic",
    "p": "partition",
    "o": "offset",
    "T": "timestamp",
    "k": "key",
    "K": "key length",
    "s": "value",
    "v": "value",
    "S": "value length",
    "V": "value length",
    "h": "headers",
    "H": "header count",
}
INPUT_FIELDS = frozenset("kvshpT")
ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "0": b"\0", "\\": b"\\"}
HEADER_SEPARATOR = b","
HEADER_KEY_VALUE_SEPARATOR = b"="
NULL_LENGTH = b"-1"


class FormatError(ValueError):
    """A format string, or an input line read with one, is malformed; one-line message."""


@dataclass(frozen=True)
class Field:
    letter: str


Token = bytes | Field


@dataclass(frozen=True)
class OutputRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]


@dataclass(slots=True)
class InputRecord:
    """One record read from an input line; None where the format has no such field."""

    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    partition: int | None = None
    timestamp_ms: int | None = None


def compile_format(text: str) -> list[Token]:
    """Literals (bytes, adjacent ones merged) and fields; FormatError if malformed."""
    tokens: list[Token] = []
    literal = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char in "%\\":
            if index + 1 == len(text):
                raise FormatError(f"format {text!r} ends with a lone {char!r}")
            follower = text[index + 1]
            index += 2
            if char == "\\":
                literal += _escape(follower, text)
            elif follower == "%":
                literal += b"%"
            else:
                if follower not in FIELD_NAMES:
                    raise FormatError(f"unknown field %{follower} in format {text!r} "
                                      f"(known: {known_fields()})")  # fmt: skip
                if literal:
                    tokens.append(bytes(literal))
                    literal.clear()
                tokens.append(Field(follower))
            continue
        literal += char.encode("utf-8")
        index += 1
    if literal:
        tokens.append(bytes(literal))
    return tokens


def known_fields() -> str:
    return " ".join(f"%{letter}" for letter in FIELD_NAMES)


def _escape(letter: str, text: str) -> bytes:
    try:
        return ESCAPES[letter]
    except KeyError:
        raise FormatError(f"unknown escape \\{letter} in format {text!r} "
                          "(known: \\n \\r \\t \\0 \\\\)") from None  # fmt: skip


def render_record(tokens: Sequence[Token], record: OutputRecord) -> bytes:
    out = bytearray()
    for token in tokens:
        out += token if isinstance(token, bytes) else _field_bytes(token.letter, record)
    return bytes(out)


def _field_bytes(letter: str, record: OutputRecord) -> bytes:
    if letter in "sv":
        return record.value or b""
    if letter == "k":
        return record.key or b""
    if letter in "SV":
        return _length(record.value)
    if letter == "K":
        return _length(record.key)
    if letter == "h":
        return HEADER_SEPARATOR.join(
            k.encode("utf-8") + HEADER_KEY_VALUE_SEPARATOR + (v or b"") for k, v in record.headers
        )
    numbers = {
        "p": record.partition,
        "o": record.offset,
        "T": record.timestamp_ms,
        "H": len(record.headers),
    }
    if letter in numbers:
        return str(numbers[letter]).encode("ascii")
    return record.topic.encode("utf-8")


def _length(data: bytes | None) -> bytes:
    return NULL_LENGTH if data is None else str(len(data)).encode("ascii")


def check_input_format(tokens: Sequence[Token], text: str) -> None:
    """A produce format: only input fields, each at most once, text between fields."""
    seen: set[str] = set()
    previous: Token | None = None
    for token in tokens:
        if isinstance(token, Field):
            if token.letter not in INPUT_FIELDS:
                raise FormatError(f"%{token.letter} cannot be read from input (produce formats "
                                  "take %k %v %s %h %p %T)")  # fmt: skip
            name = FIELD_NAMES[token.letter]
            if name in seen:
                raise FormatError(f"format {text!r} reads the {name} twice")
            if isinstance(previous, Field):
                raise FormatError(f"format {text!r}: %{previous.letter}%{token.letter} has no "
                                  "text between the fields to tell where one ends")  # fmt: skip
            seen.add(name)
        previous = token
    if "value" not in seen:
        raise FormatError(f"format {text!r} has no value field (%v or %s)")


def input_tokens(tokens: Sequence[Token]) -> list[Token]:
    """The format as matched against one line: a trailing line ending is not part of it."""
    trimmed = list(tokens)
    if trimmed and isinstance(trimmed[-1], bytes):
        tail = trimmed[-1].rstrip(b"\r\n")
        trimmed[-1:] = [tail] if tail else []
    return trimmed


def parse_line(tokens: Sequence[Token], line: bytes) -> InputRecord:
    """Match one input line (no line ending) against a produce format; FormatError if it
    does not match."""
    record = InputRecord()
    position = 0
    for index, token in enumerate(tokens):
        if isinstance(token, bytes):
            if not line.startswith(token, position):
                raise FormatError(f"expected {_show(token)} at byte {position + 1}")
            position += len(token)
            continue
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if isinstance(following, bytes):
            end = line.find(following, position)
            if end < 0:
                raise FormatError(f"no {_show(following)} after the {FIELD_NAMES[token.letter]}")
        else:
            end = len(line)
        _set_field(record, token.letter, line[position:end])
        position = end
    if position != len(line):
        raise FormatError(f"unexpected text after byte {position}")
    return record


def _show(literal: bytes) -> str:
    return repr(literal.decode("utf-8", errors="replace"))


def _set_field(record: InputRecord, letter: str, data: bytes) -> None:
    if letter == "k":
        record.key = data
    elif letter in "sv":
        record.value = data
    elif letter == "h":
        record.headers.extend(parse_headers(data))
    elif letter == "p":
        record.partition = _number(data, "partition")
    else:
        record.timestamp_ms = _number(data, "timestamp")


def parse_headers(data: bytes) -> list[tuple[str, bytes | None]]:
    """`a=1,b=2` -> [("a", b"1"), ("b", b"2")]; empty input: no headers."""
    if not data:
        return []
    headers: list[tuple[str, bytes | None]] = []
    for item in data.split(HEADER_SEPARATOR):
        key, found, value = item.partition(HEADER_KEY_VALUE_SEPARATOR)
        if not found or not key:
            raise FormatError(f"header {_show(item)} is not key=value")
        headers.append((_utf8(key, "header key"), value))
    return headers


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"{what} {data!r} is not UTF-8") from None


def _number(data: bytes, what: str) -> int:
    if not data.strip().lstrip(b"-").isdigit():
        raise FormatError(f"{what} {_show(data)} is not a number")
    return int(data)
