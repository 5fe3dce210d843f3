"""The security administration APIs' rules (Kafka's AclApis and the SCRAM and
client-quota handlers): the ACLs need the cluster's ALTER (DescribeAcls: its
DESCRIBE), SCRAM credentials the cluster's ALTER (describing: DESCRIBE), client
quotas the cluster's ALTER_CONFIGS (describing: DESCRIBE_CONFIGS). Refused, each
item of the request carries CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

from typing import Any

from weir.broker.authorization.gate import Gate, allowed, refused
from weir.broker.authorization.rules_shared import CLUSTER_AUTHORIZATION_FAILED, ERROR_MESSAGES
from weir.broker.handlers.context import RequestContext
from weir.broker.handlers.request_authorization import RequestAuthorization
from weir.security.acl import AclOperation
from weir.wire.messages.security import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterClientQuotasResponseEntity,
    AlterClientQuotasResponseEntrie,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResponseResult,
    CreateAclsRequest,
    CreateAclsResponse,
    CreateAclsResponseResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteAclsResponseFilterResult,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponseResult,
)

ERROR = CLUSTER_AUTHORIZATION_FAILED
MESSAGE = ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED]


def create_acls(
    authorization: RequestAuthorization, ctx: RequestContext, request: CreateAclsRequest
) -> Gate[CreateAclsRequest, Any]:
    if authorization.allows_cluster(AclOperation.ALTER):
        return allowed(request)
    results = [
        CreateAclsResponseResult(error_code=ERROR, error_message=MESSAGE) for _ in request.creations
    ]
    return refused(CreateAclsResponse(results=results))


def describe_acls(
    authorization: RequestAuthorization, ctx: RequestContext, request: DescribeAclsRequest
) -> Gate[DescribeAclsRequest, Any]:
    if authorization.allows_cluster(AclOperation.DESCRIBE):
        return allowed(request)
    return refused(DescribeAclsResponse(error_code=ERROR, error_message=MESSAGE))


def delete_acls(
    authorization: RequestAuthorization, ctx: RequestContext, request: DeleteAclsRequest
) -> Gate[DeleteAclsRequest, Any]:
    if authorization.allows_cluster(AclOperation.ALTER):
        return allowed(request)
    results = [
        DeleteAclsResponseFilterResult(error_code=ERROR, error_message=MESSAGE)
        for _ in request.filters
    ]
    return refused(DeleteAclsResponse(filter_results=results))


def describe_user_scram_credentials(
    authorization: RequestAuthorization,
    ctx: RequestContext,
    request: DescribeUserScramCredentialsRequest,
) -> Gate[DescribeUserScramCredentialsRequest, Any]:
    if authorization.allows_cluster(AclOperation.DESCRIBE):
        return allowed(request)
    results = [
        DescribeUserScramCredentialsResponseResult(
            user=user.name, error_code=ERROR, error_message=MESSAGE
        )
        for user in request.users or []
    ]
    return refused(
        DescribeUserScramCredentialsResponse(
            error_code=ERROR, error_message=MESSAGE, results=results
        )
    )


def alter_user_scram_credentials(
    authorization: RequestAuthorization,
    ctx: RequestContext,
    request: AlterUserScramCredentialsRequest,
) -> Gate[AlterUserScramCredentialsRequest, Any]:
    if authorization.allows_cluster(AclOperation.ALTER):
        return allowed(request)
    users = dict.fromkeys(
        [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    )
    results = [
        AlterUserScramCredentialsResponseResult(user=user, error_code=ERROR, error_message=MESSAGE)
        for user in users
    ]
    return refused(AlterUserScramCredentialsResponse(results=results))


def describe_client_quotas(
    authorization: RequestAuthorization, ctx: RequestContext, request: DescribeClientQuotasRequest
) -> Gate[DescribeClientQuotasRequest, Any]:
    if authorization.allows_cluster(AclOperation.DESCRIBE_CONFIGS):
        return allowed(request)
    return refused(
        DescribeClientQuotasResponse(error_code=ERROR, error_message=MESSAGE, entries=None)
    )


def alter_client_quotas(
    authorization: RequestAuthorization, ctx: RequestContext, request: AlterClientQuotasRequest
) -> Gate[AlterClientQuotasRequest, Any]:
    if authorization.allows_cluster(AclOperation.ALTER_CONFIGS):
        return allowed(request)
    entries = [
        AlterClientQuotasResponseEntrie(
            error_code=ERROR,
            error_message=MESSAGE,
            entity=[
                AlterClientQuotasResponseEntity(
                    entity_type=entity.entity_type, entity_name=entity.entity_name
                )
                for entity in entry.entity
            ],
        )
        for entry in request.entries
    ]
    return refused(AlterClientQuotasResponse(entries=entries))
