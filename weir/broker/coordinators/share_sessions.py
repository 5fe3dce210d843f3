"""Share sessions (KIP-932): which partitions a member's ShareFetch requests cover.

A member opens a session with ShareSessionEpoch 0 (a session it had is replaced),
names partitions to add and forget in later requests whose epoch is the one
expected next (1, 2, ..., wrapping to 1 after 2^31-1), and closes it with -1; a
ShareFetch reads from every partition of the session, not only those it names.
Kafka's rules and error codes (its SharePartitionManager.newContext):

- epoch 0 with acknowledgements: INVALID_REQUEST;
- epoch -1 with partitions to fetch: INVALID_REQUEST; with no session:
  SHARE_SESSION_NOT_FOUND;
- another epoch with no session: SHARE_SESSION_NOT_FOUND; not the expected one:
  INVALID_SHARE_SESSION_EPOCH;
- ShareAcknowledge never opens a session (epoch 0: INVALID_SHARE_SESSION_EPOCH),
  and -1 closes it;
- more than `sessions_max` sessions (group.share.max.share.sessions): the new one
  is refused with SHARE_SESSION_LIMIT_REACHED.

A session also ends with its connection: the member's acquired records in its
partitions are released (the caller's `on_close`), as Kafka does when a share
consumer's connection drops.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from weir.format.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EPOCH_MAX = 2**31 - 1

TopicPartitionId = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= EPOCH_MAX else epoch + 1


@dataclass(eq=False)
class ShareSession:
    group_id: str
    member_id: str
    # The epoch the next request must carry.
    epoch: int
    # Insertion-ordered: the order the member named them in.
    partitions: dict[TopicPartitionId, None] = field(default_factory=dict)
    # Called once when the session ends with its connection.
    connection_closed: Callable[[], None] | None = None

    def update(
        self, added: Sequence[TopicPartitionId], forgotten: Sequence[TopicPartitionId]
    ) -> None:
        """The request's partitions join, then its forgotten ones leave (Kafka's
        ShareSession.update, in that order): a partition named only for its
        acknowledgements and forgotten in the same request (franz-go does this for a
        partition it was just unassigned) is no longer fetched for the member, whose
        client would drop what was acquired for it unacknowledged."""
        for partition in added:
            self.partitions.setdefault(partition, None)
        for partition in forgotten:
            self.partitions.pop(partition, None)


class ShareSessionError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class ShareSessions:
    def __init__(self, sessions_max: int) -> None:
        self.sessions_max = sessions_max
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def for_fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        *,
        added: Sequence[TopicPartitionId],
        forgotten: Sequence[TopicPartitionId],
        has_acknowledgements: bool,
    ) -> ShareSession | None:
        """The session a ShareFetch continues or opens (None: it closes the session,
        epoch -1, whose session the caller then `close`s). Raises ShareSessionError."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if added:
                raise ShareSessionError(
                    ErrorCode.INVALID_REQUEST, "the final epoch fetches no partitions"
                )
            if key not in self._sessions:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, "no such share session")
            return None
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise ShareSessionError(
                    ErrorCode.INVALID_REQUEST, "acknowledgements in a session's first fetch"
                )
            replaced = self._sessions.pop(key, None)
            if replaced is None and len(self._sessions) >= self.sessions_max:
                raise ShareSessionError(
                    ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                    f"this broker holds its maximum of {self.sessions_max} share sessions",
                )
            session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH))
            session.update(added, ())
            self._sessions[key] = session
            return session
        session = self._continue(key, epoch)
        session.update(added, forgotten)
        return session

    def for_acknowledge(self, group_id: str, member_id: str, epoch: int) -> ShareSession | None:
        """The session a ShareAcknowledge continues (None: it closes it). Raises
        ShareSessionError."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a session"
            )
        if epoch == FINAL_EPOCH:
            if key not in self._sessions:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, "no such share session")
            return None
        return self._continue(key, epoch)

    def _continue(self, key: tuple[str, str], epoch: int) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, "no such share session")
        if session.epoch != epoch:
            raise ShareSessionError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                f"expected share session epoch {session.epoch}, got {epoch}",
            )
        session.epoch = next_epoch(session.epoch)
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def sessions(self) -> list[ShareSession]:
        return list(self._sessions.values())
