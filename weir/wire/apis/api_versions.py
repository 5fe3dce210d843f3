"""ApiVersions (key 18), v0-v3. The response header is always v0 (KIP-511)."""

from __future__ import annotations

from weir.format.schema import BOOL, INT16, INT32, INT64, STRING, Api, Array, Field, Message, Struct
from weir.wire.api_keys import ApiKey

API_VERSIONS_REQUEST = Message(
    "ApiVersionsRequest",
    valid="0-3",
    flexible="3+",
    fields=[
        Field("client_software_name", STRING, "3+"),
        Field("client_software_version", STRING, "3+"),
    ],
)

API_VERSIONS_RESPONSE = Message(
    "ApiVersionsResponse",
    valid="0-3",
    flexible="3+",
    fields=[
        Field("error_code", INT16),
        Field(
            "api_keys",
            Array(
                Struct(
                    Field("api_key", INT16),
                    Field("min_version", INT16),
                    Field("max_version", INT16),
                )
            ),
        ),
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "supported_features",
            Array(
                Struct(
                    Field("name", STRING, "3+"),
                    Field("min_version", INT16, "3+"),
                    Field("max_version", INT16, "3+"),
                )
            ),
            "3+",
            tag=0,
        ),
        Field("finalized_features_epoch", INT64, "3+", tag=1, default=-1),
        Field(
            "finalized_features",
            Array(
                Struct(
                    Field("name", STRING, "3+"),
                    Field("max_version_level", INT16, "3+"),
                    Field("min_version_level", INT16, "3+"),
                )
            ),
            "3+",
            tag=2,
        ),
        Field("zk_migration_ready", BOOL, "3+", tag=3, default=False),
    ],
)

API_VERSIONS = Api(ApiKey.API_VERSIONS, API_VERSIONS_REQUEST, API_VERSIONS_RESPONSE, (0, 3))
