"""The SASL, ACL, SCRAM-credential and client-quota APIs byte for byte, laid out by hand
from Kafka 4.4's message specs, their versions (Kafka 4.0 dropped the ACL APIs' v0,
KIP-896), their place in the registry (declared, not advertised until served), and
hostile counts that fail before allocating. kafka-python's independent codec checks
every version of each in test_kafka_python_interop.py."""

from __future__ import annotations

import random
import struct
import time

import pytest

from weir.format.primitives import DecodeError, FrameIO
from weir.format.schema import Api, Message
from weir.wire.apis.security import (
    ALTER_CLIENT_QUOTAS,
    ALTER_USER_SCRAM_CREDENTIALS,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_ACLS,
    DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)
from weir.wire.protocol import (
    DECLARED_APIS,
    SUPPORTED_VERSIONS,
    ApiKey,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)

from .sample_bodies import plain, sample_struct

NO_TAGS = b"\x00"

SECURITY_KEYS = {
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}
SECURITY_APIS = [
    SASL_HANDSHAKE,
    SASL_AUTHENTICATE,
    DESCRIBE_ACLS,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_CLIENT_QUOTAS,
    ALTER_CLIENT_QUOTAS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ALTER_USER_SCRAM_CREDENTIALS,
]


def s(text: str) -> bytes:
    """A compact string."""
    data = text.encode()
    return bytes([len(data) + 1]) + data


def legacy_s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def i8(value: int) -> bytes:
    return struct.pack(">b", value)


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def array(*items: bytes) -> bytes:
    return bytes([len(items) + 1]) + b"".join(items)


def check(message: Message, version: int, body: dict[str, object], expected: bytes) -> None:
    assert message.build(body, version) == expected
    assert plain(message.parse(FrameIO(expected), version)) == plain(message.value_of(body))


def test_security_apis_are_declared_with_the_versions_kafka_4_4_serves() -> None:
    assert {key: DECLARED_APIS[key].versions for key in SECURITY_KEYS} == SECURITY_KEYS


def test_every_security_api_is_served_and_advertised() -> None:
    assert {key: SUPPORTED_VERSIONS.get(key) for key in SECURITY_KEYS} == SECURITY_KEYS


@pytest.mark.parametrize("api", SECURITY_APIS, ids=lambda api: api.request.name)
def test_every_version_round_trips_through_the_frame_functions(api: Api) -> None:
    low, high = api.versions
    for version in range(low, high + 1):
        rng = random.Random(f"{api.key}-{version}")
        request = sample_struct(api.request.construct_for(version), rng)
        frame = encode_request(api.key, version, 7, "client", request)
        view = memoryview(frame)[4:]
        assert plain(decode_request(parse_request_header(view), view)) == plain(
            api.request.value_of(request)
        )
        response = sample_struct(api.response.construct_for(version), rng)
        frame = encode_response(api.key, version, 7, response)
        correlation_id, decoded = decode_response(api.key, version, memoryview(frame)[4:])
        assert correlation_id == 7
        assert plain(decoded) == plain(api.response.value_of(response))


def test_sasl_handshake_v1_is_not_flexible() -> None:
    check(SASL_HANDSHAKE.request, 1, {"mechanism": "SCRAM-SHA-256"}, legacy_s("SCRAM-SHA-256"))
    body = {"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}
    expected = i16(33) + i32(2) + legacy_s("PLAIN") + legacy_s("SCRAM-SHA-512")
    check(SASL_HANDSHAKE.response, 1, body, expected)


def test_sasl_authenticate_v2_is_flexible_with_the_session_lifetime() -> None:
    check(SASL_AUTHENTICATE.request, 2, {"auth_bytes": b"\x00u\x00p"}, b"\x05\x00u\x00p" + NO_TAGS)
    body = {
        "error_code": 0,
        "error_message": None,
        "auth_bytes": b"ok",
        "session_lifetime_ms": 3_600_000,
    }
    expected = i16(0) + b"\x00" + b"\x03ok" + struct.pack(">q", 3_600_000) + NO_TAGS
    check(SASL_AUTHENTICATE.response, 2, body, expected)


def test_sasl_authenticate_v0_has_no_session_lifetime() -> None:
    body = {"error_code": 58, "error_message": "Authentication failed", "auth_bytes": b""}
    expected = i16(58) + legacy_s("Authentication failed") + i32(0)
    check(SASL_AUTHENTICATE.response, 0, body, expected)


def test_create_acls_v3_request_carries_the_pattern_type() -> None:
    creation = {
        "resource_type": 2,  # TOPIC
        "resource_name": "orders",
        "resource_pattern_type": 4,  # PREFIXED
        "principal": "User:alice",
        "host": "*",
        "operation": 3,  # READ
        "permission_type": 3,  # ALLOW
    }
    expected = (
        array(i8(2) + s("orders") + i8(4) + s("User:alice") + s("*") + i8(3) + i8(3) + NO_TAGS)
        + NO_TAGS
    )
    check(CREATE_ACLS.request, 3, {"creations": [creation]}, expected)


def test_describe_acls_v1_filter_has_nullable_strings_and_is_not_flexible() -> None:
    body = {
        "resource_type_filter": 1,  # ANY
        "resource_name_filter": None,
        "pattern_type_filter": 1,  # ANY
        "principal_filter": "User:bob",
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    expected = i8(1) + i16(-1) + i8(1) + legacy_s("User:bob") + i16(-1) + i8(1) + i8(1)
    check(DESCRIBE_ACLS.request, 1, body, expected)


def test_delete_acls_v2_response_lists_the_matching_acls() -> None:
    matching = {
        "error_code": 0,
        "error_message": None,
        "resource_type": 4,  # CLUSTER
        "resource_name": "kafka-cluster",
        "pattern_type": 3,
        "principal": "User:admin",
        "host": "*",
        "operation": 7,
        "permission_type": 3,
    }
    body = {
        "throttle_time_ms": 0,
        "filter_results": [{"error_code": 0, "error_message": None, "matching_acls": [matching]}],
    }
    acl = (
        i16(0)
        + b"\x00"
        + i8(4)
        + s("kafka-cluster")
        + i8(3)
        + s("User:admin")
        + s("*")
        + i8(7)
        + i8(3)
        + NO_TAGS
    )
    expected = i32(0) + array(i16(0) + b"\x00" + array(acl) + NO_TAGS) + NO_TAGS
    check(DELETE_ACLS.response, 2, body, expected)


def test_describe_client_quotas_response_entries_may_be_null() -> None:
    body = {"throttle_time_ms": 0, "error_code": 42, "error_message": "bad", "entries": None}
    check(DESCRIBE_CLIENT_QUOTAS.response, 1, body, i32(0) + i16(42) + s("bad") + b"\x00" + NO_TAGS)
    v0 = i32(0) + i16(42) + legacy_s("bad") + i32(-1)
    check(DESCRIBE_CLIENT_QUOTAS.response, 0, body, v0)


def test_alter_client_quotas_v1_request_with_a_default_entity() -> None:
    body = {
        "entries": [
            {
                "entity": [{"entity_type": "user", "entity_name": None}],
                "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
            }
        ],
        "validate_only": True,
    }
    entity = s("user") + b"\x00" + NO_TAGS
    op = s("producer_byte_rate") + struct.pack(">d", 1024.0) + b"\x00" + NO_TAGS
    expected = array(array(entity) + array(op) + NO_TAGS) + b"\x01" + NO_TAGS
    check(ALTER_CLIENT_QUOTAS.request, 1, body, expected)


def test_describe_user_scram_credentials_request_null_users_means_all() -> None:
    check(DESCRIBE_USER_SCRAM_CREDENTIALS.request, 0, {"users": None}, b"\x00" + NO_TAGS)
    body = {"users": [{"name": "alice"}]}
    check(DESCRIBE_USER_SCRAM_CREDENTIALS.request, 0, body, array(s("alice") + NO_TAGS) + NO_TAGS)


def test_alter_user_scram_credentials_request_carries_salt_and_salted_password() -> None:
    body = {
        "deletions": [{"name": "bob", "mechanism": 2}],
        "upsertions": [
            {
                "name": "alice",
                "mechanism": 1,
                "iterations": 8192,
                "salt": b"salt",
                "salted_password": b"\x01" * 32,
            }
        ],
    }
    deletion = s("bob") + i8(2) + NO_TAGS
    upsertion = s("alice") + i8(1) + i32(8192) + b"\x05salt" + bytes([33]) + b"\x01" * 32 + NO_TAGS
    expected = array(deletion) + array(upsertion) + NO_TAGS
    check(ALTER_USER_SCRAM_CREDENTIALS.request, 0, body, expected)


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        # CreateAcls v1: creations is an int32-counted array
        (ApiKey.CREATE_ACLS, 1, struct.pack(">i", 2**31 - 1) + b"\x00" * 8),
        # DeleteAcls v3: a compact array whose varint count is 2**32 - 2
        (ApiKey.DELETE_ACLS, 3, b"\xff\xff\xff\xff\x0f" + b"\x00" * 8),
        # AlterUserScramCredentials v0: deletions, compact
        (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, b"\xff\xff\xff\xff\x0f" + b"\x00" * 8),
        # AlterClientQuotas v0: entries, int32
        (ApiKey.ALTER_CLIENT_QUOTAS, 0, struct.pack(">i", 2**31 - 1) + b"\x00" * 8),
    ],
)
def test_huge_array_counts_fail_before_allocating(api_key: int, version: int, body: bytes) -> None:
    started = time.perf_counter()
    with pytest.raises(DecodeError):
        decode_request(RequestHeader(api_key, version, 1, None, 0), memoryview(body))
    assert time.perf_counter() - started < 0.05
