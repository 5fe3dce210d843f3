"""What an endpoint may ask of the HTTP listener (weir.broker.http.listener) about
its own exchange: the listener closes a connection `http_request_timeout_ms` after
it opened or last answered, and refuses bodies over `http_request_bytes_max`
unread. An endpoint that streams (a produce stream's records in, server-sent
events out) keeps its connection open while it makes progress, by moving that
deadline (`keep_open`); an endpoint that reads its body itself, within a bound of
its own, is named by `body_bounded_by_endpoint` (the listener then lets its body,
chunked or large, through)."""

from __future__ import annotations

import re
from collections.abc import Callable, MutableMapping
from typing import Any

KEEP_OPEN_SCOPE_KEY = "weir.keep_open"

# POST /v3/clusters/{cluster_id}/topics/{topic_name}/records: each record's JSON is
# bounded as it arrives (weir.broker.http.rest_records_format.RECORD_JSON_BYTES_MAX).
_RECORDS_PRODUCE_PATH = re.compile(r"/v3/clusters/[^/]+/topics/[^/]+/records")


def body_bounded_by_endpoint(method: str, path: str) -> bool:
    return method == "POST" and _RECORDS_PRODUCE_PATH.fullmatch(path) is not None


def keep_open(scope: MutableMapping[str, Any], seconds: float) -> None:
    """Let the connection live `seconds` more from now (no-op outside the listener)."""
    extend: Callable[[float], None] | None = scope.get(KEEP_OPEN_SCOPE_KEY)
    if extend is not None:
        extend(seconds)
