"""The security administration APIs over the metadata store: CreateAcls, DescribeAcls,
DeleteAcls (v1-3), DescribeUserScramCredentials and AlterUserScramCredentials (v0,
KIP-554), DescribeClientQuotas and AlterClientQuotas (v0-1).

As Kafka: the ACL APIs answer SECURITY_DISABLED when no authorizer is enabled; a
binding or filter that cannot be valid is INVALID_REQUEST for itself alone; the
SCRAM and quota checks are the controller's (`weir.controller.security_state`,
`weir.controller.client_quotas`). Who may call these is decided before the handler
runs (the per-API rules in `weir.broker.authorization`); every change that is
saved is one audit line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from weir.broker.broker import Broker
from weir.broker.handlers.context import Deferred, RequestContext
from weir.broker.handlers.request_authorization import audit_change
from weir.controller.client_quotas import (
    QuotaAlteration,
    QuotaFilterComponent,
    QuotaFilterError,
    QuotaOutcome,
    describe_quotas,
    entity_text,
)
from weir.controller.controller import MetadataChange
from weir.controller.errors import ControllerError
from weir.controller.security_state import ScramDeletion, ScramOutcome, ScramUpsertion
from weir.format.errors import ErrorCode
from weir.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from weir.security.acl_filters import (
    AclBindingFilter,
    binding_error,
    binding_matches,
    filter_error,
)
from weir.security.scram import ScramMechanism
from weir.wire.messages.security import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterClientQuotasResponseEntity,
    AlterClientQuotasResponseEntrie,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResponseResult,
    CreateAclsRequest,
    CreateAclsRequestCreation,
    CreateAclsResponse,
    CreateAclsResponseResult,
    DeleteAclsRequest,
    DeleteAclsRequestFilter,
    DeleteAclsResponse,
    DeleteAclsResponseFilterResult,
    DeleteAclsResponseMatchingAcl,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeAclsResponseAcl,
    DescribeAclsResponseResource,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeClientQuotasResponseEntity,
    DescribeClientQuotasResponseEntrie,
    DescribeClientQuotasResponseValue,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponseCredentialInfo,
    DescribeUserScramCredentialsResponseResult,
)

NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_ON_BROKER = "No Authorizer is configured on the broker"
DESCRIBE_DUPLICATE_USER = (
    "Cannot describe SCRAM credentials for the same user twice in a single request: "
)
DESCRIBE_MISSING_USER = "Attempt to describe a user credential that does not exist: "

_E = TypeVar("_E", ResourceType, PatternType, AclOperation, AclPermissionType)


def _code(enum_type: type[_E], code: int) -> _E:
    """Kafka's `fromCode`: a code it does not know is UNKNOWN."""
    try:
        return enum_type(code)
    except ValueError:
        return enum_type(0)


def _audit(ctx: RequestContext, api_name: str, what: str) -> None:
    session = ctx.authorization.session if ctx.authorization is not None else None
    audit_change(session, api_name, what)


def _binding_text(binding: AclBinding) -> str:
    return (
        f"(principal={binding.principal}, host={binding.host}, "
        f"operation={binding.operation.name}, permission={binding.permission_type.name}) on "
        f"{binding.resource_type.name}:{binding.pattern_type.name}:{binding.resource_name}"
    )


async def _commit(
    broker: Broker, stage: Callable[[], MetadataChange | None]
) -> tuple[ErrorCode, str | None]:
    """Save a controller change; the error to answer with when it could not be."""
    try:
        await broker.topic_changes.commit_metadata(stage)
    except ControllerError as exc:
        return exc.error_code, exc.message
    except OSError as exc:
        return ErrorCode.KAFKA_STORAGE_ERROR, f"storing the metadata failed: {exc}"
    return ErrorCode.NONE, None


# -- ACLs -----------------------------------------------------------------------------


def _creation_binding(creation: CreateAclsRequestCreation) -> AclBinding:
    return AclBinding(
        resource_type=_code(ResourceType, creation.resource_type),
        resource_name=creation.resource_name,
        pattern_type=_code(PatternType, creation.resource_pattern_type),
        principal=creation.principal,
        host=creation.host,
        operation=_code(AclOperation, creation.operation),
        permission_type=_code(AclPermissionType, creation.permission_type),
    )


def handle_create_acls(
    ctx: RequestContext, request: CreateAclsRequest
) -> CreateAclsResponse | Deferred[CreateAclsResponse]:
    creations = request.creations
    if ctx.broker.authorizer is None:
        refused = CreateAclsResponseResult(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        return CreateAclsResponse(throttle_time_ms=0, results=[refused for _ in creations])
    bindings = [_creation_binding(creation) for creation in creations]
    errors = [binding_error(binding) for binding in bindings]
    valid = [binding for binding, error in zip(bindings, errors, strict=True) if error is None]

    def response(saved: tuple[ErrorCode, str | None]) -> CreateAclsResponse:
        results = [
            CreateAclsResponseResult(*saved)
            if error is None
            else CreateAclsResponseResult(ErrorCode.INVALID_REQUEST, error)
            for error in errors
        ]
        return CreateAclsResponse(throttle_time_ms=0, results=results)

    if not valid:
        return response((ErrorCode.NONE, None))
    broker = ctx.broker

    async def finish() -> CreateAclsResponse:
        saved = await _commit(broker, lambda: broker.controller.stage_create_acls(valid))
        if saved[0] == ErrorCode.NONE:
            for binding in valid:
                _audit(ctx, "CreateAcls", f"created ACL {_binding_text(binding)}")
        return response(saved)

    return Deferred(finish)


def _filter(
    resource_type: int,
    resource_name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission_type: int,
) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=_code(ResourceType, resource_type),
        resource_name=resource_name,
        pattern_type=_code(PatternType, pattern_type),
        principal=principal,
        host=host,
        operation=_code(AclOperation, operation),
        permission_type=_code(AclPermissionType, permission_type),
    )


def handle_describe_acls(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    if ctx.broker.authorizer is None:
        return _describe_acls_error(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_ON_BROKER)
    binding_filter = _filter(
        request.resource_type_filter,
        request.resource_name_filter,
        request.pattern_type_filter,
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )
    error = filter_error(binding_filter)
    if error is not None:
        return _describe_acls_error(ErrorCode.INVALID_REQUEST, error)
    resources: dict[tuple[int, str, int], DescribeAclsResponseResource] = {}
    for binding in ctx.broker.controller.acl_bindings():
        if not binding_matches(binding_filter, binding):
            continue
        key = (binding.resource_type, binding.resource_name, binding.pattern_type)
        resource = resources.get(key)
        if resource is None:
            resource = resources[key] = DescribeAclsResponseResource(
                resource_type=binding.resource_type,
                resource_name=binding.resource_name,
                pattern_type=binding.pattern_type,
                acls=[],
            )
        resource.acls.append(
            DescribeAclsResponseAcl(
                principal=binding.principal,
                host=binding.host,
                operation=binding.operation,
                permission_type=binding.permission_type,
            )
        )
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, resources=list(resources.values())
    )


def _describe_acls_error(code: ErrorCode, message: str) -> DescribeAclsResponse:
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=code, error_message=message, resources=[]
    )


def _delete_filter(item: DeleteAclsRequestFilter) -> AclBindingFilter:
    return _filter(
        item.resource_type_filter,
        item.resource_name_filter,
        item.pattern_type_filter,
        item.principal_filter,
        item.host_filter,
        item.operation,
        item.permission_type,
    )


def _matching_acl(binding: AclBinding) -> DeleteAclsResponseMatchingAcl:
    return DeleteAclsResponseMatchingAcl(
        error_code=ErrorCode.NONE,
        error_message=None,
        resource_type=binding.resource_type,
        resource_name=binding.resource_name,
        pattern_type=binding.pattern_type,
        principal=binding.principal,
        host=binding.host,
        operation=binding.operation,
        permission_type=binding.permission_type,
    )


def handle_delete_acls(
    ctx: RequestContext, request: DeleteAclsRequest
) -> DeleteAclsResponse | Deferred[DeleteAclsResponse]:
    if ctx.broker.authorizer is None:
        refused = _filter_result_error(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        return DeleteAclsResponse(
            throttle_time_ms=0, filter_results=[refused for _ in request.filters]
        )
    filters = [_delete_filter(item) for item in request.filters]
    errors = [filter_error(binding_filter) for binding_filter in filters]
    valid = [f for f, error in zip(filters, errors, strict=True) if error is None]
    broker = ctx.broker
    matched: list[list[AclBinding]] = [[] for _ in valid]

    def stage() -> MetadataChange | None:
        change, matched[:] = broker.controller.stage_delete_acls(valid)
        return change

    async def finish() -> DeleteAclsResponse:
        code, message = await _commit(broker, stage) if valid else (ErrorCode.NONE, None)
        if code == ErrorCode.NONE:
            deleted = dict.fromkeys(b for bindings in matched for b in bindings)
            for binding in deleted:
                _audit(ctx, "DeleteAcls", f"deleted ACL {_binding_text(binding)}")
        found = iter(matched)
        results = []
        for error in errors:
            if error is not None:
                results.append(_filter_result_error(ErrorCode.INVALID_REQUEST, error))
            elif code != ErrorCode.NONE:
                next(found)
                results.append(_filter_result_error(code, message))
            else:
                acls = [_matching_acl(binding) for binding in next(found)]
                results.append(
                    DeleteAclsResponseFilterResult(
                        error_code=ErrorCode.NONE, error_message=None, matching_acls=acls
                    )
                )
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)

    return Deferred(finish)


def _filter_result_error(code: ErrorCode, message: str | None) -> DeleteAclsResponseFilterResult:
    return DeleteAclsResponseFilterResult(error_code=code, error_message=message, matching_acls=[])


# -- SCRAM credentials ----------------------------------------------------------------


def handle_describe_user_scram_credentials(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    credentials = ctx.broker.controller.scram_credentials()
    duplicated: dict[str, bool] = {}
    if not request.users:
        duplicated = dict.fromkeys(sorted(credentials), False)
    else:
        for named in request.users:
            duplicated[named.name] = named.name in duplicated
    results = []
    for user, twice in duplicated.items():
        result = DescribeUserScramCredentialsResponseResult(
            user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=[]
        )
        by_mechanism = credentials.get(user, {})
        if twice:
            result.error_code = ErrorCode.DUPLICATE_RESOURCE
            result.error_message = DESCRIBE_DUPLICATE_USER + user
        elif not by_mechanism:
            result.error_code = ErrorCode.RESOURCE_NOT_FOUND
            result.error_message = DESCRIBE_MISSING_USER + user
        else:
            result.credential_infos = [
                DescribeUserScramCredentialsResponseCredentialInfo(
                    mechanism=mechanism, iterations=credential.iterations
                )
                for mechanism, credential in sorted(by_mechanism.items())
            ]
        results.append(result)
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results
    )


def handle_alter_user_scram_credentials(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> Deferred[AlterUserScramCredentialsResponse]:
    deletions = [ScramDeletion(d.name, d.mechanism) for d in request.deletions]
    upsertions = [
        ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in request.upsertions
    ]
    broker = ctx.broker
    outcomes: list[ScramOutcome] = []

    def stage() -> MetadataChange | None:
        change, outcomes[:] = broker.controller.stage_alter_scram_credentials(deletions, upsertions)
        return change

    async def finish() -> AlterUserScramCredentialsResponse:
        code, message = await _commit(broker, stage)
        results = []
        for outcome in outcomes:
            if outcome.error_code == ErrorCode.NONE and code != ErrorCode.NONE:
                outcome = ScramOutcome(outcome.user, code, message)
            elif outcome.error_code == ErrorCode.NONE:
                _audit(ctx, "AlterUserScramCredentials", _scram_change_text(outcome.user, request))
            results.append(
                AlterUserScramCredentialsResponseResult(
                    user=outcome.user,
                    error_code=outcome.error_code,
                    error_message=outcome.error_message,
                )
            )
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)

    return Deferred(finish)


def _scram_change_text(user: str, request: AlterUserScramCredentialsRequest) -> str:
    """What changed for `user` (mechanisms and iterations; never salts or keys)."""
    changes = [
        f"deleted {ScramMechanism(d.mechanism).sasl_name}"
        for d in request.deletions
        if d.name == user
    ] + [
        f"set {ScramMechanism(u.mechanism).sasl_name} (iterations={u.iterations})"
        for u in request.upsertions
        if u.name == user
    ]
    return f"user={user} " + ", ".join(changes)


# -- client quotas --------------------------------------------------------------------


def handle_describe_client_quotas(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    components = [
        QuotaFilterComponent(c.entity_type, c.match_type, c.match) for c in request.components
    ]
    try:
        found = describe_quotas(ctx.broker.controller.client_quotas(), components, request.strict)
    except QuotaFilterError as exc:
        return DescribeClientQuotasResponse(
            throttle_time_ms=0, error_code=exc.error_code, error_message=exc.message, entries=None
        )
    entries = [
        DescribeClientQuotasResponseEntrie(
            entity=[
                DescribeClientQuotasResponseEntity(entity_type=kind, entity_name=name)
                for kind, name in entity
            ],
            values=[
                DescribeClientQuotasResponseValue(key=key, value=value)
                for key, value in sorted(quotas.items())
            ],
        )
        for entity, quotas in found
    ]
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries
    )


def handle_alter_client_quotas(
    ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse | Deferred[AlterClientQuotasResponse]:
    alterations = [
        QuotaAlteration(
            entity=tuple((e.entity_type, e.entity_name) for e in entry.entity),
            ops=tuple((op.key, None if op.remove else op.value) for op in entry.ops),
        )
        for entry in request.entries
    ]
    broker = ctx.broker

    def response(outcomes: list[QuotaOutcome]) -> AlterClientQuotasResponse:
        return AlterClientQuotasResponse(
            throttle_time_ms=0,
            entries=[
                AlterClientQuotasResponseEntrie(
                    error_code=outcome.error_code,
                    error_message=outcome.error_message,
                    entity=[
                        AlterClientQuotasResponseEntity(entity_type=kind, entity_name=name)
                        for kind, name in alteration.entity
                    ],
                )
                for alteration, outcome in zip(alterations, outcomes, strict=True)
            ],
        )

    if request.validate_only:
        _, outcomes = broker.controller.stage_alter_client_quotas(alterations)
        return response(outcomes)
    staged: list[QuotaOutcome] = []

    def stage() -> MetadataChange | None:
        change, staged[:] = broker.controller.stage_alter_client_quotas(alterations)
        return change

    async def finish() -> AlterClientQuotasResponse:
        code, message = await _commit(broker, stage)
        outcomes = []
        for alteration, outcome in zip(alterations, staged, strict=True):
            if outcome.error_code == ErrorCode.NONE and code != ErrorCode.NONE:
                outcome = QuotaOutcome(code, message)
            elif outcome.error_code == ErrorCode.NONE:
                ops = ", ".join(
                    f"{key}={'<removed>' if value is None else value}"
                    for key, value in alteration.ops
                )
                _audit(ctx, "AlterClientQuotas", f"entity={entity_text(alteration.entity)} {ops}")
            outcomes.append(outcome)
        return response(outcomes)

    return Deferred(finish)
