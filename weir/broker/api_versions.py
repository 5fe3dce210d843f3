"""ApiVersions: what this broker implements (KIP-511 for unknown versions)."""

from __future__ import annotations

from weir.broker.context import RequestContext
from weir.format.errors import ErrorCode
from weir.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse


def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    from weir.broker.apis import supported_api_versions  # the registry imports this module

    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=supported_api_versions(),
        throttle_time_ms=0,
        finalized_features_epoch=-1,
        zk_migration_ready=False,
    )
