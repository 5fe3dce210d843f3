"""Who sent a request, and what the authorizer lets them do: the one object every
authorization decision goes through (the per-API rules in `weir.broker.authorization`,
and the few handlers whose decision depends on their own state, such as Metadata's
auto-creation). Every denial is one audit line."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from weir.security.acl import (
    CLUSTER,
    AclOperation,
    Authorizer,
    Resource,
    ResourceType,
)
from weir.security.principal import KafkaPrincipal

audit_log = logging.getLogger("weir.audit")

# KIP-430: the authorized-operations field of a client that did not ask.
OPERATIONS_NOT_REQUESTED = -(2**31)


@dataclass(frozen=True, slots=True)
class Session:
    """An authenticated connection: its principal, the client's bare IP address, and
    the listener it came in on."""

    principal: KafkaPrincipal
    client_address: str
    listener_name: str


class RequestAuthorization:
    """One request's questions to the authorizer, answered for its session."""

    __slots__ = ("_authorizer", "session", "api_name")

    def __init__(self, authorizer: Authorizer, session: Session, api_name: str) -> None:
        self._authorizer = authorizer
        self.session = session
        self.api_name = api_name

    def allows(
        self, operation: AclOperation, resource: Resource, *, audit_denial: bool = True
    ) -> bool:
        session = self.session
        allowed = self._authorizer.authorize(
            session.principal, session.client_address, operation, resource
        )
        if not allowed and audit_denial:
            audit_log.info(
                "DENIED principal=%s host=%s operation=%s resource=%s:%s api=%s listener=%s",
                session.principal, session.client_address, operation.name,
                resource.resource_type.name, resource.name, self.api_name, session.listener_name,
            )  # fmt: skip
        return allowed

    def allows_topic(self, operation: AclOperation, name: str) -> bool:
        return self.allows(operation, Resource(ResourceType.TOPIC, name))

    def allows_group(self, operation: AclOperation, group_id: str) -> bool:
        return self.allows(operation, Resource(ResourceType.GROUP, group_id))

    def allows_transactional_id(self, operation: AclOperation, transactional_id: str) -> bool:
        return self.allows(operation, Resource(ResourceType.TRANSACTIONAL_ID, transactional_id))

    def allows_cluster(self, operation: AclOperation) -> bool:
        return self.allows(operation, CLUSTER)

    def allows_any_of_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: some resource of the type is allowed."""
        session = self.session
        return self._authorizer.authorize_by_resource_type(
            session.principal, session.client_address, operation, resource_type
        )

    def operations_field(self, resource: Resource) -> int:
        """KIP-430's bit field of the operations the session may do on `resource`."""
        session = self.session
        operations = self._authorizer.authorized_operations(
            session.principal, session.client_address, resource
        )
        field = 0
        for operation in operations:
            field |= 1 << operation
        return field


def audit_change(session: Session | None, api_name: str, what: str) -> None:
    """One audit line for an administrative change that was allowed."""
    if session is None:
        audit_log.info("CHANGE api=%s %s", api_name, what)
    else:
        audit_log.info(
            "CHANGE principal=%s host=%s api=%s %s",
            session.principal, session.client_address, api_name, what,
        )  # fmt: skip
