"""The paging contract shared by the topic, consumer group and share group lists
(rest_admin_paging): the query parameters read and bounded, the rows filtered,
sorted (ties by name, unknown values last) and cut, and the next page's URL."""

from __future__ import annotations

from typing import Any, cast

import pytest
from starlette.requests import Request

from weir.broker.http.rest_admin_base import AdminCall, RestError
from weir.broker.http.rest_admin_group_list import SORT_FIELDS, SORT_KEYS, group_id_of
from weir.broker.http.rest_admin_paging import (
    PageRequest,
    cut_page,
    page_metadata,
    page_request,
)


def call_with(query: str) -> AdminCall:
    """An admin call whose request is `GET http://b/g?<query>` (the rest unused)."""
    scope = {
        "type": "http",
        "method": "GET",
        "scheme": "http",
        "server": ("b", 80),
        "path": "/g",
        "query_string": query.encode(),
        "headers": [(b"host", b"b")],
    }
    nothing = cast(Any, None)
    return AdminCall(nothing, Request(scope), nothing, nothing)


def rows() -> list[dict[str, Any]]:
    return [
        {"consumer_group_id": "billing-a", "total_lag": 5},
        {"consumer_group_id": "Billing-b", "total_lag": None},
        {"consumer_group_id": "orders", "total_lag": 9},
        {"consumer_group_id": "billing-c", "total_lag": 7},
    ]


def request(**changes: Any) -> PageRequest:
    fields: dict[str, Any] = {
        "q": "",
        "sort": "consumer_group_id",
        "descending": False,
        "page": 1,
        "page_size": 50,
    }
    return PageRequest(**{**fields, **changes})


def ids(paging: PageRequest) -> tuple[list[str], int]:
    page, total = cut_page(rows(), paging, group_id_of, SORT_KEYS)
    return [group_id_of(row) for row in page], total


def test_no_paging_parameter_asks_for_the_whole_list() -> None:
    assert page_request(call_with("other=1"), SORT_FIELDS) is None


def test_any_paging_parameter_asks_for_a_page_with_the_defaults() -> None:
    assert page_request(call_with("q=Bill"), SORT_FIELDS) == request(q="Bill")
    assert page_request(call_with("order=desc&page=3&page_size=500"), SORT_FIELDS) == request(
        descending=True, page=3, page_size=500
    )


@pytest.mark.parametrize(
    "query",
    [
        "page_size=501",
        "page_size=0",
        "page=0",
        "page=-1",
        "page=1e9",
        "sort=password",
        "order=sideways",
        "q=" + "x" * 1001,
        "page=1&page=2",
    ],
)
def test_bad_paging_parameters_are_400(query: str) -> None:
    with pytest.raises(RestError) as raised:
        page_request(call_with(query), SORT_FIELDS)
    assert raised.value.status == 400


def test_q_matches_a_case_insensitive_substring_and_total_counts_the_matches() -> None:
    assert ids(request(q="BILLING", page_size=2)) == (["Billing-b", "billing-a"], 3)


def test_rows_without_a_value_sort_last_in_either_order() -> None:
    assert ids(request(sort="total_lag"))[0] == ["billing-a", "billing-c", "orders", "Billing-b"]
    assert ids(request(sort="total_lag", descending=True))[0] == [
        "orders",
        "billing-c",
        "billing-a",
        "Billing-b",
    ]


def test_pages_follow_each_other_and_the_last_has_no_next() -> None:
    assert ids(request(page=2, page_size=3)) == (["orders"], 4)
    last = page_metadata(call_with("page=2&page_size=3"), request(page=2, page_size=3), 4)
    assert last == {"total": 4, "page": 2, "page_size": 3, "next": None}


def test_the_next_page_url_keeps_the_other_query_parameters() -> None:
    call = call_with("q=bill&sort=total_lag&page_size=3&extra=x")
    metadata = page_metadata(call, request(q="bill", sort="total_lag", page_size=3), 4)
    assert metadata["next"] == "http://b/g?q=bill&sort=total_lag&page_size=3&extra=x&page=2"
