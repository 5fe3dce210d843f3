"""Users (SCRAM credentials) in Weir's own shape under /v3 (Confluent defines none), as
`weir user` and `kafka-configs.sh --entity-type users` manage them:

- `GET .../users`: every user with a SCRAM credential, its mechanisms and iteration
  counts (DescribeUserScramCredentials; never a salt or key);
- `GET .../users/{user_name}`: one user (404 when it has no credential);
- `POST .../users`: a new user with a password (409 when it already has a
  credential); `PUT .../users/{user_name}`: set a user's password (made if new);
- `DELETE .../users/{user_name}`: every credential the user has.

The broker salts the password (PBKDF2 with a random salt, on a worker thread) and
sends AlterUserScramCredentials with the salted password, as `weir user create`
does on the client's side; the password is never stored, logged or answered. As
on the Kafka API, describing needs DESCRIBE on the cluster and changing ALTER.
"""

from __future__ import annotations

import secrets
from typing import Any

import trio
from starlette.responses import Response

from weir.broker.http.rest_admin_base import (
    AdminCall,
    Endpoint,
    RestError,
    bad_request,
    bounded_int,
    check_kafka,
    collection,
    json_response,
    no_content,
    not_found,
    resource,
    resource_name,
)
from weir.format.errors import ErrorCode
from weir.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SALT_BYTES,
    ScramMechanism,
    salted_password,
)
from weir.wire.protocol import ApiKey

SCRAM_VERSION = 0
# A user name is a Kafka STRING; one this long is already absurd for a login.
USER_NAME_CHARS_MAX = 1024
# Longest password taken (PBKDF2 hashes it once per iteration count's first block only,
# but there is no reason to accept megabytes).
PASSWORD_CHARS_MAX = 1024
MECHANISM_NAMES = [m.sasl_name for m in ScramMechanism]


def _user_name(value: object, where: str = "user_name") -> str:
    name = resource_name(value, where)
    if len(name) > USER_NAME_CHARS_MAX:
        raise bad_request(f"{where} must be at most {USER_NAME_CHARS_MAX} characters")
    return name


def _password(value: object) -> str:
    # The message never repeats the value.
    if not isinstance(value, str) or not 0 < len(value) <= PASSWORD_CHARS_MAX:
        raise bad_request(f"password must be a string of 1 to {PASSWORD_CHARS_MAX} characters")
    return value


def _mechanisms(value: object) -> list[ScramMechanism]:
    if value is None:
        return list(ScramMechanism)
    if not isinstance(value, list) or not 0 < len(value) <= len(MECHANISM_NAMES):
        raise bad_request(f"mechanisms must be a non-empty list of {', '.join(MECHANISM_NAMES)}")
    chosen = []
    for name in value:
        mechanism = ScramMechanism.from_sasl_name(name.upper()) if isinstance(name, str) else None
        if mechanism is None:
            raise bad_request(f"mechanisms must name {' or '.join(MECHANISM_NAMES)}")
        chosen.append(mechanism)
    return list(dict.fromkeys(chosen))


def user_resource(call: AdminCall, name: str, credentials: list[tuple[int, int]]) -> dict[str, Any]:
    return resource(
        "WeirUser",
        call.url("users", name),
        cluster_id=call.cluster_id,
        user_name=name,
        credentials=[
            {"mechanism": _mechanism_name(mechanism), "iterations": iterations}
            for mechanism, iterations in credentials
        ],
    )


def _mechanism_name(code: int) -> str:
    try:
        return ScramMechanism(code).sasl_name
    except ValueError:
        return f"UNKNOWN({code})"


async def _described(call: AdminCall, name: str | None) -> dict[str, list[tuple[int, int]]]:
    """User -> (mechanism, iterations) of every user (name None) or of one user
    (empty when it has no credential)."""
    users = None if name is None else [{"name": name}]
    response = await call.send(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, SCRAM_VERSION, {"users": users}
    )
    check_kafka(response.error_code, response.error_message, "describe the users")
    found = {}
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            continue
        check_kafka(result.error_code, result.error_message, f"describe user {result.user!r}")
        found[result.user] = [(c.mechanism, c.iterations) for c in result.credential_infos]
    return found


async def list_users(call: AdminCall) -> Response:
    found = await _described(call, None)
    data = [user_resource(call, name, found[name]) for name in sorted(found)]
    return json_response(collection("WeirUserList", call.url("users"), data))


async def get_user(call: AdminCall) -> Response:
    name = _user_name(call.path("user_name"))
    found = await _described(call, name)
    if name not in found:
        raise not_found(f"no user {name!r} (it has no SCRAM credential)")
    return json_response(user_resource(call, name, found[name]))


async def _alter(call: AdminCall, body: dict[str, Any], name: str) -> None:
    response = await call.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, SCRAM_VERSION, body)
    for result in response.results:
        check_kafka(result.error_code, result.error_message, f"change user {name!r}")


async def _set_password(call: AdminCall, name: str, document: dict[str, Any]) -> dict[str, Any]:
    password = _password(document.get("password"))
    mechanisms = _mechanisms(document.get("mechanisms"))
    iterations = bounded_int(
        document.get("iterations", DEFAULT_ITERATIONS), "iterations", MIN_ITERATIONS, MAX_ITERATIONS
    )
    for mechanism in mechanisms:
        salt = secrets.token_bytes(SALT_BYTES)
        # PBKDF2 takes milliseconds: off the event loop.
        salted = await trio.to_thread.run_sync(
            salted_password, mechanism, password, salt, iterations
        )
        upsertion = {
            "name": name,
            "mechanism": int(mechanism),
            "iterations": iterations,
            "salt": salt,
            "salted_password": salted,
        }
        # Kafka refuses a user named twice in one request: one request per mechanism.
        await _alter(call, {"deletions": [], "upsertions": [upsertion]}, name)
    found = await _described(call, name)
    return user_resource(call, name, found.get(name, []))


async def create_user(call: AdminCall) -> Response:
    document = await call.json_body()
    name = _user_name(document.get("user_name"))
    _password(document.get("password"))  # checked before anything is asked of the broker
    if await _described(call, name):
        raise RestError(409, f"user {name!r} already exists (PUT its URL to set a password)")
    return json_response(await _set_password(call, name, document), status=201)


async def set_user_password(call: AdminCall) -> Response:
    name = _user_name(call.path("user_name"))
    document = await call.json_body()
    _password(document.get("password"))
    await _described(call, name)  # a caller who may not even DESCRIBE: 403 before PBKDF2
    return json_response(await _set_password(call, name, document))


async def delete_user(call: AdminCall) -> Response:
    name = _user_name(call.path("user_name"))
    found = await _described(call, name)
    if name not in found:
        raise not_found(f"no user {name!r} (it has no SCRAM credential)")
    for mechanism, _ in found[name]:
        deletion = {"name": name, "mechanism": mechanism}
        await _alter(call, {"deletions": [deletion], "upsertions": []}, name)
    return no_content()


PASSWORD_BODY = {
    "type": "object",
    "required": ["password"],
    "properties": {
        "password": {"type": "string", "minLength": 1, "maxLength": PASSWORD_CHARS_MAX},
        "mechanisms": {
            "type": "array",
            "items": {"enum": MECHANISM_NAMES},
            "description": "Default: both",
        },
        "iterations": {
            "type": "integer",
            "minimum": MIN_ITERATIONS,
            "maximum": MAX_ITERATIONS,
            "description": f"Default: {DEFAULT_ITERATIONS}",
        },
    },
}
USER_BODY = {
    **PASSWORD_BODY,
    "required": ["user_name", "password"],
    "properties": {
        "user_name": {"type": "string", "minLength": 1, "maxLength": USER_NAME_CHARS_MAX},
        **PASSWORD_BODY["properties"],  # type: ignore[dict-item]
    },
}
USERS = "/v3/clusters/{cluster_id}/users"
ENDPOINTS = [
    Endpoint(
        "GET",
        USERS,
        list_users,
        "Every user with a SCRAM credential (mechanisms and iterations)",
        tag="users",
    ),
    Endpoint(
        "POST",
        USERS,
        create_user,
        "Create a user with a password (409 when it exists); the password is never answered",
        body=USER_BODY,
        responses={201: "Created (the WeirUser)", 409: "The user exists"},
        tag="users",
    ),
    Endpoint("GET", f"{USERS}/{{user_name}}", get_user, "One user", tag="users"),
    Endpoint(
        "PUT",
        f"{USERS}/{{user_name}}",
        set_user_password,
        "Set a user's password (the user is made if new)",
        body=PASSWORD_BODY,
        tag="users",
    ),
    Endpoint(
        "DELETE",
        f"{USERS}/{{user_name}}",
        delete_user,
        "Delete every SCRAM credential of a user",
        responses={204: "Deleted"},
        tag="users",
    ),
]
