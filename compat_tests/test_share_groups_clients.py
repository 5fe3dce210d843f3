"""Share groups (KIP-932) with stock clients: confluent-kafka's ShareConsumer, the Java
KafkaShareConsumer (kafka-clients 4.4.0) and franz-go's share consumer, each acknowledging
explicitly, through the scenarios of compat_tests/share_clients/scenarios.py.

The broker is parametrized. `kafka` is Apache Kafka 4.4 (benchmarks/kafka_peer.py), the
reference every expected outcome below was read from; it needs the JVM and Kafka's jars
and runs only with WEIR_TEST_KAFKA_PEER=1:

    WEIR_TEST_KAFKA_PEER=1 PYTHONPATH=$PWD .venv/bin/python -m pytest \\
        compat_tests/test_share_groups_clients.py -q

`weir` is the real `weir serve`, in CI.

Both brokers run with the lower bounds of scenarios.BROKER_MINIMUMS, so that the groups
can have a 2 s lock, a 6 s session and a 1 s heartbeat (scenarios.GROUP_CONFIGS, set
through IncrementalAlterConfigs). The Java and Go drivers are built by scripts/test
(.cache/share-consumer, .cache/go/share-consumer).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.harness import WeirProcess, free_ports
from compat_tests.share_clients import scenarios
from compat_tests.share_clients.scenarios import RECORDS, UnsupportedByClientError

REPO_ROOT = Path(__file__).resolve().parent.parent
KAFKA_PEER_ENV = "WEIR_TEST_KAFKA_PEER"
SHARE_FETCH_API_KEY = 78

pytestmark = pytest.mark.timeout(240)

BROKERS = [
    pytest.param(
        "kafka",
        marks=pytest.mark.skipif(
            os.environ.get(KAFKA_PEER_ENV) != "1",
            reason=f"Apache Kafka 4.4 peer runs only with {KAFKA_PEER_ENV}=1 (not in CI)",
        ),
    ),
    "weir",
]
CLIENTS = ("python", "java", "go")


# --------------------------------------------------------------------------- the broker


def api_versions(bootstrap: str, timeout_s: float = 10.0) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 by hand: api key -> (min, max) version the broker serves."""
    host, port = bootstrap.rsplit(":", 1)
    client_id = b"share-probe"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        data = _recv(sock, size)
    _correlation, error, count = struct.unpack(">ihi", data[:10])
    assert error == 0, f"ApiVersions error {error}"
    served = {}
    for i in range(count):
        key, low, high = struct.unpack(">hhh", data[10 + 6 * i : 16 + 6 * i])
        served[key] = (low, high)
    return served


def _recv(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return data


def _kafka_peer(base: Path) -> Iterator[str]:
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    import kafka_peer  # noqa: PLC0415  (benchmarks/ is not a package)

    node = kafka_peer.start_kafka(
        free_ports(1)[0],
        base,
        extra_properties=scenarios.BROKER_MINIMUMS,
        die_with_parent=True,
        log=lambda _message: None,
    )
    try:
        yield node.bootstrap
    finally:
        node.stop()


def weir_settings(minimums: tuple[str, ...]) -> str:
    """Kafka's `group.share.min.*=N` properties as Weir's TOML settings."""
    lines = []
    for prop in minimums:
        name, value = prop.split("=", 1)
        lines.append(f"{name.replace('.', '_')} = {int(value)}")
    return "\n".join(lines) + "\n"


def _weir(base: Path) -> Iterator[str]:
    proc = WeirProcess.configured(base, weir_settings(scenarios.BROKER_MINIMUMS))
    proc.start()
    try:
        yield proc.bootstrap
    finally:
        proc.close()


@pytest.fixture(scope="module", params=BROKERS)
def share_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The bootstrap of a broker serving share groups (one per module and broker)."""
    base = tmp_path_factory.mktemp(f"share-{request.param}")
    brokers = {"kafka": _kafka_peer, "weir": _weir}
    yield from brokers[request.param](base)


@pytest.fixture
def bootstrap(share_broker: str) -> str:
    served = api_versions(share_broker)
    if SHARE_FETCH_API_KEY not in served:
        pytest.fail(f"the broker does not serve ShareFetch (api key {SHARE_FETCH_API_KEY})")
    return share_broker


@pytest.fixture(params=CLIENTS)
def client(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def each(count: int, value: Any) -> dict[str, Any]:
    return {f"0:{offset}": value for offset in range(count)}


def assert_history_ok(outcome: dict[str, Any], resolutions: dict[str, str]) -> None:
    assert outcome["history"]["violations"] == []
    assert outcome["history"]["resolutions"] == resolutions


ACCEPTED = [["ACCEPT", None]]


def assert_redelivered_once(outcome: dict[str, Any], client: str) -> None:
    """c1 saw every record with count 1, c2 with count 2; with franz-go, 2 or 3: its c1
    keeps fetching in the background while its application sleeps, and may re-acquire
    the expired records (count 2) without ever returning them."""
    if client == "go":
        seen = outcome["deliveries"].values()
        assert all(counts[0] == 1 and counts[1] in (2, 3) for counts in seen), outcome
        assert all(len(counts) == 2 for counts in seen), outcome
    else:
        assert outcome["deliveries"] == each(RECORDS, [1, 2])


# --------------------------------------------------------------------------- scenarios


def test_one_consumer_accepting_everything_sees_each_record_once(
    bootstrap: str, client: str, tmp_path: Path
) -> None:
    outcome = scenarios.accept_all(bootstrap, client, tmp_path)
    assert outcome["deliveries"] == each(RECORDS, [1])
    assert outcome["acks"] == each(RECORDS, ACCEPTED)
    assert outcome["errors"] == []
    assert_history_ok(outcome, each(RECORDS, "accepted"))


def test_released_records_come_back_with_delivery_count_two(
    bootstrap: str, client: str, tmp_path: Path
) -> None:
    outcome = scenarios.release(bootstrap, client, tmp_path)
    released = [["RELEASE", None], ["ACCEPT", None]]
    assert outcome["deliveries"] == {**each(RECORDS, [1]), "0:1": [1, 2], "0:3": [1, 2]}
    assert outcome["acks"] == {**each(RECORDS, ACCEPTED), "0:1": released, "0:3": released}
    # Kafka redelivers released records after the batch they came in, lowest offset first
    assert outcome["order"] == [[o, 1] for o in range(RECORDS)] + [[1, 2], [3, 2]]
    assert_history_ok(outcome, each(RECORDS, "accepted"))


def test_rejected_records_never_come_back(bootstrap: str, client: str, tmp_path: Path) -> None:
    outcome = scenarios.reject(bootstrap, client, tmp_path)
    rejected = [["REJECT", None]]
    assert outcome["deliveries"] == each(RECORDS, [1])
    assert outcome["acks"] == {**each(RECORDS, ACCEPTED), "0:1": rejected, "0:3": rejected}
    assert_history_ok(outcome, {**each(RECORDS, "accepted"), "0:1": "rejected", "0:3": "rejected"})


def test_a_record_released_at_the_delivery_limit_is_archived(
    bootstrap: str, client: str, tmp_path: Path
) -> None:
    outcome = scenarios.delivery_limit(bootstrap, client, tmp_path)
    limit = scenarios.DELIVERY_LIMIT
    assert outcome["deliveries"] == {**each(3, [1]), "0:0": list(range(1, limit + 1))}
    assert outcome["acks"] == {**each(3, ACCEPTED), "0:0": [["RELEASE", None]] * limit}
    assert_history_ok(outcome, {**each(3, "accepted"), "0:0": "delivery_limit"})


def test_an_expired_lock_hands_the_records_to_another_consumer(
    bootstrap: str, client: str, tmp_path: Path
) -> None:
    outcome = scenarios.lock_expiry(bootstrap, client, tmp_path)
    assert outcome["consumers"] == each(RECORDS, ["c1", "c2"])
    # Surprise: c1's ACCEPTs, sent 2.5 lock durations late, after c2 had accepted the
    # records, get no error from Kafka 4.4: they are below the share-partition start
    # offset by then, and ignored.
    assert outcome["acks"] == each(RECORDS, [["ACCEPT", None], ["ACCEPT", None]])
    assert_redelivered_once(outcome, client)
    assert_history_ok(outcome, each(RECORDS, "accepted"))


def test_a_late_acknowledgement_is_an_invalid_record_state(
    bootstrap: str, client: str, tmp_path: Path
) -> None:
    outcome = scenarios.late_ack(bootstrap, client, tmp_path)
    assert outcome["consumers"] == each(RECORDS, ["c1", "c2"])
    assert_redelivered_once(outcome, client)
    assert outcome["acks"] == each(RECORDS, [["ACCEPT", "INVALID_RECORD_STATE"], ["ACCEPT", None]])
    assert_history_ok(outcome, each(RECORDS, "accepted"))


def test_a_killed_members_records_go_to_another_member_at_once(
    bootstrap: str, client: str, tmp_path: Path
) -> None:
    outcome = scenarios.member_death(bootstrap, client, tmp_path)
    assert outcome["consumers"] == each(RECORDS, ["c1", "c2"])
    assert outcome["deliveries"] == each(RECORDS, [1, 2])
    assert outcome["acks"] == each(RECORDS, ACCEPTED)
    # Kafka 4.4 releases a member's acquired records when its share session's connection
    # closes (SIGKILL closes the socket): well before the 15 s lock or the 6 s session
    # timeout. Measured 0.1-0.6 s.
    assert outcome["timing_ms"]["redelivered_after_kill"] < 4000
    assert_history_ok(outcome, each(RECORDS, "accepted"))


def test_many_consumers_on_one_partition_all_get_work(
    bootstrap: str, client: str, tmp_path: Path
) -> None:
    records = 40
    outcome = scenarios.many_consumers(bootstrap, client, tmp_path, consumers=4, records=records)
    assert all(count > 0 for count in outcome["per_consumer"].values()), outcome["per_consumer"]
    assert sum(outcome["per_consumer"].values()) == records
    assert outcome["deliveries"] == each(records, [1])
    assert_history_ok(outcome, each(records, "accepted"))


def test_renew_keeps_the_records_past_their_lock(
    bootstrap: str, client: str, tmp_path: Path
) -> None:
    if client == "python":
        # confluent-kafka 2.16.1 (librdkafka 2.16.0) has no RENEW acknowledge type
        with pytest.raises(UnsupportedByClientError):
            scenarios.renew(bootstrap, client, tmp_path)
        return
    outcome = scenarios.renew(bootstrap, client, tmp_path)
    assert outcome["consumers"] == each(2, ["c1"])
    assert outcome["deliveries"] == each(2, [1])
    assert outcome["acks"] == each(2, [["RENEW", None]] * 3 + [["ACCEPT", None]])
    assert_history_ok(outcome, each(2, "accepted"))
