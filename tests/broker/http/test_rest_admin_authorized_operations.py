"""KIP-430's bit field of authorized operations, read as operation names."""

from __future__ import annotations

from weir.broker.handlers.acl_operations import CLUSTER_OPERATIONS, OPERATIONS_NOT_REQUESTED
from weir.broker.http.rest_admin_authorized_operations import operation_names


def test_the_cluster_operations_field_names_its_operations() -> None:
    assert operation_names(CLUSTER_OPERATIONS) == [
        "CREATE",
        "ALTER",
        "DESCRIBE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
    ]


def test_an_empty_or_uncomputed_field_names_nothing() -> None:
    assert operation_names(0) == []
    assert operation_names(OPERATIONS_NOT_REQUESTED) == []


def test_the_filter_only_bits_are_not_operations() -> None:
    assert operation_names(0b111) == []
