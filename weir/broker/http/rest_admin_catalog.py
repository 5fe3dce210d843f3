"""Every REST admin endpoint (`ADMIN_ENDPOINTS`), by resource family, and their
OpenAPI paths (`ADMIN_OPENAPI_PATHS`): the routes and the document are both made
from this list, so what is served is what is documented."""

from __future__ import annotations

from weir.broker.http import (
    rest_admin_acls,
    rest_admin_authorized_operations,
    rest_admin_broker_stats,
    rest_admin_clusters,
    rest_admin_configs,
    rest_admin_groups,
    rest_admin_producers,
    rest_admin_queues,
    rest_admin_quotas,
    rest_admin_redrive,
    rest_admin_topics,
    rest_admin_transactions,
    rest_admin_users,
)
from weir.broker.http.rest_admin_base import Endpoint, openapi_paths

ADMIN_ENDPOINTS: list[Endpoint] = [
    *rest_admin_clusters.ENDPOINTS,
    *rest_admin_broker_stats.ENDPOINTS,
    *rest_admin_topics.ENDPOINTS,
    *rest_admin_configs.ENDPOINTS,
    *rest_admin_groups.ENDPOINTS,
    *rest_admin_queues.ENDPOINTS,
    rest_admin_redrive.ENDPOINT,
    *rest_admin_acls.ENDPOINTS,
    *rest_admin_authorized_operations.ENDPOINTS,
    *rest_admin_users.ENDPOINTS,
    *rest_admin_quotas.ENDPOINTS,
    *rest_admin_transactions.ENDPOINTS,
    *rest_admin_producers.ENDPOINTS,
]
ADMIN_OPENAPI_PATHS = openapi_paths(ADMIN_ENDPOINTS)
