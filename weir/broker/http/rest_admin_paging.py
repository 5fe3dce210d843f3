"""The paging contract of the big lists (topics, consumer groups, share groups):
query parameters `q` (a case-insensitive substring of the name), `sort` (a field
of the rows), `order` (`asc` or `desc`), `page` (1-based) and `page_size`
(default PAGE_SIZE_DEFAULT, at most PAGE_SIZE_MAX). Without any of them a list
answers as before (every row); with them, the rows are filtered, sorted and cut
on the server and `metadata` carries `total` (rows matching `q`), `page`,
`page_size` and `next` (the next page's URL, or null)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from weir.broker.http.rest_admin_base import AdminCall, Param, bad_request, int_text

PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_MAX = 500
PAGING_PARAMS = ("q", "sort", "order", "page", "page_size")
Row = TypeVar("Row")


@dataclass(frozen=True)
class PageRequest:
    q: str
    sort: str
    descending: bool
    page: int
    page_size: int


def page_request(call: AdminCall, sort_fields: Sequence[str]) -> PageRequest | None:
    """The paging the call asks for (None: none of the parameters; the whole list).
    `sort_fields[0]` is the default sort."""
    if not any(call.query(name) is not None for name in PAGING_PARAMS):
        return None
    sort = call.query("sort") or sort_fields[0]
    if sort not in sort_fields:
        raise bad_request(f"sort must be one of {', '.join(sort_fields)}")
    order = call.query("order") or "asc"
    if order not in ("asc", "desc"):
        raise bad_request("order must be asc or desc")
    page = int_text(call.query("page") or "1", "page", 1)
    page_size = int_text(call.query("page_size") or str(PAGE_SIZE_DEFAULT), "page_size", 1)
    if page_size > PAGE_SIZE_MAX:
        raise bad_request(f"page_size must be at most {PAGE_SIZE_MAX}")
    return PageRequest(call.query("q") or "", sort, order == "desc", page, page_size)


def cut_page(
    rows: Sequence[Row],
    paging: PageRequest,
    name_of: Callable[[Row], str],
    sort_keys: Mapping[str, Callable[[Row], Any]],
) -> tuple[list[Row], int]:
    """The rows of the page asked for, and how many rows match `q`. Ties in the
    sort field are broken by name (always ascending), so pages do not overlap."""
    needle = paging.q.lower()
    matching = [row for row in rows if needle in name_of(row).lower()] if needle else list(rows)
    matching.sort(key=name_of)
    if paging.sort in sort_keys:
        matching.sort(key=sort_keys[paging.sort], reverse=paging.descending)
    elif paging.descending:
        matching.reverse()
    start = (paging.page - 1) * paging.page_size
    return matching[start : start + paging.page_size], len(matching)


def page_metadata(call: AdminCall, paging: PageRequest, total: int) -> dict[str, Any]:
    """What `metadata` adds for a paged answer (the caller sets `self`)."""
    next_url = None
    if paging.page * paging.page_size < total:
        next_url = str(call.request.url.include_query_params(page=paging.page + 1))
    return {"total": total, "page": paging.page, "page_size": paging.page_size, "next": next_url}


def paging_query(sort_fields: Sequence[str]) -> tuple[Param, ...]:
    """The OpenAPI declaration of the paging parameters of a list."""
    return (
        Param("q", "Only the rows whose name contains this (case-insensitive)"),
        Param(
            "sort",
            f"The field to sort by (default {sort_fields[0]})",
            schema={"type": "string", "enum": list(sort_fields)},
        ),
        Param("order", "asc (default) or desc", schema={"type": "string", "enum": ["asc", "desc"]}),
        Param("page", "The page, from 1", schema={"type": "integer", "minimum": 1}),
        Param(
            "page_size",
            f"Rows per page (default {PAGE_SIZE_DEFAULT})",
            schema={"type": "integer", "minimum": 1, "maximum": PAGE_SIZE_MAX},
        ),
    )
