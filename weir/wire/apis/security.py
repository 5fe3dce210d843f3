"""Authentication and security administration, transcribed from Kafka 4.4's message specs.

SaslHandshake (17) v0-1 (not flexible: KAFKA-9577 keeps its version from moving) and
SaslAuthenticate (36) v0-2 (v1 adds the session lifetime of KIP-368); the ACL calls
DescribeAcls (29), CreateAcls (30) and DeleteAcls (31) at v1-3 (Kafka 4.0 removed v0,
KIP-896; v1 adds the resource pattern type); DescribeClientQuotas (48) and
AlterClientQuotas (49) v0-1; and KIP-554's DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51) v0.

The SASL pair is served by the connection (before authentication); the admin calls
by `weir.broker.handlers.security_admin`.
"""

from __future__ import annotations

from weir.format.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    Api,
    Array,
    Field,
    Message,
    Struct,
)
from weir.wire.api_keys import ApiKey

# Kafka's PatternType.LITERAL: the default of the pattern fields at v0 (not served).
PATTERN_TYPE_LITERAL = 3

# DescribeClientQuotas' match types (ClientQuotaFilterComponent).
QUOTA_MATCH_EXACT = 0
QUOTA_MATCH_DEFAULT = 1
QUOTA_MATCH_ANY = 2

# SaslHandshake (17) --------------------------------------------------------------------

SASL_HANDSHAKE_REQUEST = Message(
    "SaslHandshakeRequest",
    valid="0-1",
    flexible="none",
    fields=[Field("mechanism", STRING)],
)

SASL_HANDSHAKE_RESPONSE = Message(
    "SaslHandshakeResponse",
    valid="0-1",
    flexible="none",
    fields=[
        Field("error_code", INT16),
        Field("mechanisms", Array(STRING)),
    ],
)

# SaslAuthenticate (36) -----------------------------------------------------------------

SASL_AUTHENTICATE_REQUEST = Message(
    "SaslAuthenticateRequest",
    valid="0-2",
    flexible="2+",
    fields=[Field("auth_bytes", BYTES)],
)

SASL_AUTHENTICATE_RESPONSE = Message(
    "SaslAuthenticateResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("auth_bytes", BYTES),
        Field("session_lifetime_ms", INT64, "1+", default=0),
    ],
)

# DescribeAcls (29) ---------------------------------------------------------------------

DESCRIBE_ACLS_REQUEST = Message(
    "DescribeAclsRequest",
    valid="0-3",
    flexible="2+",
    fields=[
        Field("resource_type_filter", INT8),
        Field("resource_name_filter", STRING, nullable="0+", default=None),
        Field("pattern_type_filter", INT8, "1+", default=PATTERN_TYPE_LITERAL),
        Field("principal_filter", STRING, nullable="0+", default=None),
        Field("host_filter", STRING, nullable="0+", default=None),
        Field("operation", INT8),
        Field("permission_type", INT8),
    ],
)

DESCRIBE_ACLS_RESPONSE = Message(
    "DescribeAclsResponse",
    valid="0-3",
    flexible="2+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field(
            "resources",
            Array(
                Struct(
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                    Field("pattern_type", INT8, "1+", default=PATTERN_TYPE_LITERAL),
                    Field(
                        "acls",
                        Array(
                            Struct(
                                Field("principal", STRING),
                                Field("host", STRING),
                                Field("operation", INT8),
                                Field("permission_type", INT8),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

# CreateAcls (30) -----------------------------------------------------------------------

CREATE_ACLS_REQUEST = Message(
    "CreateAclsRequest",
    valid="0-3",
    flexible="2+",
    fields=[
        Field(
            "creations",
            Array(
                Struct(
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                    Field("resource_pattern_type", INT8, "1+", default=PATTERN_TYPE_LITERAL),
                    Field("principal", STRING),
                    Field("host", STRING),
                    Field("operation", INT8),
                    Field("permission_type", INT8),
                )
            ),
        ),
    ],
)

CREATE_ACLS_RESPONSE = Message(
    "CreateAclsResponse",
    valid="0-3",
    flexible="2+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field(
            "results",
            Array(
                Struct(
                    Field("error_code", INT16),
                    Field("error_message", STRING, nullable="0+", default=None),
                )
            ),
        ),
    ],
)

# DeleteAcls (31) -----------------------------------------------------------------------

DELETE_ACLS_REQUEST = Message(
    "DeleteAclsRequest",
    valid="0-3",
    flexible="2+",
    fields=[
        Field(
            "filters",
            Array(
                Struct(
                    Field("resource_type_filter", INT8),
                    Field("resource_name_filter", STRING, nullable="0+", default=None),
                    Field("pattern_type_filter", INT8, "1+", default=PATTERN_TYPE_LITERAL),
                    Field("principal_filter", STRING, nullable="0+", default=None),
                    Field("host_filter", STRING, nullable="0+", default=None),
                    Field("operation", INT8),
                    Field("permission_type", INT8),
                )
            ),
        ),
    ],
)

DELETE_ACLS_RESPONSE = Message(
    "DeleteAclsResponse",
    valid="0-3",
    flexible="2+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field(
            "filter_results",
            Array(
                Struct(
                    Field("error_code", INT16),
                    Field("error_message", STRING, nullable="0+", default=None),
                    Field(
                        "matching_acls",
                        Array(
                            Struct(
                                Field("error_code", INT16),
                                Field("error_message", STRING, nullable="0+", default=None),
                                Field("resource_type", INT8),
                                Field("resource_name", STRING),
                                Field("pattern_type", INT8, "1+", default=PATTERN_TYPE_LITERAL),
                                Field("principal", STRING),
                                Field("host", STRING),
                                Field("operation", INT8),
                                Field("permission_type", INT8),
                            )
                        ),
                    ),
                )
            ),
        ),
    ],
)

# DescribeClientQuotas (48) -------------------------------------------------------------

_QUOTA_ENTITY = Struct(
    Field("entity_type", STRING),
    Field("entity_name", STRING, nullable="0+", default=None),  # None: the default entity
)

DESCRIBE_CLIENT_QUOTAS_REQUEST = Message(
    "DescribeClientQuotasRequest",
    valid="0-1",
    flexible="1+",
    fields=[
        Field(
            "components",
            Array(
                Struct(
                    Field("entity_type", STRING),
                    Field("match_type", INT8),
                    Field("match", STRING, nullable="0+", default=None),
                )
            ),
        ),
        Field("strict", BOOL),
    ],
)

DESCRIBE_CLIENT_QUOTAS_RESPONSE = Message(
    "DescribeClientQuotasResponse",
    valid="0-1",
    flexible="1+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field(
            "entries",
            Array(
                Struct(
                    Field("entity", Array(_QUOTA_ENTITY)),
                    Field("values", Array(Struct(Field("key", STRING), Field("value", FLOAT64)))),
                )
            ),
            nullable="0+",
            default=None,
        ),
    ],
)

# AlterClientQuotas (49) ----------------------------------------------------------------

ALTER_CLIENT_QUOTAS_REQUEST = Message(
    "AlterClientQuotasRequest",
    valid="0-1",
    flexible="1+",
    fields=[
        Field(
            "entries",
            Array(
                Struct(
                    Field("entity", Array(_QUOTA_ENTITY)),
                    Field(
                        "ops",
                        Array(
                            Struct(
                                Field("key", STRING),
                                Field("value", FLOAT64),
                                Field("remove", BOOL),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field("validate_only", BOOL),
    ],
)

ALTER_CLIENT_QUOTAS_RESPONSE = Message(
    "AlterClientQuotasResponse",
    valid="0-1",
    flexible="1+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field(
            "entries",
            Array(
                Struct(
                    Field("error_code", INT16),
                    Field("error_message", STRING, nullable="0+", default=None),
                    Field("entity", Array(_QUOTA_ENTITY)),
                )
            ),
        ),
    ],
)

# DescribeUserScramCredentials (50) -----------------------------------------------------

DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = Message(
    "DescribeUserScramCredentialsRequest",
    valid="0",
    flexible="0+",
    fields=[
        # None (or empty): every user with a credential
        Field("users", Array(Struct(Field("name", STRING))), nullable="0+", default=None),
    ],
)

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = Message(
    "DescribeUserScramCredentialsResponse",
    valid="0",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field(
            "results",
            Array(
                Struct(
                    Field("user", STRING),
                    Field("error_code", INT16),
                    Field("error_message", STRING, nullable="0+", default=None),
                    Field(
                        "credential_infos",
                        Array(Struct(Field("mechanism", INT8), Field("iterations", INT32))),
                    ),
                )
            ),
        ),
    ],
)

# AlterUserScramCredentials (51) --------------------------------------------------------

ALTER_USER_SCRAM_CREDENTIALS_REQUEST = Message(
    "AlterUserScramCredentialsRequest",
    valid="0",
    flexible="0+",
    fields=[
        Field("deletions", Array(Struct(Field("name", STRING), Field("mechanism", INT8)))),
        Field(
            "upsertions",
            Array(
                Struct(
                    Field("name", STRING),
                    Field("mechanism", INT8),
                    Field("iterations", INT32),
                    Field("salt", BYTES),
                    Field("salted_password", BYTES),
                )
            ),
        ),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = Message(
    "AlterUserScramCredentialsResponse",
    valid="0",
    flexible="0+",
    fields=[
        Field("throttle_time_ms", INT32),
        Field(
            "results",
            Array(
                Struct(
                    Field("user", STRING),
                    Field("error_code", INT16),
                    Field("error_message", STRING, nullable="0+", default=None),
                )
            ),
        ),
    ],
)

# The APIs, with the versions implemented ------------------------------------------------

SASL_HANDSHAKE = Api(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_REQUEST, SASL_HANDSHAKE_RESPONSE, (0, 1))
SASL_AUTHENTICATE = Api(
    ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_REQUEST, SASL_AUTHENTICATE_RESPONSE, (0, 2)
)
DESCRIBE_ACLS = Api(ApiKey.DESCRIBE_ACLS, DESCRIBE_ACLS_REQUEST, DESCRIBE_ACLS_RESPONSE, (1, 3))
CREATE_ACLS = Api(ApiKey.CREATE_ACLS, CREATE_ACLS_REQUEST, CREATE_ACLS_RESPONSE, (1, 3))
DELETE_ACLS = Api(ApiKey.DELETE_ACLS, DELETE_ACLS_REQUEST, DELETE_ACLS_RESPONSE, (1, 3))
DESCRIBE_CLIENT_QUOTAS = Api(
    ApiKey.DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_CLIENT_QUOTAS_REQUEST,
    DESCRIBE_CLIENT_QUOTAS_RESPONSE,
    (0, 1),
)
ALTER_CLIENT_QUOTAS = Api(
    ApiKey.ALTER_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS_REQUEST, ALTER_CLIENT_QUOTAS_RESPONSE, (0, 1)
)
DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST,
    DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE,
    (0, 0),
)
ALTER_USER_SCRAM_CREDENTIALS = Api(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ALTER_USER_SCRAM_CREDENTIALS_REQUEST,
    ALTER_USER_SCRAM_CREDENTIALS_RESPONSE,
    (0, 0),
)
