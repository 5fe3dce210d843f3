"""The Apache Kafka Java client (org.apache.kafka:kafka-clients) against the real `weir`.

`compat_tests/java/` is a Maven project of JUnit 5 tests (producer with every codec,
classic and KIP-848 groups, a SIGKILLed member, assign/seek/pause, read_committed, the
AdminClient, transactions); this wrapper runs it once per client version against a fresh
broker, fails with the names and messages of its failing tests, and checks that the broker
neither counted a request error nor closed a connection during the run (a client the
broker cannot serve shows up there even when the client retries and passes).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import WeirProcess
from compat_tests.maven import (
    JAVA_SUITE,
    JAVA_SUITE_BUILDS,
    require_maven_build,
    run_offline,
    surefire_outcomes,
    tail,
)

# The newest 4.x client, and the one Spark 4.2.0's Kafka connector pulls in.
CLIENT_VERSIONS = ["4.4.0", "3.9.2"]
SUITE_TIMEOUT_S = 200
# KIP-848's consumer is generally available from 4.0; on 3.9 it is a preview, not tested.
SKIPPED_ON = {
    "3.9.2": {
        "ConsumerProtocolGroupTest.brokerAssignsAndMembersRevokeOnlyWhatMoves(String)",
        'KilledMemberTest.killedMembersPartitionsMoveToTheSurvivor(String) "consumer"',
        "PatternSubscriptionTest.patternSubscriptionFollowsMatchingTopicsIncludingNewOnes(String)"
        ' group.protocol="consumer"',
        # SubscriptionPattern (broker-side RE2/J regex) is new in kafka-clients 4.0.
        "PatternSubscriptionTest.brokerResolvesSubscriptionPatternIncludingTopicsCreatedLater",
        # kafka-clients 3.9 has no GROUP config resource (type 32): the test assumes it.
        "BrokerFeaturesTest.aGroupsConsumerTimeoutsAreDescribedAndAltered",
    },
}
# Group timings the suite relies on (docs/java.md): KIP-848 sessions of 6 s with 500 ms
# heartbeats (their lower bounds lowered with them), so a killed member's partitions
# move within seconds; a short initial rebalance delay for new classic groups.
GROUP_SETTINGS_TOML = (
    "group_consumer_session_timeout_ms = 6000\n"
    "group_consumer_heartbeat_interval_ms = 500\n"
    "group_consumer_min_session_timeout_ms = 6000\n"
    "group_consumer_min_heartbeat_interval_ms = 500\n"
    "group_initial_rebalance_delay_ms = 300\n"
    "offsets_topic_partition_count = 5\n"
)


def start_group_broker(base: Path) -> WeirProcess:
    """A fresh broker with the suite's group timings."""
    proc = WeirProcess.configured(base, GROUP_SETTINGS_TOML)
    proc.start()
    return proc


@pytest.fixture
def java_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WeirProcess]:
    proc = start_group_broker(tmp_path / "weir")
    request.node.__dict__.setdefault("_weir_processes", []).append(proc)
    try:
        yield proc
    finally:
        proc.close()


@pytest.mark.timeout(SUITE_TIMEOUT_S + 30)
@pytest.mark.parametrize("kafka_version", CLIENT_VERSIONS)
def test_java_client_suite_passes_and_every_request_is_served(
    java_broker: WeirProcess, kafka_version: str, tmp_path: Path
) -> None:
    build = JAVA_SUITE_BUILDS / f"kafka-clients-{kafka_version}" / "test-classes"
    mvn = require_maven_build(build)
    reports = tmp_path / "surefire-reports"
    result = run_offline(
        mvn,
        f"-Dkafka.version={kafka_version}",
        f"-Dweir.bootstrap={java_broker.bootstrap}",
        f"-Dweir.reports.dir={reports}",
        "test",
        pom=JAVA_SUITE / "pom.xml",
        timeout_s=SUITE_TIMEOUT_S,
    )
    outcomes = surefire_outcomes(reports)
    broken = [o for o in outcomes if o.outcome in ("failed", "error")]
    if broken or result.returncode != 0:
        details = "\n\n".join(f"{o.outcome.upper()}: {o.name}\n{o.message[:3000]}" for o in broken)
        pytest.fail(
            f"kafka-clients {kafka_version}: {len(broken)} of {len(outcomes)} tests failed "
            f"(mvn exit code {result.returncode})\n\n{details}\n\n--- mvn output ---\n"
            f"{tail(result.stdout)}"
        )
    skipped = {o.name for o in outcomes if o.outcome == "skipped"}
    assert skipped == SKIPPED_ON.get(kafka_version, set())
    passed = [o for o in outcomes if o.outcome == "passed"]
    # Every test class ran (a class that failed to load would report nothing).
    classes = {o.name.split(".", 1)[0] for o in passed}
    assert classes >= {
        "AdminTest",
        "BrokerFeaturesTest",
        "ClassicGroupTest",
        "ClientVersionTest",
        "ConsumerTest",
        "KilledMemberTest",
        "PatternSubscriptionTest",
        "ProducerTest",
        "TransactionsTest",
    }, classes
    assert java_broker.connection_trouble() == {}
