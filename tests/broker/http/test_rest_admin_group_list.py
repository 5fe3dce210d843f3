"""The consumer group list's paging: filter, sort (unknown values last), page, next."""

from __future__ import annotations

from typing import Any

from weir.broker.http.rest_admin_group_list import PageRequest, next_page_url, select_page


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


def ids(page: list[dict[str, Any]]) -> list[str]:
    return [row["consumer_group_id"] for row in page]


def test_q_matches_a_case_insensitive_substring_and_total_counts_the_matches() -> None:
    page, total = select_page(rows(), request(q="billing", page_size=2))
    assert (ids(page), total) == (["Billing-b", "billing-a"], 3)


def test_rows_without_a_value_sort_last_in_either_order() -> None:
    up, _ = select_page(rows(), request(sort="total_lag"))
    down, _ = select_page(rows(), request(sort="total_lag", descending=True))
    assert ids(up) == ["billing-a", "billing-c", "orders", "Billing-b"]
    assert ids(down) == ["orders", "billing-c", "billing-a", "Billing-b"]


def test_pages_follow_each_other_and_the_last_has_no_next() -> None:
    second, total = select_page(rows(), request(page=2, page_size=3))
    assert (ids(second), total) == (["orders"], 4)
    assert next_page_url("http://b/g", request(page=2, page_size=3), total) is None
    assert (
        next_page_url("http://b/g", request(q="bill", page_size=3), 4)
        == "http://b/g?q=bill&sort=consumer_group_id&order=asc&page=2&page_size=3"
    )
