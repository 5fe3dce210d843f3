"""The records API's OpenAPI fragment (`RECORDS_OPENAPI_PATHS`) names exactly the
routes `records_routes` serves, with the same path parameters."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.routing import Match, Route

from weir.broker.broker import Broker
from weir.broker.config import BrokerConfig
from weir.broker.http.rest_records import RECORDS_OPENAPI_PATHS, records_routes


def test_every_documented_path_and_method_is_served_and_nothing_else(tmp_path: Path) -> None:
    routes = [
        r for r in records_routes(Broker(BrokerConfig(data_dir=tmp_path))) if isinstance(r, Route)
    ]
    served = {
        (r.path, method.lower()) for r in routes for method in r.methods or () if method != "HEAD"
    }
    documented = {(path, method) for path, item in RECORDS_OPENAPI_PATHS.items() for method in item}
    assert documented == served
    for path, item in RECORDS_OPENAPI_PATHS.items():
        for method, operation in item.items():
            in_path = {p["name"] for p in operation["parameters"] if p["in"] == "path"}
            assert in_path == set(re.findall(r"{(\w+)}", path)), (path, method)
            concrete = re.sub(r"{partition_id}", "0", re.sub(r"{(\w+)}", "x", path))
            scope = {"type": "http", "path": concrete, "method": method.upper()}
            assert any(r.matches(scope)[0] is Match.FULL for r in routes), concrete
