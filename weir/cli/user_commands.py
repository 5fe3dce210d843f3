"""`weir user create|list|delete`: SCRAM credentials, as Kafka's
`kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`.

`create` salts the password itself (PBKDF2 with a random salt, RFC 5802's Hi) and
sends AlterUserScramCredentials with the salted password, so the password never
crosses the network nor reaches the broker; `list` is DescribeUserScramCredentials;
`delete` removes the named mechanisms (all the user has by default).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from weir.cli.cluster import Cluster
from weir.cli.errors import CliError, failed_to
from weir.cli.formatting import render_table
from weir.format.errors import ErrorCode
from weir.security.scram import (
    SALT_BYTES,
    ScramMechanism,
    iterations_refusal,
    salted_password,
)
from weir.wire.protocol import ApiKey

MECHANISM_NAMES = tuple(mechanism.sasl_name for mechanism in ScramMechanism)
DEFAULT_MECHANISM = ScramMechanism.SCRAM_SHA_256.sasl_name


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.from_sasl_name(name.upper())
    if mechanism is None:
        raise CliError(f"unknown SCRAM mechanism {name!r} (use {' or '.join(MECHANISM_NAMES)})")
    return mechanism


def _mechanism_name(code: int) -> str:
    try:
        return ScramMechanism(code).sasl_name
    except ValueError:
        return f"UNKNOWN({code})"


def _check_results(response: Mapping[str, Any], doing: str) -> None:
    for result in response["results"]:
        code = int(result["error_code"])
        if code != ErrorCode.NONE:
            raise failed_to(f"{doing} user {result['user']!r}", code, result["error_message"])


def create_user(
    cluster: Cluster, user: str, password: str, mechanisms: Sequence[str], iterations: int
) -> dict[str, Any]:
    """Store a credential for `user` for each mechanism (replacing one it had)."""
    refusal = iterations_refusal(iterations)
    if refusal is not None:
        raise CliError(f"--iterations: {refusal}")
    chosen = list(dict.fromkeys(_mechanism(name) for name in mechanisms or [DEFAULT_MECHANISM]))
    upsertions = []
    for mechanism in chosen:
        salt = secrets.token_bytes(SALT_BYTES)
        upsertions.append(
            {
                "name": user,
                "mechanism": int(mechanism),
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted_password(mechanism, password, salt, iterations),
            }
        )
    if len(upsertions) > 1:
        # Kafka refuses one user twice in a request: one request per mechanism.
        for upsertion in upsertions:
            _alter(cluster, [], [upsertion], "create")
    else:
        _alter(cluster, [], upsertions, "create")
    return {
        "user": user,
        "credentials": [{"mechanism": m.sasl_name, "iterations": iterations} for m in chosen],
    }


def _alter(
    cluster: Cluster,
    deletions: list[dict[str, Any]],
    upsertions: list[dict[str, Any]],
    doing: str,
) -> None:
    body = {"deletions": deletions, "upsertions": upsertions}
    _check_results(cluster.request_any(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body), doing)


def list_users(cluster: Cluster, users: Sequence[str]) -> dict[str, Any]:
    """Every user with a SCRAM credential (or the named ones), with the mechanisms and
    iteration counts (never the salts or keys)."""
    body = {"users": [{"name": user} for user in users] if users else None}
    response = cluster.request_any(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
    code = int(response["error_code"])
    if code != ErrorCode.NONE:
        raise failed_to("list users", code, response["error_message"])
    rows = []
    for result in response["results"]:
        result_code = int(result["error_code"])
        if result_code == ErrorCode.RESOURCE_NOT_FOUND:
            raise CliError(f"user {result['user']!r} has no SCRAM credential")
        if result_code != ErrorCode.NONE:
            raise failed_to(
                f"describe user {result['user']!r}", result_code, result["error_message"]
            )
        rows.append(
            {
                "user": result["user"],
                "credentials": [
                    {
                        "mechanism": _mechanism_name(info["mechanism"]),
                        "iterations": info["iterations"],
                    }
                    for info in result["credential_infos"]
                ],
            }
        )
    rows.sort(key=lambda row: row["user"])
    return {"users": rows}


def render_users(document: Mapping[str, Any]) -> str:
    rows = [
        (user["user"], credential["mechanism"], credential["iterations"])
        for user in document["users"]
        for credential in user["credentials"]
    ]
    if not rows:
        return "no users\n"
    return render_table(("USER", "MECHANISM", "ITERATIONS"), rows)


def delete_user(cluster: Cluster, user: str, mechanisms: Sequence[str]) -> dict[str, Any]:
    """Remove the user's credentials for `mechanisms` (all it has when empty)."""
    if mechanisms:
        chosen = list(dict.fromkeys(_mechanism(name) for name in mechanisms))
    else:
        [described] = list_users(cluster, [user])["users"]
        chosen = [_mechanism(credential["mechanism"]) for credential in described["credentials"]]
    for mechanism in chosen:  # one request per mechanism: Kafka refuses a user twice
        _alter(cluster, [{"name": user, "mechanism": int(mechanism)}], [], "delete")
    return {"user": user, "deleted": [m.sasl_name for m in chosen]}


def render_created(document: Mapping[str, Any]) -> str:
    mechanisms = ", ".join(c["mechanism"] for c in document["credentials"])
    return f"stored {mechanisms} credentials for user '{document['user']}'\n"


def render_deleted(document: Mapping[str, Any]) -> str:
    return f"deleted {', '.join(document['deleted'])} credentials of user '{document['user']}'\n"
