"""The OpenAPI 3.1 document of the broker's HTTP API, served at
`GET /v3/openapi.json`: the `paths` of each part of the API, merged from the
fragments in `OPENAPI_PATH_FRAGMENTS` (one dict of OpenAPI path items per part; a
path two parts both declare is an error at import, not a silent overwrite)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from weir.broker.http.rest_admin_catalog import ADMIN_OPENAPI_PATHS

OPENAPI_PATH = "/v3/openapi.json"
OPENAPI_VERSION = "3.1.0"

SELF_PATHS: dict[str, Any] = {
    OPENAPI_PATH: {
        "get": {
            "summary": "This document",
            "operationId": "openapi_document",
            "tags": ["meta"],
            "parameters": [],
            "responses": {"200": {"description": "The OpenAPI 3.1 document"}},
        }
    }
}

# The parts' path fragments: the lead adds the records and push parts' at merge.
OPENAPI_PATH_FRAGMENTS: list[Mapping[str, Any]] = [SELF_PATHS, ADMIN_OPENAPI_PATHS]


def merged_paths(fragments: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for fragment in fragments:
        for path, item in fragment.items():
            merged = paths.setdefault(path, {})
            for method, operation in item.items():
                if method in merged:
                    raise ValueError(f"OpenAPI: {method.upper()} {path} is declared twice")
                merged[method] = operation
    return dict(sorted(paths.items()))


def openapi_document(
    fragments: Sequence[Mapping[str, Any]] = OPENAPI_PATH_FRAGMENTS,
) -> dict[str, Any]:
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Weir HTTP API",
            "version": "3",
            "description": (
                "Administration in Confluent REST Proxy v3's resource shapes, and Weir's "
                'own resources under /v3. Errors are {"error_code", "message"}.'
            ),
        },
        "components": {
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic"},
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            }
        },
        "security": [{}, {"basic": []}, {"bearer": []}],
        "paths": merged_paths(fragments),
    }


_DOCUMENT = openapi_document()


async def serve_openapi(request: Request) -> Response:
    return JSONResponse(_DOCUMENT)
