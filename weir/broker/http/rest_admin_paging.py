"""The paging contract of the big lists (topics, consumer groups, share groups):
query parameters `q` (a case-insensitive substring of the name, at most
Q_CHARS_MAX characters), `sort` (a field of the rows), `order` (`asc` or `desc`),
`page` (1-based) and `page_size` (default PAGE_SIZE_DEFAULT, at most
PAGE_SIZE_MAX); anything else is a 400. Without any of them a list answers as
before (every row); with them, the rows are filtered, sorted (ties by name, rows
without a value in the sort field last) and cut on the server, and `metadata`
carries `total` (rows matching `q`), `page`, `page_size` and `next` (the next
page's URL, keeping the other query parameters, or null)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from weir.broker.http.rest_admin_base import AdminCall, Param, bad_request, int_text

PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_MAX = 500
Q_CHARS_MAX = 1_000
PAGING_PARAMS = ("q", "sort", "order", "page", "page_size")
Row = TypeVar("Row")


@dataclass(frozen=True)
class PageRequest:
    q: str
    sort: str
    descending: bool
    page: int
    page_size: int

    def matches(self, name: str) -> bool:
        """Whether a row named `name` is in the list `q` asks for."""
        return self.q.lower() in name.lower()


def page_request(call: AdminCall, sort_fields: Sequence[str]) -> PageRequest | None:
    """The paging the call asks for (None: none of the parameters; the whole list).
    `sort_fields[0]` is the default sort."""
    if not any(call.query(name) is not None for name in PAGING_PARAMS):
        return None
    q = call.query("q") or ""
    if len(q) > Q_CHARS_MAX:
        raise bad_request(f"q must be at most {Q_CHARS_MAX} characters")
    sort = call.query("sort") or sort_fields[0]
    if sort not in sort_fields:
        raise bad_request(f"sort must be one of {', '.join(sort_fields)}")
    order = call.query("order") or "asc"
    if order not in ("asc", "desc"):
        raise bad_request("order must be asc or desc")
    page_text = call.query("page")
    size_text = call.query("page_size")
    page = 1 if page_text is None else int_text(page_text, "page", 1)
    page_size = (
        PAGE_SIZE_DEFAULT
        if size_text is None
        else int_text(size_text, "page_size", 1, PAGE_SIZE_MAX)
    )
    return PageRequest(q, sort, order == "desc", page, page_size)


def cut_page(
    rows: Sequence[Row],
    paging: PageRequest,
    name_of: Callable[[Row], str],
    sort_keys: Mapping[str, Callable[[Row], Any]],
) -> tuple[list[Row], int]:
    """The rows of the page asked for, and how many rows match `q`. Ties in the
    sort field are broken by name (always ascending), so pages do not overlap;
    rows whose sort key is None (a value not known) come last either way round."""
    matching = [row for row in rows if paging.matches(name_of(row))]
    matching.sort(key=name_of)
    sort_key = sort_keys.get(paging.sort)
    if sort_key is not None:
        known = [row for row in matching if sort_key(row) is not None]
        unknown = [row for row in matching if sort_key(row) is None]
        known.sort(key=sort_key, reverse=paging.descending)
        matching = known + unknown
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
        Param(
            "q",
            "Only the rows whose name contains this (case-insensitive)",
            schema={"type": "string", "maxLength": Q_CHARS_MAX},
        ),
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
