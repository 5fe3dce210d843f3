"""ApiVersions: what this broker implements (KIP-511 for unknown versions)."""

from __future__ import annotations

from weir.broker.handlers.context import RequestContext
from weir.format.errors import ErrorCode
from weir.wire.messages.api_versions import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseApiKey,
)
from weir.wire.protocol import SUPPORTED_VERSIONS


def supported_api_versions() -> list[ApiVersionsResponseApiKey]:
    """Every implemented API with its version range. `weir.broker.handlers.apis` checks at
    import that its registry serves exactly these keys."""
    return [
        ApiVersionsResponseApiKey(
            api_key=int(key), min_version=versions[0], max_version=versions[1]
        )
        for key, versions in sorted(SUPPORTED_VERSIONS.items())
    ]


def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=supported_api_versions(),
        throttle_time_ms=0,
        finalized_features_epoch=-1,
        zk_migration_ready=False,
    )
