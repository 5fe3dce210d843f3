"""ApiVersions: what this broker implements (KIP-511 for unknown versions)."""

from __future__ import annotations

from weir.broker.handlers.context import RequestContext
from weir.format.errors import ErrorCode
from weir.wire.messages.api_versions import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseApiKey,
    ApiVersionsResponseFinalizedFeature,
    ApiVersionsResponseSupportedFeature,
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


# The features this broker supports, as Kafka advertises them (v3+): clients read
# the finalized `transaction.version` to pick EndTxn v5 / Produce v12 (KIP-890).
TRANSACTION_VERSION_FEATURE = "transaction.version"
TRANSACTION_VERSION_MAX = 2
# Kafka's finalized features epoch is its metadata offset; Weir's features change
# only with a broker setting, so one epoch (> -1, "features are known") serves.
FINALIZED_FEATURES_EPOCH = 1


def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    level = ctx.broker.config.transaction_version
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=supported_api_versions(),
        throttle_time_ms=0,
        supported_features=[
            ApiVersionsResponseSupportedFeature(
                name=TRANSACTION_VERSION_FEATURE, min_version=0, max_version=TRANSACTION_VERSION_MAX
            )
        ],
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=[
            ApiVersionsResponseFinalizedFeature(
                name=TRANSACTION_VERSION_FEATURE, max_version_level=level, min_version_level=level
            )
        ],
        zk_migration_ready=False,
    )
