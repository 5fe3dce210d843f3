"""The OpenAPI document (weir/broker/http/openapi.py) documents every route the app
serves under /v3, with its methods, and merging the parts' fragments never lets one
silently replace another's operation. What the documented operations accept on a
real broker is compat_tests/test_rest_admin_openapi.py's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.routing import Route

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.http.app import build_app
from weir.broker.http.openapi import merged_paths, openapi_document

# A Starlette path parameter with a converter ({group_id:path}) is {group_id} in OpenAPI.
CONVERTER = re.compile(r"{([a-z_]+):[a-z]+}")


def test_every_route_under_v3_is_documented_with_its_methods(tmp_path: Path) -> None:
    app = build_app(Broker(BrokerConfig(data_dir=tmp_path)))
    documented = openapi_document()["paths"]
    served = 0
    for route in app.routes:
        if not isinstance(route, Route) or not route.path.startswith("/v3/"):
            continue
        path = CONVERTER.sub(r"{\1}", route.path)
        assert path in documented, f"{path} is served but not documented"
        for method in route.methods or ():
            if method != "HEAD":
                assert method.lower() in documented[path], f"{method} {path} is not documented"
                served += 1
    assert served >= 30


def test_merging_fragments_keeps_each_operation_and_refuses_a_second_one() -> None:
    first = {"/v3/a": {"get": {"operationId": "a"}}}
    second = {"/v3/a": {"post": {"operationId": "b"}}, "/v3/b": {"get": {"operationId": "c"}}}
    merged = merged_paths([first, second])
    assert set(merged["/v3/a"]) == {"get", "post"} and "/v3/b" in merged
    with pytest.raises(ValueError, match="GET /v3/a"):
        merged_paths([first, {"/v3/a": {"get": {"operationId": "d"}}}])
