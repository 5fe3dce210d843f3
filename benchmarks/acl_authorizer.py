"""authorize() calls per second of `weir.security.authorizer.AclAuthorizer` with
10,000 distinct random bindings (5/7 LITERAL on 1,000 topics, 1/7 PREFIXED over
about 1,500 prefixes of 6 to 9 characters, 1/7 LITERAL on 700 groups; 200 users,
hosts `*` or one address, 10% DENY) and one `User:*` DESCRIBE on every topic;
requests from 220 users (some with no ACL) at two addresses on topics, prefixed
topic names and groups (some without ACLs), one core:

    PYTHONPATH=. .venv/bin/python benchmarks/acl_authorizer.py
"""

from __future__ import annotations

import argparse
import random
import time

from weir.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    Resource,
    ResourceType,
)
from weir.security.authorizer import AclAuthorizer, AuthorizerSettings
from weir.security.principal import KafkaPrincipal, user

TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL)


def random_binding(rng: random.Random) -> AclBinding:
    """One of: a topic LITERAL (5 of 7 draws), a topic PREFIXED, a group LITERAL."""
    draw = rng.randrange(7)
    permission = AclPermissionType.DENY if rng.random() < 0.1 else AclPermissionType.ALLOW
    principal = f"User:user-{rng.randrange(200)}"
    if draw < 5:
        topic = f"topic-{rng.randrange(1_000)}"
        host = rng.choice(("*", "10.0.0.1"))
        operation = rng.choice(TOPIC_OPERATIONS)
        return AclBinding(
            ResourceType.TOPIC, topic, PatternType.LITERAL, principal, host, operation, permission
        )
    if draw == 5:
        prefix = f"team-{rng.randrange(500)}-"[: rng.randint(6, 9)]
        operation = rng.choice(TOPIC_OPERATIONS)
        return AclBinding(
            ResourceType.TOPIC, prefix, PatternType.PREFIXED, principal, "*", operation, permission
        )
    group = f"group-{rng.randrange(700)}"
    return AclBinding(
        ResourceType.GROUP,
        group,
        PatternType.LITERAL,
        principal,
        "*",
        AclOperation.READ,
        permission,
    )


def make_bindings(rng: random.Random, count: int) -> list[AclBinding]:
    wildcard = AclBinding(
        ResourceType.TOPIC,
        "*",
        PatternType.LITERAL,
        "User:*",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )
    bindings = {wildcard: None}
    while len(bindings) < count:
        bindings[random_binding(rng)] = None
    return list(bindings)


def make_requests(
    rng: random.Random, count: int
) -> list[tuple[KafkaPrincipal, str, AclOperation, Resource]]:
    requests = []
    for _ in range(count):
        if rng.random() < 0.8:
            resource = Resource(
                ResourceType.TOPIC,
                rng.choice((f"topic-{rng.randrange(1_200)}", f"team-{rng.randrange(600)}-x")),
            )
        else:
            resource = Resource(ResourceType.GROUP, f"group-{rng.randrange(800)}")
        requests.append(
            (
                user(f"user-{rng.randrange(220)}"),
                rng.choice(("10.0.0.1", "10.0.0.2")),
                rng.choice(TOPIC_OPERATIONS[:3]),
                resource,
            )
        )
    return requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bindings", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=22)
    arguments = parser.parse_args()
    rng = random.Random(arguments.seed)
    bindings = make_bindings(rng, arguments.bindings)
    authorizer = AclAuthorizer(AuthorizerSettings(), bindings)
    requests = make_requests(rng, arguments.calls)
    authorize = authorizer.authorize
    started = time.perf_counter()
    allowed = sum(authorize(*request) for request in requests)
    elapsed_s = time.perf_counter() - started
    rate = arguments.calls / elapsed_s
    share = allowed / arguments.calls
    print(f"{len(bindings)} bindings: {rate:,.0f} authorize() calls/s ({share:.0%} allowed)")


if __name__ == "__main__":
    main()
