"""Share groups on this broker, partition-leader side: the share coordinator's store,
the share partitions led here and the members' share sessions (KIP-932).

The membership side (ShareGroupHeartbeat, the assignment) is the group
coordinator's (`group_service`); this is what ShareFetch and ShareAcknowledge need
where the topic partition is led.
"""

from __future__ import annotations

import trio

from weir.broker.broker import Broker
from weir.broker.coordinators.dead_letters import DeadLetters
from weir.broker.coordinators.share_partitions import SharePartitions
from weir.broker.coordinators.share_sessions import ShareSession, ShareSessions
from weir.broker.coordinators.share_state_service import ShareKey, ShareStateService

# group.share.max.share.sessions: share sessions one broker holds.
SHARE_SESSIONS_MAX = 2_000


class ShareService:
    def __init__(self, broker: Broker, sessions_max: int = SHARE_SESSIONS_MAX) -> None:
        self.broker = broker
        self.store = ShareStateService(broker)
        self.partitions = SharePartitions(broker, self.store)
        self.sessions = ShareSessions(sessions_max)
        # Dead letters (KIP-1191): written for the records the partitions archive.
        self.dead_letters = DeadLetters(broker, self.partitions)
        self.partitions.on_archived = self.dead_letters.on_archived

    @property
    def partitions_not_created(self) -> int:
        return self.store.partitions_not_created

    @property
    def internal_topic_name(self) -> str:
        return self.store.internal_topic_name

    def unavailable_partitions(self) -> dict[int, str]:
        return self.store.unavailable_partitions()

    def session_keys(self, session: ShareSession) -> list[ShareKey]:
        return [
            ShareKey(session.group_id, topic_id, partition)
            for topic_id, partition in session.partitions
        ]

    async def close_session(self, session: ShareSession) -> None:
        """The member's session ended (epoch -1, or its connection closed): release
        what it holds in the session's partitions. A session the member already
        replaced (epoch 0 again, on a new connection) releases nothing: what the member
        holds now is its new session's."""
        if self.sessions.get(session.group_id, session.member_id) is not session:
            return
        self.sessions.close(session.group_id, session.member_id)
        await self.partitions.release_member(session.member_id, self.session_keys(session))

    def sync_leadership(self) -> None:
        self.store.sync_leadership()
        self.partitions.forget_not_led()
        self.dead_letters.leadership_changed()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self.store.background = nursery
            self.store.load_if_present()
            await nursery.start(self.partitions.run)
            await nursery.start(self.dead_letters.run)
            task_status.started()
            await trio.sleep_forever()


def attach_share_service(broker: Broker) -> ShareService:
    service = ShareService(broker)
    broker.shares = service
    broker.internal_state_owners.append(service)
    broker.leadership_listeners.append(service.sync_leadership)
    return service
