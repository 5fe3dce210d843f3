"""The console's paging contract for the share-group list (docs/http-admin.md,
"Conventions"): `q` (a case-insensitive substring of the name), `sort` (a field
of the rows), `order` (`asc`|`desc`), `page` (1-based) and `page_size` (default
50, at most 500). Without any of them a list answers as before (the whole list);
with them its `metadata` carries `total` (the rows matching `q`), `page`,
`page_size` and `next` (the next page's URL, or null)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from weir.broker.http.rest_admin_base import AdminCall, Param, bad_request, collection, int_text

PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_MAX = 500
PAGING_PARAMS = ("q", "sort", "order", "page", "page_size")


@dataclass(frozen=True)
class Paging:
    q: str
    sort: str
    descending: bool
    page: int
    page_size: int


def list_paging(call: AdminCall, sort_fields: Sequence[str]) -> Paging | None:
    """The request's paging, None when it asks for none (the whole list)."""
    if not any(call.query(name) is not None for name in PAGING_PARAMS):
        return None
    sort = call.query("sort") or sort_fields[0]
    if sort not in sort_fields:
        raise bad_request(f"sort must be one of {', '.join(sort_fields)}")
    order = call.query("order") or "asc"
    if order not in ("asc", "desc"):
        raise bad_request("order must be asc or desc")
    page_size_text = call.query("page_size")
    return Paging(
        q=(call.query("q") or "").lower(),
        sort=sort,
        descending=order == "desc",
        page=int_text(call.query("page") or "1", "page", low=1),
        page_size=PAGE_SIZE_DEFAULT
        if page_size_text is None
        else int_text(page_size_text, "page_size", low=1, high=PAGE_SIZE_MAX),
    )


def paged_collection(
    call: AdminCall,
    kind: str,
    self_url: str,
    rows: Sequence[dict[str, Any]],
    paging: Paging,
    *,
    name: Callable[[Mapping[str, Any]], str],
    sort_key: Callable[[dict[str, Any]], Any],
) -> dict[str, Any]:
    """One page of `rows`: those whose name holds `q`, sorted (ties by name)."""
    matching = [row for row in rows if paging.q in name(row).lower()]
    matching.sort(key=name)
    matching.sort(key=sort_key, reverse=paging.descending)
    first = (paging.page - 1) * paging.page_size
    page = matching[first : first + paging.page_size]
    document = collection(kind, self_url, page)
    has_next = first + paging.page_size < len(matching)
    document["metadata"].update(
        total=len(matching),
        page=paging.page,
        page_size=paging.page_size,
        next=_page_url(call, paging.page + 1) if has_next else None,
    )
    return document


def _page_url(call: AdminCall, page: int) -> str:
    query = [(k, v) for k, v in call.request.query_params.multi_items() if k != "page"]
    base = str(call.request.url.replace(query=""))
    return base + "?" + urlencode([*query, ("page", str(page))])


PAGING_QUERY = (
    Param("q", "Only the rows whose name holds this (case-insensitive)"),
    Param("sort", "The field the rows are sorted by"),
    Param("order", "asc or desc", schema={"type": "string", "enum": ["asc", "desc"]}),
    Param("page", "The page (from 1)", schema={"type": "integer", "minimum": 1}),
    Param(
        "page_size",
        f"Rows per page (default {PAGE_SIZE_DEFAULT})",
        schema={"type": "integer", "minimum": 1, "maximum": PAGE_SIZE_MAX},
    ),
)
