"""ACL bindings and SCRAM credentials as the metadata store keeps them, and Kafka's
rules for changing them (`AclControlManager`, `ScramControlManager`): pure functions
from the current state and a request to the new state and the per-item answers.

Handlers validate a new binding's shape (`acl_filters.binding_error`) before it
gets here; creating a binding that exists is a success that changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from weir.format.errors import ErrorCode
from weir.security.acl import AclBinding
from weir.security.acl_filters import (
    AclBindingFilter,
    binding_from_json,
    binding_matches,
    binding_to_json,
)
from weir.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_json,
    credential_from_salted_password,
    credential_to_json,
)

# user -> mechanism -> credential
ScramCredentials = dict[str, dict[ScramMechanism, ScramCredential]]

# -- ACLs -----------------------------------------------------------------------------


def add_bindings(current: Sequence[AclBinding], new: Iterable[AclBinding]) -> list[AclBinding]:
    """`current` with the bindings of `new` it lacks, in order."""
    present = set(current)
    added = list(current)
    for binding in new:
        if binding not in present:
            present.add(binding)
            added.append(binding)
    return added


def delete_bindings(
    current: Sequence[AclBinding], filters: Sequence[AclBindingFilter]
) -> tuple[list[AclBinding], list[list[AclBinding]]]:
    """The bindings no filter matches, and for each filter the bindings it matched
    (a binding two filters match is listed under both, as Kafka does)."""
    matched = [[b for b in current if binding_matches(f, b)] for f in filters]
    deleted = {binding for bindings in matched for binding in bindings}
    return [b for b in current if b not in deleted], matched


def acls_to_json(bindings: Iterable[AclBinding]) -> list[dict[str, str]]:
    return [binding_to_json(binding) for binding in bindings]


def acls_from_json(doc: object) -> list[AclBinding]:
    if not isinstance(doc, list):
        raise ValueError("acls must be a list")
    return [binding_from_json(item) for item in doc]


# -- SCRAM credentials ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    user: str
    mechanism: int  # Kafka's code; unknown codes are refused


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class ScramOutcome:
    user: str
    error_code: ErrorCode
    error_message: str | None


_ALTERED_TWICE = "A user credential cannot be altered twice in the same request"


def _mechanism(code: int) -> ScramMechanism | None:
    try:
        return ScramMechanism(code)
    except ValueError:
        return None


def _name_refusal(user: str, code: int) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if _mechanism(code) is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _deletion_refusal(
    current: Mapping[str, Mapping[ScramMechanism, ScramCredential]], deletion: ScramDeletion
) -> tuple[ErrorCode, str] | None:
    refusal = _name_refusal(deletion.user, deletion.mechanism)
    if refusal is not None:
        return refusal
    if ScramMechanism(deletion.mechanism) not in current.get(deletion.user, {}):
        return (
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        )
    return None


def _upsertion_refusal(upsertion: ScramUpsertion) -> tuple[ErrorCode, str] | None:
    refusal = _name_refusal(upsertion.user, upsertion.mechanism)
    if refusal is not None:
        return refusal
    if upsertion.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def plan_scram_alteration(
    current: Mapping[str, Mapping[ScramMechanism, ScramCredential]],
    deletions: Sequence[ScramDeletion],
    upsertions: Sequence[ScramUpsertion],
) -> tuple[ScramCredentials, list[ScramOutcome]]:
    """Kafka's `ScramControlManager.alterCredentials`: a user named twice in one
    request (deletions and upsertions together) fails with DUPLICATE_RESOURCE and
    none of its alterations apply; every other valid alteration applies. One outcome
    per user: the successful deletions, then upsertions, then the failures."""
    errors: dict[str, tuple[ErrorCode, str]] = {}
    to_delete: dict[str, ScramDeletion] = {}
    to_upsert: dict[str, ScramUpsertion] = {}
    for deletion in deletions:
        if deletion.user in errors:
            continue
        if to_delete.pop(deletion.user, None) is not None:
            errors[deletion.user] = (ErrorCode.DUPLICATE_RESOURCE, _ALTERED_TWICE)
            continue
        refusal = _deletion_refusal(current, deletion)
        if refusal is None:
            to_delete[deletion.user] = deletion
        else:
            errors[deletion.user] = refusal
    for upsertion in upsertions:
        if upsertion.user in errors:
            continue
        if (
            to_delete.pop(upsertion.user, None) is not None
            or to_upsert.pop(upsertion.user, None) is not None
        ):
            errors[upsertion.user] = (ErrorCode.DUPLICATE_RESOURCE, _ALTERED_TWICE)
            continue
        refusal = _upsertion_refusal(upsertion)
        if refusal is None:
            to_upsert[upsertion.user] = upsertion
        else:
            errors[upsertion.user] = refusal
    updated = {user: dict(credentials) for user, credentials in current.items()}
    outcomes: list[ScramOutcome] = []
    for deletion in to_delete.values():
        credentials = updated[deletion.user]
        del credentials[ScramMechanism(deletion.mechanism)]
        if not credentials:
            del updated[deletion.user]
        outcomes.append(ScramOutcome(deletion.user, ErrorCode.NONE, None))
    for upsertion in to_upsert.values():
        mechanism = ScramMechanism(upsertion.mechanism)
        credential = credential_from_salted_password(
            mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
        )
        updated.setdefault(upsertion.user, {})[mechanism] = credential
        outcomes.append(ScramOutcome(upsertion.user, ErrorCode.NONE, None))
    for user, (code, message) in errors.items():
        outcomes.append(ScramOutcome(user, code, message))
    return updated, outcomes


def scram_to_json(
    credentials: Mapping[str, Mapping[ScramMechanism, ScramCredential]],
) -> dict[str, dict[str, object]]:
    return {
        user: {
            mechanism.sasl_name: credential_to_json(credential)
            for mechanism, credential in sorted(by_mechanism.items())
        }
        for user, by_mechanism in sorted(credentials.items())
    }


def scram_from_json(doc: object) -> ScramCredentials:
    if not isinstance(doc, dict):
        raise ValueError("scram_credentials must be an object")
    credentials: ScramCredentials = {}
    for user, by_mechanism in doc.items():
        if not isinstance(by_mechanism, dict):
            raise ValueError(f"the SCRAM credentials of {user!r} must be an object")
        parsed: dict[ScramMechanism, ScramCredential] = {}
        for name, credential in by_mechanism.items():
            mechanism = ScramMechanism.from_sasl_name(str(name))
            if mechanism is None:
                raise ValueError(f"unknown SCRAM mechanism {name!r}")
            parsed[mechanism] = credential_from_json(credential)
        credentials[str(user)] = parsed
    return credentials
