"""Administration over HTTP (`rest_admin_routes`): the endpoints of
`weir.broker.http.rest_admin_catalog`, each run as the HTTP caller through the Kafka
API (so the ACLs are the Kafka API's, and every view works from any broker of a
cluster), and the OpenAPI document at `GET /v3/openapi.json`. docs/http-admin.md
is the user's guide."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from weir.broker.broker import Broker
from weir.broker.http.openapi import OPENAPI_PATH, serve_openapi
from weir.broker.http.rest_admin_base import endpoint_route
from weir.broker.http.rest_admin_catalog import ADMIN_ENDPOINTS


def rest_admin_routes(broker: Broker) -> list[BaseRoute]:
    routes: list[BaseRoute] = [Route(OPENAPI_PATH, serve_openapi, methods=["GET"])]
    routes += [endpoint_route(broker, endpoint) for endpoint in ADMIN_ENDPOINTS]
    return routes
