"""The consumer group endpoints the console uses beyond Confluent's, against a real
`weir serve` with confluent-kafka groups: the group list paged, sorted and
searched on the server; offsets reset as `kafka-consumer-groups.sh --reset-offsets`
does (to-earliest, to-latest, to-datetime, shift-by, to-offset, with a dry run
that changes nothing), refused while the group has members; a group deleted; and
hostile bodies answered 4xx."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition

from compat_tests.harness import WeirProcess

pytestmark = pytest.mark.timeout(120)

CLIENT_WAIT_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("rest-admin-groups"), "")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def http(broker: WeirProcess) -> Iterator[httpx.Client]:
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(base_url=broker.http_url, timeout=30, limits=limits) as client:
        yield client


@pytest.fixture(scope="module")
def groups_path(http: httpx.Client) -> str:
    cluster_id = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    return f"/v3/clusters/{cluster_id}/consumer-groups"


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    document = response.json()
    assert document["error_code"] // 100 == status, document
    return str(document["message"])


def new_topic(http: httpx.Client, groups_path: str, partitions: int = 2) -> str:
    name = f"groups-{uuid.uuid4().hex[:8]}"
    topics = groups_path.replace("consumer-groups", "topics")
    ok(http.post(topics, json={"topic_name": name, "partitions_count": partitions}), 201)
    return name


def produce(broker: WeirProcess, topic: str, counts: dict[int, int], timestamp_ms: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, b"v", partition=partition, timestamp=timestamp_ms + i)
    assert producer.flush(CLIENT_WAIT_S) == 0


def commit(broker: WeirProcess, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Offsets committed by a consumer that never joins: the group is EMPTY."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def committed(http: httpx.Client, groups_path: str, group: str) -> dict[tuple[str, int], int]:
    lags = ok(http.get(f"{groups_path}/{group}/lags"))["data"]
    return {(lag["topic_name"], lag["partition_id"]): lag["current_offset"] for lag in lags}


def reset(http: httpx.Client, groups_path: str, group: str, body: dict[str, Any]) -> httpx.Response:
    return http.post(f"{groups_path}/{group}/reset-offsets", json=body)


def new_offsets(document: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(o["topic_name"], o["partition_id"]): o["new_offset"] for o in document["offsets"]}


# -- the list ------------------------------------------------------------------------------


def test_the_group_list_is_paged_sorted_and_searched_on_the_server(
    broker: WeirProcess, http: httpx.Client, groups_path: str
) -> None:
    topic = new_topic(http, groups_path, partitions=1)
    produce(broker, topic, {0: 10})
    prefix = f"paged-{uuid.uuid4().hex[:6]}"
    groups = [f"{prefix}-{i}" for i in range(5)]
    for i, group in enumerate(groups):
        commit(broker, group, {(topic, 0): i * 2})  # lag 10, 8, 6, 4, 2

    whole = ok(http.get(groups_path))
    assert set(whole["metadata"]) == {"self", "next"}, "no paging asked: the list as before"
    assert "total_lag" not in whole["data"][0]

    first = ok(http.get(groups_path, params={"q": prefix.upper(), "page_size": 2}))
    assert first["metadata"]["total"] == 5
    assert (first["metadata"]["page"], first["metadata"]["page_size"]) == (1, 2)
    assert [g["consumer_group_id"] for g in first["data"]] == groups[:2]
    row = first["data"][0]
    assert (row["state"], row["type"], row["members_count"], row["total_lag"]) == (
        "EMPTY",
        "classic",
        0,
        10,
    )
    assert row["coordinator_id"] == 1
    second = ok(http.get(first["metadata"]["next"]))
    assert [g["consumer_group_id"] for g in second["data"]] == groups[2:4]
    last = ok(http.get(second["metadata"]["next"]))
    assert [g["consumer_group_id"] for g in last["data"]] == groups[4:]
    assert last["metadata"]["next"] is None

    by_lag = ok(http.get(groups_path, params={"q": prefix, "sort": "total_lag", "order": "desc"}))
    assert [g["total_lag"] for g in by_lag["data"]] == [10, 8, 6, 4, 2]
    by_lag_up = ok(http.get(groups_path, params={"q": prefix, "sort": "total_lag"}))
    assert [g["consumer_group_id"] for g in by_lag_up["data"]] == groups[::-1]
    by_id_down = ok(http.get(groups_path, params={"q": prefix, "order": "desc"}))
    assert [g["consumer_group_id"] for g in by_id_down["data"]] == groups[::-1]
    none = ok(http.get(groups_path, params={"q": "no-such-group-anywhere"}))
    assert (none["data"], none["metadata"]["total"], none["metadata"]["next"]) == ([], 0, None)


@pytest.mark.parametrize(
    "params",
    [
        {"page_size": "501"},
        {"page_size": "0"},
        {"page": "0"},
        {"page": "-1"},
        {"page": "1e9"},
        {"sort": "password"},
        {"order": "sideways"},
        {"q": "x" * 1001},
    ],
)
def test_bad_paging_parameters_are_400(
    http: httpx.Client, groups_path: str, params: dict[str, str]
) -> None:
    error(http.get(groups_path, params=params), 400)


# -- reset ---------------------------------------------------------------------------------


def make_idle_group(broker: WeirProcess, http: httpx.Client, groups_path: str) -> tuple[str, str]:
    topic = new_topic(http, groups_path)
    produce(broker, topic, {0: 10}, timestamp_ms=1000)
    produce(broker, topic, {1: 4}, timestamp_ms=5000)
    group = f"idle-{uuid.uuid4().hex[:8]}"
    commit(broker, group, {(topic, 0): 3, (topic, 1): 1})
    return topic, group


@pytest.fixture
def idle_group(broker: WeirProcess, http: httpx.Client, groups_path: str) -> tuple[str, str]:
    """A group with no members and offsets 3 and 1 on a topic of 10 and 4 records
    (timestamps 1000+i on partition 0, 5000+i on partition 1)."""
    return make_idle_group(broker, http, groups_path)


@pytest.fixture(scope="module")
def hostile_target(broker: WeirProcess, http: httpx.Client, groups_path: str) -> tuple[str, str]:
    return make_idle_group(broker, http, groups_path)


def test_a_dry_run_shows_the_new_offsets_and_changes_nothing(
    http: httpx.Client, groups_path: str, idle_group: tuple[str, str]
) -> None:
    topic, group = idle_group
    before = committed(http, groups_path, group)
    planned = ok(reset(http, groups_path, group, {"strategy": "latest", "dry_run": True}))
    assert planned["kind"] == "KafkaConsumerGroupOffsetReset"
    assert planned["dry_run"] is True
    assert planned["offsets"] == [
        {"topic_name": topic, "partition_id": 0, "current_offset": 3, "new_offset": 10,
         "log_start_offset": 0, "log_end_offset": 10},
        {"topic_name": topic, "partition_id": 1, "current_offset": 1, "new_offset": 4,
         "log_start_offset": 0, "log_end_offset": 4},
    ]  # fmt: skip
    # Without dry_run, as Kafka's tool without --execute: a dry run too.
    assert ok(reset(http, groups_path, group, {"strategy": "earliest"}))["dry_run"] is True
    assert committed(http, groups_path, group) == before


def test_each_reset_strategy_moves_the_offsets_as_kafkas_tool_does(
    http: httpx.Client, groups_path: str, idle_group: tuple[str, str]
) -> None:
    topic, group = idle_group
    p0, p1 = (topic, 0), (topic, 1)

    def apply(body: dict[str, Any]) -> dict[tuple[str, int], int]:
        answered = ok(reset(http, groups_path, group, {**body, "dry_run": False}))
        assert answered["dry_run"] is False
        now = committed(http, groups_path, group)
        assert new_offsets(answered).items() <= now.items()
        return now

    assert apply({"strategy": "latest"}) == {p0: 10, p1: 4}
    assert apply({"strategy": "earliest"}) == {p0: 0, p1: 0}
    assert apply({"strategy": "shift_by", "shift_by": 3}) == {p0: 3, p1: 3}
    # Past either end of the log: the nearer end (Kafka's clamping).
    assert apply({"strategy": "shift_by", "shift_by": -5}) == {p0: 0, p1: 0}
    assert apply({"strategy": "offset", "offset": 7}) == {p0: 7, p1: 4}
    # The first record at or after the time; none after it: the log end.
    assert apply({"strategy": "timestamp", "timestamp_ms": 1004}) == {p0: 4, p1: 0}
    assert apply({"strategy": "timestamp", "timestamp_ms": 5002}) == {p0: 10, p1: 2}
    # One topic's named partition only.
    only_p1 = {"strategy": "earliest", "topics": [{"topic_name": topic, "partition_ids": [1]}]}
    assert apply(only_p1) == {p0: 10, p1: 0}


def test_a_named_topic_resets_partitions_the_group_has_no_offset_on(
    broker: WeirProcess, http: httpx.Client, groups_path: str, idle_group: tuple[str, str]
) -> None:
    topic, group = idle_group
    other = new_topic(http, groups_path, partitions=1)
    produce(broker, other, {0: 6})
    body = {"strategy": "latest", "topics": [{"topic_name": other}], "dry_run": False}
    planned = ok(reset(http, groups_path, group, body))["offsets"]
    assert [(o["topic_name"], o["current_offset"], o["new_offset"]) for o in planned] == [
        (other, None, 6)
    ]
    assert committed(http, groups_path, group)[(other, 0)] == 6
    assert committed(http, groups_path, group)[(topic, 0)] == 3
    # Shifting needs an offset to shift from (Kafka refuses too).
    other2 = new_topic(http, groups_path, partitions=1)
    body = {"strategy": "shift_by", "shift_by": 1, "topics": [{"topic_name": other2}]}
    assert "no committed offset" in error(reset(http, groups_path, group, body), 400)


def test_reset_is_refused_while_the_group_has_members(
    broker: WeirProcess, http: httpx.Client, groups_path: str
) -> None:
    topic = new_topic(http, groups_path, partitions=1)
    produce(broker, topic, {0: 5})
    group = f"active-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + CLIENT_WAIT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer was never assigned"
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        for body in ({"strategy": "earliest", "dry_run": False}, {"strategy": "earliest"}):
            message = error(reset(http, groups_path, group, body), 409)
            assert "inactive" in message and "STABLE" in message
        assert committed(http, groups_path, group) == {(topic, 0): 2}
        assert "has members" in error(http.delete(f"{groups_path}/{group}"), 409)
    finally:
        consumer.close()
    ok(reset(http, groups_path, group, {"strategy": "earliest", "dry_run": False}))
    assert committed(http, groups_path, group) == {(topic, 0): 0}


def test_a_deleted_group_and_its_offsets_are_gone(
    http: httpx.Client, groups_path: str, idle_group: tuple[str, str]
) -> None:
    _, group = idle_group
    ok(http.delete(f"{groups_path}/{group}"), 204)
    error(http.get(f"{groups_path}/{group}"), 404)
    listed = ok(http.get(groups_path, params={"q": group}))
    assert listed["data"] == []
    error(http.delete(f"{groups_path}/{group}"), 404)


@pytest.mark.parametrize(
    "body",
    [
        [],
        "earliest",
        {},
        {"strategy": "yesterday"},
        {"strategy": "earliest", "dry_run": "no"},
        {"strategy": "earliest", "execute": True},
        {"strategy": "shift_by"},
        {"strategy": "shift_by", "shift_by": "1"},
        {"strategy": "shift_by", "shift_by": 2**64},
        {"strategy": "shift_by", "shift_by": True},
        {"strategy": "offset", "offset": -1},
        {"strategy": "timestamp", "timestamp_ms": -5},
        {"strategy": "timestamp", "timestamp_ms": 1.5},
        {"strategy": "earliest", "topics": "all"},
        {"strategy": "earliest", "topics": []},
        {"strategy": "earliest", "topics": [{"topic_name": "../x"}]},
        {"strategy": "earliest", "topics": [{"topic_name": "t", "partition_ids": [-1]}]},
        {"strategy": "earliest", "topics": [{"topic_name": "t", "partition_ids": [2**40]}]},
        {"strategy": "earliest", "topics": [{"topic_name": "t", "partition_ids": []}]},
        {"strategy": "earliest", "topics": [{"topic_name": "t", "extra": 1}]},
        {"strategy": "earliest", "topics": [{"topic_name": f"t{i}"} for i in range(1001)]},
    ],
)
def test_hostile_reset_bodies_are_400(
    http: httpx.Client, groups_path: str, hostile_target: tuple[str, str], body: object
) -> None:
    _, group = hostile_target
    before = committed(http, groups_path, group)
    error(http.post(f"{groups_path}/{group}/reset-offsets", json=body), 400)
    assert committed(http, groups_path, group) == before


def test_reset_of_unknown_topics_partitions_and_malformed_requests_is_4xx(
    http: httpx.Client, groups_path: str, idle_group: tuple[str, str]
) -> None:
    topic, group = idle_group
    path = f"{groups_path}/{group}/reset-offsets"
    body = {"strategy": "earliest", "topics": [{"topic_name": "no-such-topic-here"}]}
    error(http.post(path, json=body), 404)
    body = {"strategy": "earliest", "topics": [{"topic_name": topic, "partition_ids": [9]}]}
    error(http.post(path, json=body), 404)
    error(http.post(path, content=b"{not json"), 400)
    error(http.post(path, content=b"[" * 100_000 + b"]" * 100_000), 413)
    error(
        http.post(
            path, content=b'{"strategy": "earliest"}', headers={"content-type": "text/plain"}
        ),
        415,
    )


def test_a_share_groups_offsets_are_not_reset_or_deleted_as_a_consumer_group(
    broker: WeirProcess, http: httpx.Client, groups_path: str
) -> None:
    topic = new_topic(http, groups_path, partitions=1)
    group = f"queue-{uuid.uuid4().hex[:8]}"
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    try:
        share_groups = groups_path.replace("consumer-groups", "share-groups")
        deadline = time.monotonic() + CLIENT_WAIT_S
        while http.get(f"{share_groups}/{group}").status_code != 200:
            assert time.monotonic() < deadline, "the share group never showed"
            consumer.poll(0.2)
    finally:
        consumer.close()
    body = {"strategy": "earliest", "topics": [{"topic_name": topic}], "dry_run": False}
    assert "share group" in error(reset(http, groups_path, group, body), 404)
    error(http.delete(f"{groups_path}/{group}"), 404)
    assert (
        http.get(f"{groups_path.replace('consumer-groups', 'share-groups')}/{group}").status_code
        == 200
    )
