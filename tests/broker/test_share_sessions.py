"""Share sessions follow Kafka's rules (SharePartitionManager.newContext)."""

from __future__ import annotations

import uuid

import pytest

from weir.broker.coordinators.share_sessions import (
    EPOCH_MAX,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSessionError,
    ShareSessions,
    next_epoch,
)
from weir.format.errors import ErrorCode

TOPIC = uuid.UUID(int=7)


def open_session(sessions: ShareSessions, member: str = "m1", partitions: int = 2) -> None:
    sessions.for_fetch(
        "g", member, INITIAL_EPOCH,
        added=[(TOPIC, p) for p in range(partitions)], forgotten=[], has_acknowledgements=False,
    )  # fmt: skip


def test_a_session_opens_at_epoch_zero_and_expects_one_then_two() -> None:
    sessions = ShareSessions(10)
    open_session(sessions)
    session = sessions.get("g", "m1")
    assert session is not None and session.epoch == 1
    assert list(session.partitions) == [(TOPIC, 0), (TOPIC, 1)]
    again = sessions.for_fetch("g", "m1", 1, added=[(TOPIC, 2)], forgotten=[(TOPIC, 0)],
                               has_acknowledgements=True)  # fmt: skip
    assert again is session and session.epoch == 2
    assert list(session.partitions) == [(TOPIC, 1), (TOPIC, 2)]


def test_a_wrong_epoch_is_invalid_share_session_epoch_and_no_session_is_not_found() -> None:
    sessions = ShareSessions(10)
    with pytest.raises(ShareSessionError) as missing:
        sessions.for_fetch("g", "m1", 3, added=[], forgotten=[], has_acknowledgements=False)
    assert missing.value.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    open_session(sessions)
    with pytest.raises(ShareSessionError) as wrong:
        sessions.for_fetch("g", "m1", 5, added=[], forgotten=[], has_acknowledgements=False)
    assert wrong.value.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH


def test_acknowledgements_in_a_sessions_first_fetch_are_an_invalid_request() -> None:
    with pytest.raises(ShareSessionError) as refused:
        ShareSessions(10).for_fetch("g", "m1", INITIAL_EPOCH, added=[], forgotten=[],
                                    has_acknowledgements=True)  # fmt: skip
    assert refused.value.error_code == ErrorCode.INVALID_REQUEST


def test_the_final_epoch_closes_without_fetching_and_needs_a_session() -> None:
    sessions = ShareSessions(10)
    with pytest.raises(ShareSessionError) as missing:
        sessions.for_fetch("g", "m1", FINAL_EPOCH, added=[], forgotten=[],
                           has_acknowledgements=True)  # fmt: skip
    assert missing.value.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    open_session(sessions)
    with pytest.raises(ShareSessionError) as fetching:
        sessions.for_fetch("g", "m1", FINAL_EPOCH, added=[(TOPIC, 0)], forgotten=[],
                           has_acknowledgements=False)  # fmt: skip
    assert fetching.value.error_code == ErrorCode.INVALID_REQUEST
    closing = sessions.for_fetch("g", "m1", FINAL_EPOCH, added=[], forgotten=[],
                                 has_acknowledgements=True)  # fmt: skip
    assert closing is None


def test_share_acknowledge_never_opens_a_session() -> None:
    sessions = ShareSessions(10)
    with pytest.raises(ShareSessionError) as opening:
        sessions.for_acknowledge("g", "m1", INITIAL_EPOCH)
    assert opening.value.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    open_session(sessions)
    assert sessions.for_acknowledge("g", "m1", 1) is sessions.get("g", "m1")
    assert sessions.for_acknowledge("g", "m1", FINAL_EPOCH) is None


def test_sessions_beyond_the_maximum_are_refused_but_a_member_may_reopen_its_own() -> None:
    sessions = ShareSessions(2)
    open_session(sessions, "m1")
    open_session(sessions, "m2")
    with pytest.raises(ShareSessionError) as full:
        open_session(sessions, "m3")
    assert full.value.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    open_session(sessions, "m1", partitions=1)  # replaces its session
    session = sessions.get("g", "m1")
    assert session is not None and list(session.partitions) == [(TOPIC, 0)]
    assert len(sessions) == 2


def test_the_epoch_wraps_to_one() -> None:
    assert next_epoch(EPOCH_MAX) == 1
    assert next_epoch(INITIAL_EPOCH) == 1


async def test_a_replaced_session_closing_with_its_connection_releases_nothing(
    tmp_path: object,
) -> None:
    """A member that opened a new session (epoch 0, say on a new connection) holds its
    records in that one: the old connection's close must not release them."""
    from pathlib import Path

    from weir.broker.broker import Broker
    from weir.broker.config import BrokerConfig
    from weir.broker.coordinators.share_service import ShareService

    assert isinstance(tmp_path, Path)
    service = ShareService(Broker(BrokerConfig(data_dir=tmp_path)))
    released: list[tuple[str, int]] = []

    async def release_member(member_id: str, keys: object) -> None:
        released.append((member_id, len(list(keys))))  # type: ignore[call-overload]

    service.partitions.release_member = release_member  # type: ignore[method-assign]
    open_session(service.sessions, "m1")
    old = service.sessions.get("g", "m1")
    open_session(service.sessions, "m1")  # replaced
    assert old is not None and service.sessions.get("g", "m1") is not old
    await service.close_session(old)
    assert released == []
    current = service.sessions.get("g", "m1")
    assert current is not None
    await service.close_session(current)
    assert released == [("m1", 2)] and service.sessions.get("g", "m1") is None


def test_a_partition_named_and_forgotten_in_one_request_leaves_the_session() -> None:
    """franz-go names a partition it was just unassigned for its acknowledgements and
    forgets it in the same ShareFetch; Kafka adds the named partitions before removing
    the forgotten ones, so the session no longer fetches it (if it did, the records
    acquired for it would be dropped by the client unacknowledged, holding the head
    of the partition's in-flight window until their locks expire)."""
    sessions = ShareSessions(10)
    open_session(sessions)
    session = sessions.for_fetch("g", "m1", 1, added=[(TOPIC, 1)], forgotten=[(TOPIC, 1)],
                                 has_acknowledgements=True)  # fmt: skip
    assert session is not None
    assert list(session.partitions) == [(TOPIC, 0)]
