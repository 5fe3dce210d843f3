"""The security administration APIs' rules (their handlers land separately): the
rule alone, refusing or passing the request."""

from __future__ import annotations

from typing import Any

import pytest

from weir.broker.authorization.rules import RULES
from weir.broker.broker import Broker
from weir.broker.handlers.context import RequestContext
from weir.broker.handlers.request_authorization import RequestAuthorization, Session
from weir.format.errors import ErrorCode
from weir.security.acl import AclOperation as Op
from weir.security.acl import ResourceType
from weir.security.principal import user
from weir.wire.messages import security as messages
from weir.wire.protocol import ApiKey, RequestHeader

from .authorized_calls import allow, secure

CLUSTER_AF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def apply(broker: Broker, who: str, api_key: ApiKey, request: Any) -> Any:
    assert broker.authorizer is not None
    authorization = RequestAuthorization(
        broker.authorizer, Session(user(who), "127.0.0.1", "PLAINTEXT"), api_key.name
    )
    context = RequestContext(RequestHeader(api_key, 0, 1, "test", 0), broker)
    return RULES[api_key](authorization, context, request)


REQUESTS = {
    ApiKey.CREATE_ACLS: (
        Op.ALTER,
        messages.CreateAclsRequest(creations=[messages.CreateAclsRequestCreation()] * 2),
        lambda r: [x.error_code for x in r.results] == [CLUSTER_AF, CLUSTER_AF],
    ),
    ApiKey.DESCRIBE_ACLS: (
        Op.DESCRIBE,
        messages.DescribeAclsRequest(),
        lambda r: r.error_code == CLUSTER_AF and r.resources == [],
    ),
    ApiKey.DELETE_ACLS: (
        Op.ALTER,
        messages.DeleteAclsRequest(filters=[messages.DeleteAclsRequestFilter()]),
        lambda r: [x.error_code for x in r.filter_results] == [CLUSTER_AF],
    ),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (
        Op.DESCRIBE,
        messages.DescribeUserScramCredentialsRequest(
            users=[messages.DescribeUserScramCredentialsRequestUser(name="u")]
        ),
        lambda r: r.error_code == CLUSTER_AF and [x.user for x in r.results] == ["u"],
    ),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (
        Op.ALTER,
        messages.AlterUserScramCredentialsRequest(
            deletions=[messages.AlterUserScramCredentialsRequestDeletion(name="u")]
        ),
        lambda r: [(x.user, x.error_code) for x in r.results] == [("u", CLUSTER_AF)],
    ),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (
        Op.DESCRIBE_CONFIGS,
        messages.DescribeClientQuotasRequest(),
        lambda r: r.error_code == CLUSTER_AF and r.entries is None,
    ),
    ApiKey.ALTER_CLIENT_QUOTAS: (
        Op.ALTER_CONFIGS,
        messages.AlterClientQuotasRequest(entries=[messages.AlterClientQuotasRequestEntrie()]),
        lambda r: [x.error_code for x in r.entries] == [CLUSTER_AF],
    ),
}


@pytest.mark.parametrize("api_key", list(REQUESTS), ids=lambda key: ApiKey(key).name)
async def test_security_admin_apis_need_their_cluster_operation(
    broker: Broker, api_key: ApiKey
) -> None:
    operation, request, is_refusal = REQUESTS[api_key]
    secure(broker, [allow("alice", operation, ResourceType.CLUSTER, "kafka-cluster")])
    refused = apply(broker, "bob", api_key, request)
    assert refused.request is None and is_refusal(refused.answer)
    served = apply(broker, "alice", api_key, request)
    assert served.request is request and served.complete is None
