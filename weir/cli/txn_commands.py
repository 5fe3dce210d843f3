"""`weir txn list|describe|abort|find-hanging`: transactions, as Kafka's `kafka-transactions.sh`.

- `list` asks every broker (each lists the transactional ids it coordinates) with
  ListTransactions, filtered by state, producer id, duration (v1, KIP-994) and a
  transactional-id regular expression (v2, KIP-1152).
- `describe` finds the transactional id's coordinator (FindCoordinator, key type 1)
  and asks it with DescribeTransactions.
- `abort` writes an abort marker for one producer's open transaction on one
  partition: WriteTxnMarkers (`transaction_result` false) to the partition's leader,
  as Kafka's `Admin.abortTransaction` does. The producer is named with its id, epoch
  and coordinator epoch, or found with DescribeProducers by the offset its open
  transaction starts at.
- `find-hanging` lists the open transactions (DescribeProducers) of a broker's or a
  topic's partitions that have run longer than the longest transaction timeout, and
  reports those the transaction coordinator no longer knows as including that
  partition (ListTransactions by producer id, then DescribeTransactions): a marker
  for them will never come, so they hold the partition's last stable offset back.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weir.cli.cluster import (
    COORDINATOR_KEY_TYPE_TRANSACTION,
    LEADER_MOVED_ERRORS,
    Cluster,
    TopicMetadata,
)
from weir.cli.errors import (
    BrokerProtocolError,
    CliError,
    failed_to,
    kafka_error,
    no_such_partition,
    with_code,
)
from weir.cli.formatting import counted, render_table
from weir.cli.kafka_client import KafkaClient
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

COORDINATOR_WAIT_MS = 5_000
FIND_HANGING_TIMEOUT_MINUTES_DEFAULT = 15
MINUTE_MS = 60_000
# Partitions per DescribeProducers request (Kafka's tool uses the same batch size).
DESCRIBE_PRODUCERS_BATCH = 500
NO_DURATION_FILTER = -1
LEADER_RETRY_WAIT_MS = 3_000
LEADER_RETRY_INTERVAL_S = 0.2
# The oldest ListTransactions version that has each filter.
DURATION_FILTER_VERSION = 1
PATTERN_FILTER_VERSION = 2


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- list ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ListFilters:
    """ListTransactions' filters; empty or None: not filtered on."""

    states: tuple[str, ...] = ()
    producer_ids: tuple[int, ...] = ()
    duration_ms: int | None = None
    transactional_id_pattern: str | None = None


def list_request(filters: ListFilters, version: int, node_id: int) -> dict[str, Any]:
    """The ListTransactions body for `version`; a filter the version lacks is refused
    rather than dropped (an unfiltered answer would be wrong)."""
    if filters.duration_ms is not None and version < DURATION_FILTER_VERSION:
        raise CliError(
            f"broker {node_id} cannot filter transactions by duration "
            f"(it has ListTransactions up to v{version}; KIP-994's filter needs v1)"
        )
    if filters.transactional_id_pattern is not None and version < PATTERN_FILTER_VERSION:
        raise CliError(
            f"broker {node_id} cannot filter transactions by transactional id pattern "
            f"(it has ListTransactions up to v{version}; KIP-1152's filter needs v2)"
        )
    return {
        "state_filters": list(filters.states),
        "producer_id_filters": list(filters.producer_ids),
        "duration_filter": NO_DURATION_FILTER
        if filters.duration_ms is None
        else filters.duration_ms,
        "transactional_id_pattern": filters.transactional_id_pattern,
    }


def list_transactions(cluster: Cluster, filters: ListFilters) -> dict[str, Any]:
    """Every transactional id of the cluster that matches `filters`: each broker lists
    those it coordinates, so every broker is asked (as Kafka's admin client does)."""
    cluster.metadata([])
    rows: list[dict[str, Any]] = []
    unknown_states: set[str] = set()
    for node_id in cluster.node_ids():
        client = cluster.broker(node_id)
        body = list_request(filters, client.version(ApiKey.LIST_TRANSACTIONS), node_id)
        response = client.request(ApiKey.LIST_TRANSACTIONS, body)
        error = int(response["error_code"])
        if error == ErrorCode.INVALID_REGULAR_EXPRESSION:
            raise with_code(
                f"--transactional-id-pattern {filters.transactional_id_pattern!r} is not a "
                "regular expression the broker accepts",
                error,
            )
        if error != ErrorCode.NONE:
            raise failed_to(f"list the transactions of broker {node_id}", error)
        unknown_states.update(str(s) for s in response["unknown_state_filters"])
        rows += [
            {
                "transactional_id": str(t["transactional_id"]),
                "coordinator": node_id,
                "producer_id": int(t["producer_id"]),
                "state": str(t["transaction_state"]),
            }
            for t in response["transaction_states"]
        ]
    rows.sort(key=lambda r: (r["transactional_id"], r["coordinator"]))
    return {"transactions": rows, "unknown_state_filters": sorted(unknown_states)}


def render_transaction_list(document: Mapping[str, Any]) -> str:
    rows = [
        (t["transactional_id"], t["coordinator"], t["producer_id"], t["state"])
        for t in document["transactions"]
    ]
    text = (
        render_table(("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"), rows)
        if rows
        else "no transactions\n"
    )
    unknown = document["unknown_state_filters"]
    if unknown:
        text += f"note: the brokers know no state {', '.join(unknown)}\n"
    return text


# -- describe -------------------------------------------------------------------------


def describe_transaction(cluster: Cluster, transactional_id: str) -> dict[str, Any]:
    coordinator_id, described = _describe(cluster, transactional_id)
    error = int(described["error_code"])
    if error != ErrorCode.NONE:
        raise transaction_error(error, transactional_id)
    return transaction_document(described, coordinator_id, _now_ms())


def _describe(cluster: Cluster, transactional_id: str) -> tuple[int, Any]:
    """(the coordinator's node id, its DescribeTransactions answer for the id)."""
    node_id = cluster.coordinator_id(
        transactional_id,
        COORDINATOR_KEY_TYPE_TRANSACTION,
        f"transactional id '{transactional_id}'",
        wait_ms=COORDINATOR_WAIT_MS,
    )
    response = cluster.broker(node_id).request(
        ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]}
    )
    for described in response["transaction_states"]:
        if described["transactional_id"] == transactional_id:
            return node_id, described
    raise BrokerProtocolError(
        f"broker {node_id} did not describe transactional id '{transactional_id}'"
    )


def transaction_document(described: Any, coordinator_id: int, now_ms: int) -> dict[str, Any]:
    """A DescribeTransactions answer for one transactional id, for people and scripts."""
    start_ms = int(described["transaction_start_time_ms"])
    partitions = [
        {"topic": str(t["topic"]), "partition": int(p)}
        for t in sorted(described["topics"], key=lambda t: str(t["topic"]))
        for p in sorted(t["partitions"])
    ]
    return {
        "transactional_id": str(described["transactional_id"]),
        "coordinator": coordinator_id,
        "producer_id": int(described["producer_id"]),
        "producer_epoch": int(described["producer_epoch"]),
        "state": str(described["transaction_state"]),
        "transaction_timeout_ms": int(described["transaction_timeout_ms"]),
        "transaction_start_time_ms": None if start_ms < 0 else start_ms,
        "transaction_duration_ms": None if start_ms < 0 else max(0, now_ms - start_ms),
        "partitions": partitions,
    }


def render_transaction_description(document: Mapping[str, Any]) -> str:
    headers = ("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE",
               "TIMEOUT-MS", "START-TIME-MS", "DURATION-MS", "PARTITIONS")  # fmt: skip
    row = (
        document["transactional_id"],
        document["coordinator"],
        document["producer_id"],
        document["producer_epoch"],
        document["state"],
        document["transaction_timeout_ms"],
        document["transaction_start_time_ms"],
        document["transaction_duration_ms"],
        partitions_text(document["partitions"]),
    )
    return render_table(headers, [row])


def partitions_text(partitions: Sequence[Mapping[str, Any]]) -> str:
    """`orders:0,1;audit:3`, `-` for none."""
    by_topic: dict[str, list[int]] = {}
    for p in partitions:
        by_topic.setdefault(p["topic"], []).append(p["partition"])
    parts = [f"{t}:{','.join(str(p) for p in ps)}" for t, ps in by_topic.items()]
    return ";".join(parts) or "-"


def transaction_error(code: int, transactional_id: str) -> CliError:
    if code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
        return with_code(f"transactional id '{transactional_id}' does not exist", code)
    return failed_to(f"describe transactional id '{transactional_id}'", code)


# -- abort ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AbortSpec:
    """The open transaction to abort: one producer's, on one partition."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int | None = None


def abort_spec_from_arguments(
    topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> AbortSpec:
    """The producer named on the command line. A coordinator epoch of -1 (what
    DescribeProducers says of a producer that never ended a transaction) is sent as
    0, which no coordinator epoch is below."""
    return AbortSpec(topic, partition, producer_id, producer_epoch, max(0, coordinator_epoch))


def abort_spec_for_start_offset(
    topic: str, partition: int, start_offset: int, producers: Iterable[Mapping[str, Any]]
) -> AbortSpec:
    """The producer whose open transaction on the partition starts at `start_offset`
    (from DescribeProducers' active producers)."""
    for producer in producers:
        if int(producer["current_txn_start_offset"]) == start_offset:
            return AbortSpec(
                topic,
                partition,
                int(producer["producer_id"]),
                int(producer["producer_epoch"]),
                max(0, int(producer["coordinator_epoch"])),
                start_offset=start_offset,
            )
    raise CliError(
        f"no open transaction starts at offset {start_offset} on topic '{topic}' "
        f"partition {partition}"
    )


def find_abort_spec(cluster: Cluster, topic: str, partition: int, start_offset: int) -> AbortSpec:
    producers = describe_producers(cluster, topic, partition)
    return abort_spec_for_start_offset(topic, partition, start_offset, producers)


def describe_producers(cluster: Cluster, topic: str, partition: int) -> list[Any]:
    """The active producers of one partition, from its leader."""
    metadata = _partition_topic(cluster, topic, partition)
    found = _describe_producers_at_leaders(cluster, metadata, [partition])
    error, producers = found[partition]
    if error != ErrorCode.NONE:
        raise kafka_error(
            error, topic=topic, partition=partition, action="describe the producers of"
        )
    return producers


def abort_transaction(cluster: Cluster, spec: AbortSpec) -> dict[str, Any]:
    """Write the abort marker at the partition's leader, finding the leader again
    while it moves."""
    marker = {
        "producer_id": spec.producer_id,
        "producer_epoch": spec.producer_epoch,
        "transaction_result": False,
        "topics": [{"name": spec.topic, "partition_indexes": [spec.partition]}],
        "coordinator_epoch": spec.coordinator_epoch,
    }
    deadline = time.monotonic() + LEADER_RETRY_WAIT_MS / 1000
    while True:
        leader = _partition_leader(cluster, spec.topic, spec.partition)
        response = leader.request(ApiKey.WRITE_TXN_MARKERS, {"markers": [marker]})
        error = _marker_error(response, spec)
        if error not in LEADER_MOVED_ERRORS or time.monotonic() >= deadline:
            break
        time.sleep(LEADER_RETRY_INTERVAL_S)
    if error != ErrorCode.NONE:
        raise abort_error(error, spec)
    return {
        "topic": spec.topic,
        "partition": spec.partition,
        "producer_id": spec.producer_id,
        "producer_epoch": spec.producer_epoch,
        "coordinator_epoch": spec.coordinator_epoch,
        "start_offset": spec.start_offset,
        "aborted": True,
    }


def _marker_error(response: Any, spec: AbortSpec) -> int:
    """The partition's error code in a WriteTxnMarkers answer for exactly `spec`."""
    for marker in response["markers"]:
        if int(marker["producer_id"]) != spec.producer_id:
            continue
        for topic in marker["topics"]:
            for partition in topic["partitions"]:
                if topic["name"] == spec.topic and int(partition["partition_index"]) == (
                    spec.partition
                ):
                    return int(partition["error_code"])
    raise BrokerProtocolError(
        f"the WriteTxnMarkers answer has no result for producer {spec.producer_id} on "
        f"topic '{spec.topic}' partition {spec.partition}"
    )


def abort_error(code: int, spec: AbortSpec) -> CliError:
    subject = (
        f"the transaction of producer {spec.producer_id} (epoch {spec.producer_epoch}) on "
        f"topic '{spec.topic}' partition {spec.partition}"
    )
    if code == ErrorCode.INVALID_PRODUCER_EPOCH:
        return with_code(
            f"cannot abort {subject}: the producer has a newer epoch than {spec.producer_epoch}",
            code,
        )
    if code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
        return with_code(
            f"cannot abort {subject}: coordinator epoch {spec.coordinator_epoch} is older "
            "than the one the partition has seen",
            code,
        )
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return with_code(f"cannot abort {subject}: not authorized for the cluster", code)
    return failed_to(f"abort {subject}", code)


def render_aborted(document: Mapping[str, Any]) -> str:
    return (
        f"aborted the transaction of producer {document['producer_id']} "
        f"(epoch {document['producer_epoch']}) on topic '{document['topic']}' "
        f"partition {document['partition']}\n"
    )


def _partition_topic(cluster: Cluster, topic: str, partition: int) -> TopicMetadata:
    metadata = cluster.topic(topic)
    if partition not in {p.partition for p in metadata.partitions}:
        raise no_such_partition(topic, partition, len(metadata.partitions))
    return metadata


def _partition_leader(cluster: Cluster, topic: str, partition: int) -> KafkaClient:
    metadata = _partition_topic(cluster, topic, partition)
    leader = next(p.leader for p in metadata.partitions if p.partition == partition)
    return cluster.broker(leader)


# -- find-hanging ---------------------------------------------------------------------


@dataclass(frozen=True)
class OpenTransaction:
    """A producer's open transaction on one partition (DescribeProducers)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int


def open_transactions(
    topic: str,
    partition: int,
    producers: Iterable[Mapping[str, Any]],
    *,
    now_ms: int,
    max_transaction_timeout_ms: int,
) -> list[OpenTransaction]:
    """The producers with an open transaction on the partition whose last write is
    older than the longest transaction timeout: the coordinator should have ended them."""
    return [
        OpenTransaction(
            topic,
            partition,
            int(p["producer_id"]),
            int(p["producer_epoch"]),
            int(p["coordinator_epoch"]),
            int(p["current_txn_start_offset"]),
            int(p["last_timestamp"]),
        )
        for p in producers
        if int(p["current_txn_start_offset"]) >= 0
        and now_ms - int(p["last_timestamp"]) > max_transaction_timeout_ms
    ]


def hanging(
    candidates: Iterable[OpenTransaction],
    transactional_ids: Mapping[int, str],
    descriptions: Mapping[str, Any | None],
) -> list[OpenTransaction]:
    """The candidates no marker will end: their producer id has no transactional id
    at any coordinator, or it has no transaction, or its transaction does not include
    the partition (DescribeTransactions lists the partitions of an ongoing transaction,
    and while it prepares to end, those still without a marker)."""
    found = []
    for candidate in candidates:
        transactional_id = transactional_ids.get(candidate.producer_id)
        description = None if transactional_id is None else descriptions.get(transactional_id)
        if description is None or (candidate.topic, candidate.partition) not in {
            (str(t["topic"]), int(p)) for t in description["topics"] for p in t["partitions"]
        }:
            found.append(candidate)
    return found


def find_hanging(
    cluster: Cluster,
    *,
    broker_id: int | None,
    topic: str | None,
    partition: int | None,
    max_transaction_timeout_ms: int,
) -> dict[str, Any]:
    now_ms = _now_ms()
    candidates: list[OpenTransaction] = []
    for metadata, partitions in _search_scope(cluster, broker_id, topic, partition):
        found = _describe_producers_of(cluster, broker_id, metadata, partitions)
        for index, (error, producers) in sorted(found.items()):
            if error != ErrorCode.NONE:
                raise kafka_error(
                    error, topic=metadata.name, partition=index, action="describe the producers of"
                )
            candidates += open_transactions(
                metadata.name,
                index,
                producers,
                now_ms=now_ms,
                max_transaction_timeout_ms=max_transaction_timeout_ms,
            )
    result: list[OpenTransaction] = []
    if candidates:
        transactional_ids = _transactional_ids(cluster, {c.producer_id for c in candidates})
        descriptions = {
            transactional_id: _description_or_none(cluster, transactional_id)
            for transactional_id in set(transactional_ids.values())
        }
        result = hanging(candidates, transactional_ids, descriptions)
    return {
        "max_transaction_timeout_ms": max_transaction_timeout_ms,
        "hanging": [hanging_row(t, now_ms) for t in result],
    }


def hanging_row(transaction: OpenTransaction, now_ms: int) -> dict[str, Any]:
    return {
        "topic": transaction.topic,
        "partition": transaction.partition,
        "producer_id": transaction.producer_id,
        "producer_epoch": transaction.producer_epoch,
        "coordinator_epoch": transaction.coordinator_epoch,
        "start_offset": transaction.start_offset,
        "last_timestamp_ms": transaction.last_timestamp_ms,
        "duration_minutes": (now_ms - transaction.last_timestamp_ms) // MINUTE_MS,
    }


def render_hanging(document: Mapping[str, Any]) -> str:
    rows = [
        (r["topic"], r["partition"], r["producer_id"], r["producer_epoch"],
         r["coordinator_epoch"], r["start_offset"], r["last_timestamp_ms"], r["duration_minutes"])
        for r in document["hanging"]
    ]  # fmt: skip
    if not rows:
        return "no hanging transactions\n"
    headers = ("TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH", "COORDINATOR-EPOCH",
               "START-OFFSET", "LAST-TIMESTAMP-MS", "DURATION-MIN")  # fmt: skip
    return render_table(headers, rows) + (
        f"{counted(len(rows), 'hanging transaction')}; abort one with `weir txn abort "
        "--topic T --partition P --start-offset N`\n"
    )


def _search_scope(
    cluster: Cluster, broker_id: int | None, topic: str | None, partition: int | None
) -> list[tuple[TopicMetadata, list[int]]]:
    """The partitions to search: the topic's (or that one partition), or every
    non-internal topic's; with `broker_id`, only those it has a replica of."""
    if topic is not None:
        topics = [cluster.topic(topic)]
        if partition is not None and partition not in {p.partition for p in topics[0].partitions}:
            raise no_such_partition(topic, partition, len(topics[0].partitions))
    else:
        topics = [t for t in cluster.metadata(None) if not t.is_internal]
    if broker_id is not None and broker_id not in cluster.node_ids():
        raise CliError(f"broker {broker_id} is not in the cluster metadata")
    scope = []
    for metadata in sorted(topics, key=lambda t: t.name):
        partitions = [
            p.partition
            for p in metadata.partitions
            if (partition is None or p.partition == partition)
            and (broker_id is None or broker_id in p.replicas)
        ]
        if partitions:
            scope.append((metadata, partitions))
    return scope


ProducersByPartition = dict[int, tuple[int, list[Any]]]  # index -> (error code, producers)


def _describe_producers_of(
    cluster: Cluster, broker_id: int | None, topic: TopicMetadata, partitions: Sequence[int]
) -> ProducersByPartition:
    """The producers of `partitions`, as replica `broker_id` knows them (as Kafka's
    tool asks); where that broker answers only for partitions it leads, or with no
    `broker_id`, as each partition's leader knows them."""
    if broker_id is None:
        return _describe_producers_at_leaders(cluster, topic, partitions)
    found = _describe_producers_at(cluster, broker_id, topic, partitions)
    not_led = [i for i, (error, _) in found.items() if error == ErrorCode.NOT_LEADER_OR_FOLLOWER]
    if not_led:
        found.update(_describe_producers_at_leaders(cluster, topic, not_led))
    return found


def _describe_producers_at(
    cluster: Cluster, node_id: int, topic: TopicMetadata, partitions: Sequence[int]
) -> ProducersByPartition:
    client = cluster.broker(node_id)
    found: ProducersByPartition = {}
    for start in range(0, len(partitions), DESCRIBE_PRODUCERS_BATCH):
        batch = list(partitions[start : start + DESCRIBE_PRODUCERS_BATCH])
        response = client.request(
            ApiKey.DESCRIBE_PRODUCERS,
            {"topics": [{"name": topic.name, "partition_indexes": batch}]},
        )
        for t in response["topics"]:
            for p in t["partitions"]:
                found[int(p["partition_index"])] = (
                    int(p["error_code"]),
                    list(p["active_producers"]),
                )
    return found


def _describe_producers_at_leaders(
    cluster: Cluster, topic: TopicMetadata, partitions: Sequence[int]
) -> ProducersByPartition:
    by_leader: dict[int, list[int]] = {}
    for p in topic.partitions:
        if p.partition in partitions:
            by_leader.setdefault(p.leader, []).append(p.partition)
    found: ProducersByPartition = {}
    for leader, led in sorted(by_leader.items()):
        found.update(_describe_producers_at(cluster, leader, topic, led))
    return found


def _transactional_ids(cluster: Cluster, producer_ids: set[int]) -> dict[int, str]:
    """The transactional id each producer id has at its coordinator, where it has one."""
    listed = list_transactions(cluster, ListFilters(producer_ids=tuple(sorted(producer_ids))))
    return {
        t["producer_id"]: t["transactional_id"]
        for t in listed["transactions"]
        if t["producer_id"] in producer_ids
    }


def _description_or_none(cluster: Cluster, transactional_id: str) -> Any | None:
    """The id's transaction at its coordinator; None if the coordinator has no such id."""
    _, described = _describe(cluster, transactional_id)
    error = int(described["error_code"])
    if error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
        return None
    if error != ErrorCode.NONE:
        raise transaction_error(error, transactional_id)
    return described
