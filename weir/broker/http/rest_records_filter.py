"""Server-side filters of a records read or stream (docs/http-records.md, "Filter"),
pure: which records of a partition a caller asked for, by key, by header and by a
substring of the value, and the bounds of the scan that looks for them.

A filtered read scans records in offset order and returns those that match; it
stops after `scan_max_records` records or `scan_max_bytes` bytes scanned (whether
they matched or not), so a filter that matches nothing costs a bounded read, and
the answer's `next_offset` says where to go on from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from weir.broker.http.rest_records_format import bad_request

# The longest filter text accepted (a key, a header name or value, a substring).
FILTER_TEXT_CHARS_MAX = 1024
# What one filtered read scans at most: records, and key + value + header bytes.
SCAN_RECORDS_MAX = 100_000
SCAN_RECORDS_DEFAULT = 10_000
SCAN_BYTES_MAX = 16 * 1024 * 1024
SCAN_BYTES_DEFAULT = 4 * 1024 * 1024

FILTER_PARAMS = ("key", "header_name", "header_value", "value_contains")


@dataclass(frozen=True)
class RecordFilter:
    """What a record must have to be returned; None: anything. Texts compare as
    their UTF-8 bytes."""

    key: bytes | None = None
    header_name: str | None = None
    header_value: bytes | None = None
    value_contains: bytes | None = None

    @property
    def active(self) -> bool:
        return any(
            part is not None
            for part in (self.key, self.header_name, self.header_value, self.value_contains)
        )

    def matches(
        self, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]
    ) -> bool:
        if self.key is not None and key != self.key:
            return False
        if self.value_contains is not None and (value is None or self.value_contains not in value):
            return False
        if self.header_name is not None:
            return any(
                name == self.header_name
                and (self.header_value is None or data == self.header_value)
                for name, data in headers
            )
        return True


@dataclass(frozen=True)
class ScanBounds:
    records_max: int
    bytes_max: int


def _text(params: Mapping[str, str], name: str) -> str | None:
    text = params.get(name)
    if text is None:
        return None
    if len(text) > FILTER_TEXT_CHARS_MAX:
        raise bad_request(f"{name} is longer than {FILTER_TEXT_CHARS_MAX} characters")
    return text


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogatepass")


def parse_filter(params: Mapping[str, str]) -> RecordFilter:
    """The filter of a query's parameters, or RestError(400)."""
    header_name = _text(params, "header_name")
    header_value = _text(params, "header_value")
    if header_value is not None and header_name is None:
        raise bad_request("header_value needs header_name")
    value_contains = _text(params, "value_contains")
    if value_contains == "":
        raise bad_request("value_contains must not be empty")
    return RecordFilter(
        key=_utf8(_text(params, "key")),
        header_name=header_name,
        header_value=_utf8(header_value),
        value_contains=_utf8(value_contains),
    )


def parse_scan_bounds(params: Mapping[str, str]) -> ScanBounds:
    """`scan_max_records` and `scan_max_bytes`, or RestError(400)."""
    return ScanBounds(
        records_max=_bounded(params, "scan_max_records", SCAN_RECORDS_MAX, SCAN_RECORDS_DEFAULT),
        bytes_max=_bounded(params, "scan_max_bytes", SCAN_BYTES_MAX, SCAN_BYTES_DEFAULT),
    )


def _bounded(params: Mapping[str, str], name: str, high: int, default: int) -> int:
    text = params.get(name)
    if text is None:
        return default
    if not text.isascii() or not text.isdigit() or len(text) > 19:
        raise bad_request(f"{name} must be an integer between 1 and {high}")
    value = int(text)
    if not 1 <= value <= high:
        raise bad_request(f"{name} must be an integer between 1 and {high}")
    return value
