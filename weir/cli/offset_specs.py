"""Where `weir consume -o SPEC` starts reading, as kcat and rpk spell it.

    beginning (or start, earliest)   the log start offset
    end (or latest)                  the high watermark: only records written from now
    N                                offset N exactly
    +N                               N records after the log start
    -N                               N records before the end
    @MS                              the first record with a timestamp at or after MS
                                     (epoch milliseconds)
    P:SPEC                           SPEC for partition P only (repeat -o for others)

Parsing is pure (no client stack): `weir --help` imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

PARTITION_SEPARATOR = ":"


class OffsetKind(Enum):
    BEGINNING = "beginning"
    END = "end"
    ABSOLUTE = "absolute"
    AFTER_BEGINNING = "after_beginning"
    BEFORE_END = "before_end"
    TIMESTAMP = "timestamp"


NAMED_KINDS = {
    "beginning": OffsetKind.BEGINNING,
    "start": OffsetKind.BEGINNING,
    "earliest": OffsetKind.BEGINNING,
    "oldest": OffsetKind.BEGINNING,
    "end": OffsetKind.END,
    "latest": OffsetKind.END,
    "newest": OffsetKind.END,
}
SIGNED_KINDS = {"+": OffsetKind.AFTER_BEGINNING, "-": OffsetKind.BEFORE_END}
TIMESTAMP_PREFIX = "@"
SPEC_HELP = "beginning, end, N, +N (after the start), -N (before the end), @TIMESTAMP_MS"


@dataclass(frozen=True)
class OffsetSpec:
    kind: OffsetKind
    value: int = 0

    def __str__(self) -> str:
        if self.kind is OffsetKind.ABSOLUTE:
            return str(self.value)
        if self.kind is OffsetKind.AFTER_BEGINNING:
            return f"+{self.value}"
        if self.kind is OffsetKind.BEFORE_END:
            return f"-{self.value}"
        if self.kind is OffsetKind.TIMESTAMP:
            return f"@{self.value}"
        return self.kind.value


BEGINNING = OffsetSpec(OffsetKind.BEGINNING)
END = OffsetSpec(OffsetKind.END)


@dataclass(frozen=True)
class PartitionOffsetSpec:
    """A spec and the partition it is for (None: every partition without its own)."""

    partition: int | None
    spec: OffsetSpec


def parse_partition_offset_spec(text: str) -> PartitionOffsetSpec:
    """`SPEC` or `P:SPEC`; ValueError with a one-line message if malformed."""
    partition_text, found, spec_text = text.partition(PARTITION_SEPARATOR)
    if not found:
        return PartitionOffsetSpec(None, parse_offset_spec(text))
    if not partition_text.isdigit():
        raise ValueError(f"partition {partition_text!r} in {text!r} is not a number")
    return PartitionOffsetSpec(int(partition_text), parse_offset_spec(spec_text))


def parse_offset_spec(text: str) -> OffsetSpec:
    word = text.strip().lower()
    if word in NAMED_KINDS:
        return OffsetSpec(NAMED_KINDS[word])
    if word[:1] in SIGNED_KINDS:
        return OffsetSpec(SIGNED_KINDS[word[:1]], _count(word[1:], text))
    if word.startswith(TIMESTAMP_PREFIX):
        return OffsetSpec(OffsetKind.TIMESTAMP, _count(word[1:], text))
    return OffsetSpec(OffsetKind.ABSOLUTE, _count(word, text))


def _count(digits: str, text: str) -> int:
    if not digits.isdigit():
        raise ValueError(f"not an offset: {text!r} (expected {SPEC_HELP})")
    return int(digits)
