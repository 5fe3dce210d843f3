"""The records API's server-side filters (weir.broker.http.rest_records_filter):
which records match a key, a header (name, and value) and a value substring, and
the bounds of untrusted filter parameters."""

from __future__ import annotations

import pytest

from weir.broker.http.rest_records_filter import (
    FILTER_TEXT_CHARS_MAX,
    SCAN_BYTES_DEFAULT,
    SCAN_RECORDS_DEFAULT,
    SCAN_RECORDS_MAX,
    RecordFilter,
    parse_filter,
    parse_scan_bounds,
)
from weir.broker.http.rest_records_format import RestError

HEADERS = [("trace", b"abc"), ("tenant", b"acme"), ("empty", None)]


def test_no_parameters_is_no_filter_and_matches_everything() -> None:
    record_filter = parse_filter({})
    assert not record_filter.active
    assert record_filter.matches(None, None, [])


def test_a_key_filter_matches_that_key_exactly_and_not_a_null_key() -> None:
    record_filter = parse_filter({"key": "customer-17"})
    assert record_filter.matches(b"customer-17", b"v", [])
    assert not record_filter.matches(b"customer-170", b"v", [])
    assert not record_filter.matches(None, b"v", [])


def test_a_header_filter_matches_by_name_or_by_name_and_value() -> None:
    by_name = parse_filter({"header_name": "tenant"})
    assert by_name.matches(None, None, HEADERS)
    assert not by_name.matches(None, None, [("other", b"acme")])
    by_value = parse_filter({"header_name": "tenant", "header_value": "acme"})
    assert by_value.matches(None, None, HEADERS)
    assert not by_value.matches(None, None, [("tenant", b"other")])
    assert not by_value.matches(None, None, [("empty", None)])


def test_a_value_substring_matches_utf8_bytes_anywhere_in_the_value() -> None:
    record_filter = parse_filter({"value_contains": "héllo"})
    assert record_filter.matches(None, '{"greeting": "héllo!"}'.encode(), [])
    assert not record_filter.matches(None, b"hello", [])
    assert not record_filter.matches(None, None, [])


def test_filters_combine_all_must_match() -> None:
    record_filter = RecordFilter(key=b"k", value_contains=b"x")
    assert record_filter.matches(b"k", b"axb", [])
    assert not record_filter.matches(b"k", b"ab", [])
    assert not record_filter.matches(b"j", b"axb", [])


@pytest.mark.parametrize(
    "params",
    [
        {"header_value": "acme"},
        {"value_contains": ""},
        {"key": "k" * (FILTER_TEXT_CHARS_MAX + 1)},
        {"header_name": "h" * (FILTER_TEXT_CHARS_MAX + 1)},
    ],
)
def test_bad_filters_are_400(params: dict[str, str]) -> None:
    with pytest.raises(RestError) as refused:
        parse_filter(params)
    assert refused.value.status == 400


def test_scan_bounds_default_and_accept_their_range() -> None:
    bounds = parse_scan_bounds({})
    assert (bounds.records_max, bounds.bytes_max) == (SCAN_RECORDS_DEFAULT, SCAN_BYTES_DEFAULT)
    assert parse_scan_bounds({"scan_max_records": "1"}).records_max == 1
    assert parse_scan_bounds({"scan_max_records": str(SCAN_RECORDS_MAX)}).records_max == (
        SCAN_RECORDS_MAX
    )


@pytest.mark.parametrize(
    "value", ["0", "-1", str(SCAN_RECORDS_MAX + 1), "9" * 400, "1e3", "١٢", ""]
)
def test_scan_bounds_out_of_range_or_not_integers_are_400(value: str) -> None:
    with pytest.raises(RestError) as refused:
        parse_scan_bounds({"scan_max_records": value})
    assert refused.value.status == 400
