"""`weir queue describe` and `weir queue purge`: a share group seen and emptied as a queue.

`describe --group G`: the group's state, members and their partitions
(ShareGroupDescribe), and per partition the share-partition start offset and the
records the group has not finished with (DescribeShareGroupOffsets v1's lag), with
the partition's end offset. The records by state (available, acquired, delayed,
archived, waiting for or given a dead letter) and the oldest record's age are known
only to the partition's leader, which shows them at `GET /v1/queues/G` on its HTTP
port: with `--http URL` (once per broker) they are read from there and joined to the
rows (`merge_queue_views`).

`purge --group G [--topic T]`: what SQS's PurgeQueue does, as Kafka's
`kafka-share-groups.sh --reset-offsets --to-latest` does it: every partition's start
offset moves to its end offset (AlterShareGroupOffsets), so nothing produced before
is delivered to the group. As in Kafka, the group must have no members (stop the
consumers first); `--dry-run` shows the plan without changing anything.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from weir.cli.cluster import Cluster
from weir.cli.errors import CliError, GroupAction, KafkaCodeError, group_error
from weir.cli.formatting import render_table
from weir.cli.kafka_client import KafkaClient
from weir.cli.offsets import LATEST_TIMESTAMP, list_offsets
from weir.format.errors import ErrorCode
from weir.wire.protocol import ApiKey

DESCRIBE_QUEUE = GroupAction("describe", "describing it")
PURGE_QUEUE = GroupAction("purge", "purging it")
COORDINATOR_WAIT_MS = 5_000


def _coordinator(cluster: Cluster, group_id: str, action: GroupAction) -> KafkaClient:
    try:
        return cluster.group_coordinator(group_id, wait_ms=COORDINATOR_WAIT_MS)
    except KafkaCodeError as exc:
        raise group_error(exc.code, group_id, action) from None


def _share_group(coordinator: KafkaClient, group_id: str, action: GroupAction) -> dict[str, Any]:
    response = coordinator.request(
        ApiKey.SHARE_GROUP_DESCRIBE,
        {"group_ids": [group_id], "include_authorized_operations": False},
    )
    described = response["groups"][0]
    error = int(described["error_code"])
    if error != ErrorCode.NONE:
        raise group_error(error, group_id, action, described.get("error_message"))
    return dict(described)


def _offsets(coordinator: KafkaClient, group_id: str, action: GroupAction) -> list[dict[str, Any]]:
    """Per partition the group has state for: topic, partition, start offset, lag."""
    response = coordinator.request(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        {"groups": [{"group_id": group_id, "topics": None}]},
    )
    group = response["groups"][0]
    error = int(group["error_code"])
    if error != ErrorCode.NONE:
        raise group_error(error, group_id, action, group.get("error_message"))
    rows = []
    for topic in group["topics"]:
        for partition in topic["partitions"]:
            if int(partition["error_code"]) != ErrorCode.NONE:
                continue
            rows.append(
                {
                    "topic": topic["topic_name"],
                    "partition": int(partition["partition_index"]),
                    "start_offset": int(partition["start_offset"]),
                    "lag": int(partition["lag"]),
                }
            )
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def _end_offsets(cluster: Cluster, topic: str, partitions: set[int]) -> dict[int, int]:
    """Each partition's end offset (those whose leader did not answer left out)."""
    lookups = list_offsets(cluster, cluster.topic(topic), sorted(partitions), LATEST_TIMESTAMP)
    return {p: found.offset for p, found in lookups.items() if found.offset is not None}


# What `GET /v1/queues` gives per share partition that describe joins to its rows.
VIEW_FIELDS = (
    "available",
    "acquired",
    "delayed",
    "dead_letter_pending",
    "dead_lettered",
    "oldest_unacknowledged_age_ms",
)
HTTP_TIMEOUT_S = 5.0


def queue_views(urls: list[str], group_id: str) -> list[dict[str, Any]]:
    """The share-partition rows each broker's `GET /v1/queues/{group}` shows."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    rows: list[dict[str, Any]] = []
    for url in urls:
        base = url if "://" in url else f"http://{url}"
        path = f"{base.rstrip('/')}/v1/queues/{urllib.parse.quote(group_id, safe='')}"
        try:
            with opener.open(path, timeout=HTTP_TIMEOUT_S) as response:
                document = json.loads(response.read())
        except (OSError, ValueError) as exc:
            raise CliError(f"{path}: {exc}") from None
        rows.extend(document.get("share_partitions", []))
    return rows


def merge_queue_views(partitions: list[dict[str, Any]], views: list[dict[str, Any]]) -> None:
    """Joins each view row (by topic and partition) to its describe row."""
    by_partition = {(v.get("topic"), v.get("partition")): v for v in views}
    for row in partitions:
        view = by_partition.get((row["topic"], row["partition"]))
        if view is not None:
            row.update({name: view.get(name) for name in VIEW_FIELDS})


def describe_queue(
    cluster: Cluster, group_id: str, http_urls: list[str] | None = None
) -> dict[str, Any]:
    coordinator = _coordinator(cluster, group_id, DESCRIBE_QUEUE)
    group = _share_group(coordinator, group_id, DESCRIBE_QUEUE)
    rows = _offsets(coordinator, group_id, DESCRIBE_QUEUE)
    for topic in sorted({r["topic"] for r in rows}):
        ends = _end_offsets(cluster, topic, {r["partition"] for r in rows if r["topic"] == topic})
        for row in rows:
            if row["topic"] == topic:
                row["end_offset"] = ends.get(row["partition"])
    if http_urls:
        merge_queue_views(rows, queue_views(http_urls, group_id))
    members = [
        {
            "member_id": m["member_id"],
            "client_id": m["client_id"],
            "client_host": m["client_host"],
            "assignment": sorted(
                (tp["topic_name"], sorted(tp["partitions"]))
                for tp in m["assignment"]["topic_partitions"]
            ),
        }
        for m in sorted(group["members"], key=lambda m: m["member_id"])
    ]
    return {
        "group_id": group_id,
        "state": group["group_state"],
        "group_epoch": int(group["group_epoch"]),
        "members": members,
        "partitions": rows,
        "lag": sum(max(r["lag"], 0) for r in rows),
    }


def render_queue(document: Mapping[str, Any]) -> str:
    head = (
        f"share group {document['group_id']}: {document['state']}, "
        f"{len(document['members'])} members, {document['lag']} records not finished\n"
    )
    rows = document["partitions"]
    viewed = any("available" in r for r in rows)
    columns = ["TOPIC", "PARTITION", "START-OFFSET", "END-OFFSET", "LAG"]
    if viewed:
        columns += ["AVAILABLE", "ACQUIRED", "DELAYED", "DLQ-PENDING", "DEAD-LETTERED", "AGE-MS"]
    partitions = render_table(
        columns,
        [
            [r["topic"], r["partition"], r["start_offset"], r.get("end_offset"), r["lag"]]
            + ([r.get(name) for name in VIEW_FIELDS] if viewed else [])
            for r in rows
        ],
    )
    members = render_table(
        ["MEMBER", "CLIENT-ID", "HOST", "ASSIGNMENT"],
        [
            [
                m["member_id"],
                m["client_id"],
                m["client_host"],
                " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in m["assignment"]),
            ]
            for m in document["members"]
        ],
    )
    return head + partitions + ("\n" + members if document["members"] else "")


def purge_queue(
    cluster: Cluster, group_id: str, topic: str | None, *, dry_run: bool
) -> dict[str, Any]:
    coordinator = _coordinator(cluster, group_id, PURGE_QUEUE)
    group = _share_group(coordinator, group_id, PURGE_QUEUE)
    if group["members"]:
        raise CliError(
            f"share group '{group_id}' has {len(group['members'])} members: stop them "
            "before purging it"
        )
    rows = [r for r in _offsets(coordinator, group_id, PURGE_QUEUE) if topic in (None, r["topic"])]
    if topic is not None and not rows:
        raise CliError(f"share group '{group_id}' has no state for topic '{topic}'")
    plan: dict[str, dict[int, int]] = {}
    for name in sorted({r["topic"] for r in rows}):
        partitions = {r["partition"] for r in rows if r["topic"] == name}
        ends = _end_offsets(cluster, name, partitions)
        if set(ends) != partitions:
            raise CliError(f"topic '{name}': the end offsets of {sorted(partitions - set(ends))} "
                           "are unknown (no leader?); retry")  # fmt: skip
        plan[name] = ends
    purged = [
        {"topic": r["topic"], "partition": r["partition"], "start_offset": r["start_offset"],
         "new_start_offset": plan[r["topic"]][r["partition"]]}
        for r in rows
    ]  # fmt: skip
    if not dry_run and plan:
        _alter(coordinator, group_id, plan)
    return {"group_id": group_id, "dry_run": dry_run, "partitions": purged}


def _alter(coordinator: KafkaClient, group_id: str, plan: Mapping[str, Mapping[int, int]]) -> None:
    response = coordinator.request(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        {
            "group_id": group_id,
            "topics": [
                {
                    "topic_name": topic,
                    "partitions": [
                        {"partition_index": p, "start_offset": offset}
                        for p, offset in sorted(partitions.items())
                    ],
                }
                for topic, partitions in plan.items()
            ],
        },
    )
    error = int(response["error_code"])
    if error != ErrorCode.NONE:
        raise group_error(error, group_id, PURGE_QUEUE, response.get("error_message"))
    for topic in response["responses"]:
        for partition in topic["partitions"]:
            if int(partition["error_code"]) != ErrorCode.NONE:
                raise group_error(
                    int(partition["error_code"]),
                    group_id,
                    PURGE_QUEUE,
                    partition.get("error_message"),
                )


def render_purge(document: Mapping[str, Any]) -> str:
    verb = "would move" if document["dry_run"] else "moved"
    table = render_table(
        ["TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET"],
        [
            [r["topic"], r["partition"], r["start_offset"], r["new_start_offset"]]
            for r in document["partitions"]
        ],
    )
    skipped = sum(r["new_start_offset"] - r["start_offset"] for r in document["partitions"])
    return f"{verb} share group {document['group_id']} past {skipped} records\n" + table
