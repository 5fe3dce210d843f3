"""The Produce rule's cost per request (`weir.broker.authorization.rules_data.produce`)
with the real `AclAuthorizer` holding 10,000 bindings (`acl_authorizer.py`'s mix, plus
the producer's WRITE on its topics): a request of 1, 5 and 50 topics of one partition
each, every topic allowed (the common case: the request is passed on untouched),
the transactional-records scan included, one core:

    PYTHONPATH=. .venv/bin/python benchmarks/produce_authorization.py
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

from weir.broker.authorization.rules_data import produce
from weir.broker.handlers.request_authorization import RequestAuthorization, Session
from weir.format.record_batch import build_batch
from weir.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from weir.security.authorizer import AclAuthorizer, AuthorizerSettings
from weir.security.principal import user
from weir.wire.messages.produce import (
    ProduceRequest,
    ProduceRequestPartitionData,
    ProduceRequestTopicData,
)

sys.path.insert(0, str(Path(__file__).parent))
from acl_authorizer import make_bindings  # noqa: E402

ROUNDS = 20_000


def request(topics: int, records: bytes) -> ProduceRequest:
    return ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequestTopicData(
                name=f"bench-{i}", partition_data=[ProduceRequestPartitionData(0, records)]
            )
            for i in range(topics)
        ],
    )


def main() -> None:
    bindings = make_bindings(random.Random(1), 10_000 - 1)
    bindings.append(
        AclBinding(ResourceType.TOPIC, "bench-", PatternType.PREFIXED, "User:producer", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW)
    )  # fmt: skip
    authorizer = AclAuthorizer(AuthorizerSettings(), bindings)
    session = Session(user("producer"), "10.0.0.7", "PLAINTEXT")
    records = build_batch(
        [(b"k", b"v" * 100, [])], producer_id=1, producer_epoch=0, base_sequence=0
    )
    context: Any = None  # the rule reads the context only to refuse
    for topics in (1, 5, 50):
        produce_request = request(topics, records)
        started = time.perf_counter()
        for _ in range(ROUNDS):
            authorization = RequestAuthorization(authorizer, session, "PRODUCE")
            gate = produce(authorization, context, produce_request)
        elapsed = time.perf_counter() - started
        assert gate.request is produce_request and gate.complete is None
        print(f"{topics:>3} topics: {elapsed / ROUNDS * 1e6:7.2f} µs per request")


if __name__ == "__main__":
    main()
