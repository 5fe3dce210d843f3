"""`weir cluster status | brokers | partitions` against a single broker and a real
three-broker cluster, and `weir cluster up` (etcd and brokers in the foreground)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.cluster_harness import WeirCluster, running_cluster
from compat_tests.harness import (
    WeirProcess,
    clean_environment,
    free_ports,
    interruptible_child,
    run_cli,
    unique_topic_name,
    weir_executable,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def three_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirCluster]:
    with running_cluster(tmp_path_factory.mktemp("cluster-cli")) as cluster:
        yield cluster


def cli_json(bootstrap: str, *args: str) -> dict[str, object]:
    result = run_cli("--bootstrap", bootstrap, "--format", "json", *args)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def test_single_broker_is_its_own_controller(broker: WeirProcess) -> None:
    status = cli_json(broker.bootstrap, "cluster", "status")
    assert status["controller_id"] == 1
    assert status["brokers_count"] == 1
    assert status["under_replicated_partitions_count"] == 0
    brokers = cli_json(broker.bootstrap, "cluster", "brokers")["brokers"]
    assert isinstance(brokers, list) and len(brokers) == 1
    assert brokers[0]["node_id"] == 1 and brokers[0]["is_controller"] is True


def test_cluster_partitions_lists_replicas_and_isr(three_brokers: WeirCluster) -> None:
    topic = unique_topic_name("cli")
    bootstrap = three_brokers.brokers[1].bootstrap
    created = run_cli("--bootstrap", bootstrap, "topic", "create", topic,
                      "--partitions", "3", "--replication-factor", "3")  # fmt: skip
    assert created.returncode == 0, created.stderr
    three_brokers.wait_full_isr(topic)
    rows = cli_json(bootstrap, "cluster", "partitions", "--topic", topic)["partitions"]
    assert isinstance(rows, list)
    assert [row["partition"] for row in rows] == [0, 1, 2]
    for row in rows:
        assert sorted(row["replicas"]) == [1, 2, 3]
        assert sorted(row["isr"]) == [1, 2, 3]
        assert row["leader"] == row["replicas"][0]
    status = cli_json(bootstrap, "cluster", "status")
    assert status["brokers_count"] == 3
    assert status["controller_id"] in (1, 2, 3)
    brokers = cli_json(bootstrap, "cluster", "brokers")["brokers"]
    assert isinstance(brokers, list)
    assert [b["is_controller"] for b in brokers].count(True) == 1
    text = run_cli("--bootstrap", bootstrap, "cluster", "partitions", "--topic", topic)
    assert text.stdout.splitlines()[0].split() == [
        "TOPIC", "PARTITION", "LEADER", "LEADER-EPOCH", "REPLICAS", "ISR", "OFFLINE-REPLICAS",
    ]  # fmt: skip


def test_group_list_shows_the_groups_of_every_coordinator(three_brokers: WeirCluster) -> None:
    """Each broker coordinates the groups whose offsets partition it leads: the list
    must come from all of them, whichever broker the command starts with."""
    topic = unique_topic_name("groups")
    bootstrap = three_brokers.brokers[1].bootstrap
    created = run_cli("-b", bootstrap, "topic", "create", topic, "--partitions", "1",
                      "--replication-factor", "3")  # fmt: skip
    assert created.returncode == 0, created.stderr
    groups = [f"{topic}-g{i}" for i in range(8)]
    for group in groups:
        reset = run_cli("-b", bootstrap, "group", "reset-offsets", group, "--topic", topic,
                        "--to-earliest", "--execute")  # fmt: skip
        assert reset.returncode == 0, reset.stderr
    for node in three_brokers.brokers.values():
        listed = cli_json(node.bootstrap, "group", "list")["groups"]
        assert isinstance(listed, list)
        assert {g["group_id"] for g in listed} >= set(groups)


def test_under_replicated_filter_shows_a_dead_brokers_partitions(
    three_brokers: WeirCluster,
) -> None:
    cluster = three_brokers
    topic = unique_topic_name("urp")
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr(topic)
    cluster.brokers[3].kill()
    try:
        bootstrap = cluster.brokers[1].bootstrap

        def under_replicated() -> bool:
            rows = cli_json(bootstrap, "cluster", "partitions", "--under-replicated")["partitions"]
            assert isinstance(rows, list)
            return {r["partition"] for r in rows if r["topic"] == topic} == {0, 1, 2}

        cluster.wait_until(under_replicated, 20, "three under-replicated partitions")
        status = cli_json(bootstrap, "cluster", "status")
        assert status["under_replicated_partitions_count"] >= 3
        assert status["brokers_count"] == 2
    finally:
        cluster.brokers[3].start()  # the module's cluster: whole again for what follows


def test_cluster_up_starts_etcd_and_brokers_and_ctrl_c_says_what_it_stopped(
    tmp_path: Path,
) -> None:
    kafka_port, http_port, etcd_port = _port_block()
    process = subprocess.Popen(
        [weir_executable(), "cluster", "up", "--brokers", "2", "--data-dir", str(tmp_path),
         "--base-port", str(kafka_port), "--http-base-port", str(http_port),
         "--etcd-port", str(etcd_port), "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_environment(),
        preexec_fn=interruptible_child,
    )  # fmt: skip
    stderr = b""
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.stderr.read() if process.stderr else ""
        document = json.loads(line)
        assert [b["node_id"] for b in document["brokers"]] == [1, 2]
        status = cli_json(document["brokers"][0]["kafka"], "cluster", "status")
        assert status["brokers_count"] == 2
        pids = [b["pid"] for b in document["brokers"]]
        etcd_pid = document["etcd_pid"]
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C
        _, stderr = process.communicate(timeout=40)
    assert process.returncode == 0, stderr.decode()
    for pid in pids:
        assert not _alive(pid), f"broker {pid} outlived `weir cluster up`"
    said = stderr.decode().splitlines()
    assert said[0] == "stopping broker 1, broker 2 and etcd..."
    assert said[1:] == [
        f"stopped broker 1 (pid {pids[0]}, exit code 0)",
        f"stopped broker 2 (pid {pids[1]}, exit code 0)",
        f"stopped etcd (pid {etcd_pid}, ended by SIGTERM)",
        f"data and logs kept in {tmp_path}",
    ]


def test_cluster_up_without_etcd_installed_says_how_to_get_it(tmp_path: Path) -> None:
    env = clean_environment()
    env["PATH"] = str(Path(weir_executable()).parent)  # the venv's bin: no etcd there
    started = time.monotonic()
    result = subprocess.run(
        [weir_executable(), "cluster", "up", "--data-dir", str(tmp_path)],
        capture_output=True, env=env, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert b"apt-get install etcd-server" in result.stderr
    assert time.monotonic() - started < 20


def _port_block() -> tuple[int, int, int]:
    """Free ports for two brokers' Kafka and HTTP listeners and etcd's two ports,
    each pair consecutive (the command numbers them from a base)."""
    for _ in range(50):
        base = free_ports(1)[0]
        if base > 60000:
            continue
        wanted = [base, base + 1, base + 10, base + 11, base + 20, base + 21]
        if all(_free(p) for p in wanted):
            return base, base + 10, base + 20
    raise AssertionError("no block of free ports")


def _free(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
