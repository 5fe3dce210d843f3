"""Kafka principals (`User:alice`), as ACLs and `super.users` name them."""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"
WILDCARD_NAME = "*"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Who a connection authenticated as: a type (always `User` for the principals
    Weir's authenticators build) and a name."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
WILDCARD_USER = KafkaPrincipal(USER_TYPE, WILDCARD_NAME)


class PrincipalFormatError(ValueError):
    """A principal string is not `Type:name`."""


def parse_principal(text: str) -> KafkaPrincipal:
    """`User:alice` (the name may itself hold colons: only the first splits)."""
    principal_type, separator, name = text.partition(":")
    if not separator or not principal_type or not name:
        raise PrincipalFormatError(f"principal {text!r} is not of the form Type:name")
    return KafkaPrincipal(principal_type, name)


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)
