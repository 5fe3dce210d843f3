"""ElectLeaders v0-v2, AlterPartitionReassignments v0, ListPartitionReassignments v0.

On a single node every partition's one replica leads: an election is never
needed, and the only assignment is the broker itself. In a cluster an election is
a compare-and-swap of the partition's state in etcd (`ClusterMember.elect`), and a
reassignment a metadata change the controller finishes once the target replicas
are in sync (see ARCHITECTURE.md, "Replication and the controller").
"""

from __future__ import annotations

from weir.broker.broker import Broker
from weir.broker.handlers.context import Deferred, RequestContext
from weir.controller.controller import ControllerError
from weir.controller.metadata import TopicRecord
from weir.controller.partition_state import check_assignment
from weir.format.errors import ErrorCode
from weir.wire.apis.partitions import ELECTION_TYPE_PREFERRED, ELECTION_TYPE_UNCLEAN
from weir.wire.messages.partitions import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionReassignmentsResponsePartition,
    AlterPartitionReassignmentsResponseResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersResponsePartitionResult,
    ElectLeadersResponseReplicaElectionResult,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponsePartition,
    ListPartitionReassignmentsResponseTopic,
)

# -- ElectLeaders ------------------------------------------------------------------


def handle_elect_leaders(
    ctx: RequestContext, request: ElectLeadersRequest
) -> Deferred[ElectLeadersResponse]:
    broker = ctx.broker
    election_type = request.election_type
    wanted = _election_targets(broker, request)

    async def finish() -> ElectLeadersResponse:
        results: dict[str, list[ElectLeadersResponsePartitionResult]] = {}
        for topic_name, index in wanted:
            error, message = await _elect(broker, topic_name, index, election_type)
            results.setdefault(topic_name, []).append(
                ElectLeadersResponsePartitionResult(
                    partition_id=index, error_code=error, error_message=message
                )
            )
        return ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            replica_election_results=[
                ElectLeadersResponseReplicaElectionResult(topic=name, partition_result=parts)
                for name, parts in results.items()
            ],
        )

    return Deferred(finish)


def _election_targets(broker: Broker, request: ElectLeadersRequest) -> list[tuple[str, int]]:
    """The partitions asked for; null: every partition of every topic."""
    if request.topic_partitions is None:
        return [
            (topic.name, index)
            for topic in broker.controller.topics()
            for index in range(topic.partition_count)
        ]
    return [(t.topic, index) for t in request.topic_partitions for index in t.partitions]


async def _elect(
    broker: Broker, topic_name: str, index: int, election_type: int
) -> tuple[ErrorCode, str | None]:
    topic = broker.controller.topic(topic_name)
    if topic is None or not 0 <= index < topic.partition_count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    if election_type not in (ELECTION_TYPE_PREFERRED, ELECTION_TYPE_UNCLEAN):
        return ErrorCode.INVALID_REQUEST, f"unknown election type {election_type}"
    if broker.cluster is None:
        return ErrorCode.ELECTION_NOT_NEEDED, "a single broker leads every partition"
    error = await broker.cluster.elect(topic, index, unclean=election_type == ELECTION_TYPE_UNCLEAN)
    return error, None if error == ErrorCode.NONE else _election_message(error)


def _election_message(error: ErrorCode) -> str:
    return {
        ErrorCode.ELECTION_NOT_NEEDED: "the preferred replica already leads",
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "the preferred replica is down or not in sync",
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "no live replica can lead",
    }.get(error, error.name)


# -- AlterPartitionReassignments -------------------------------------------------------


def handle_alter_partition_reassignments(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> Deferred[AlterPartitionReassignmentsResponse]:
    broker = ctx.broker

    async def finish() -> AlterPartitionReassignmentsResponse:
        responses = []
        for topic in request.topics:
            checked = {p.partition_index: _check_move(broker, topic.name, p.partition_index,
                                                      p.replicas)  # fmt: skip
                       for p in topic.partitions}  # fmt: skip
            accepted = {i: r for i, (error, _, r) in checked.items() if error == ErrorCode.NONE}
            failure = await _commit_moves(broker, topic.name, accepted) if accepted else None
            partitions = []
            for index, (error, message, _) in checked.items():
                if error == ErrorCode.NONE and failure is not None:
                    error, message = failure
                partitions.append(
                    AlterPartitionReassignmentsResponsePartition(
                        partition_index=index, error_code=error, error_message=message
                    )
                )
            responses.append(
                AlterPartitionReassignmentsResponseResponse(name=topic.name, partitions=partitions)
            )
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, responses=responses
        )

    return Deferred(finish)


def _check_move(
    broker: Broker, topic_name: str, index: int, replicas: list[int] | None
) -> tuple[ErrorCode, str | None, list[int] | None]:
    topic = broker.controller.topic(topic_name)
    if topic is None or not 0 <= index < topic.partition_count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None
    if replicas is None:
        if index not in topic.reassignments:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "nothing to cancel", None
        return ErrorCode.NONE, None, None
    if broker.cluster is None:
        if list(replicas) == [broker.config.node_id]:
            return ErrorCode.NONE, None, list(replicas)
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"a single broker ({broker.config.node_id}) holds every replica",
            None,
        )
    try:
        check_assignment(replicas, [b.node_id for b in broker.cluster.live_brokers()])
    except ControllerError as exc:
        return exc.error_code, exc.message, None
    return ErrorCode.NONE, None, list(replicas)


async def _commit_moves(
    broker: Broker, topic_name: str, moves: dict[int, list[int] | None]
) -> tuple[ErrorCode, str] | None:
    if broker.cluster is None:
        return None  # the only assignment is the one it has
    try:
        await broker.topic_changes.commit_metadata(
            lambda: broker.controller.stage_reassign(topic_name, moves)
        )
    except ControllerError as exc:
        return exc.error_code, exc.message
    except OSError as exc:
        return ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
    return None


# -- ListPartitionReassignments --------------------------------------------------------


def handle_list_partition_reassignments(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    controller = ctx.broker.controller
    if request.topics is None:
        wanted = [(t, sorted(t.reassignments)) for t in controller.topics()]
    else:
        wanted = []
        for asked in request.topics:
            topic = controller.topic(asked.name)
            if topic is not None:
                wanted.append(
                    (topic, [i for i in asked.partition_indexes if i in topic.reassignments])
                )
    topics = [
        ListPartitionReassignmentsResponseTopic(
            name=topic.name, partitions=[_listed(topic, index) for index in indexes]
        )
        for topic, indexes in wanted
        if indexes
    ]
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, topics=topics
    )


def _listed(topic: TopicRecord, index: int) -> ListPartitionReassignmentsResponsePartition:
    target, original = topic.reassignments[index]
    return ListPartitionReassignmentsResponsePartition(
        partition_index=index,
        replicas=list(topic.assignment[index]),
        adding_replicas=[r for r in target if r not in original],
        removing_replicas=[r for r in original if r not in target],
    )
