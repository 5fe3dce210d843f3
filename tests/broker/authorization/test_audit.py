"""Every administrative request that passes authorization is one `weir.audit` line
naming who, from where and on what; every denial is one too."""

from __future__ import annotations

import logging

import pytest

from tests.broker.authorization.authorized_calls import allow, secure, send
from tests.broker.authorization.test_admin_rules import create_body
from weir.broker.broker import Broker
from weir.security.acl import AclOperation, ResourceType
from weir.wire.api_keys import ApiKey


def _audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "weir.audit"]


async def test_create_topics_writes_one_change_line_with_what_was_allowed(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    secure(broker, [allow("alice", AclOperation.CREATE, ResourceType.TOPIC, "a")])
    caplog.set_level(logging.INFO, logger="weir.audit")
    await send(broker, "alice", ApiKey.CREATE_TOPICS, 7, create_body("a", "c"))
    lines = _audit_lines(caplog)
    changes = [line for line in lines if line.startswith("CHANGE")]
    assert changes == ["CHANGE principal=User:alice host=127.0.0.1 api=CREATE_TOPICS topics=a"]
    denials = [line for line in lines if line.startswith("DENIED")]
    assert any("principal=User:alice" in d and "resource=TOPIC:c" in d for d in denials)


async def test_a_request_refused_as_a_whole_writes_no_change_line(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    secure(broker)
    caplog.set_level(logging.INFO, logger="weir.audit")
    await send(broker, "mallory", ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
    lines = _audit_lines(caplog)
    assert not [line for line in lines if line.startswith("CHANGE")]
    assert any(line.startswith("DENIED principal=User:mallory") for line in lines)
