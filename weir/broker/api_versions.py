"""ApiVersions: what this broker implements (KIP-511 for unknown versions)."""

from __future__ import annotations

from typing import Any

from weir.broker.context import RequestContext
from weir.format.errors import ErrorCode


async def handle_api_versions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    from weir.broker.apis import supported_api_versions  # the registry imports this module

    return {
        "error_code": ErrorCode.NONE,
        "api_keys": supported_api_versions(),
        "throttle_time_ms": 0,
        "supported_features": [],
        "finalized_features_epoch": -1,
        "finalized_features": [],
        "zk_migration_ready": False,
    }
