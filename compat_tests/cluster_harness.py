"""A real Weir cluster for tests: `weir serve --node-id N --etcd URLS` processes
over a real etcd (compat_tests/etcd_harness.py), each a `WeirProcess`."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.etcd_harness import EtcdCluster, EtcdTlsFiles
from compat_tests.harness import SETTINGS_FILE_NAME, WeirProcess, free_ports

# Short timeouts so that failover tests take seconds (the defaults are Kafka's).
TEST_CLUSTER_SETTINGS = """\
broker_session_timeout_ms = 3000
replica_lag_time_max_ms = 4000
"""
WAIT_INTERVAL_S = 0.1
BROKERS_KNOWN_TIMEOUT_S = 30.0


class WeirCluster:
    def __init__(
        self,
        base: Path,
        etcd: EtcdCluster,
        brokers_count: int = 3,
        placement: Callable[[int], tuple[str, tuple[str, ...]]] | None = None,
        settings: str = TEST_CLUSTER_SETTINGS,
        broker_env: Callable[[int], dict[str, str]] | None = None,
        data_dir_of: Callable[[int], Path | None] | None = None,
        settings_for: Callable[[int, int], str] | None = None,
    ) -> None:
        """`placement(node_id)`: (the address a broker listens on, a command prefix
        such as `ip netns exec NS`); default loopback, no prefix. `settings`: every
        broker's settings file (TOML). `broker_env(node_id)`: environment variables
        added to that broker's (LD_PRELOAD...); `data_dir_of(node_id)`: a data dir
        elsewhere (a filesystem of its own), None for the usual. `settings_for(node_id,
        kafka_port)`: a settings file of each broker's own instead of `settings` (its
        listeners name its ports)."""
        self.base = base
        self.etcd = etcd
        self.brokers: dict[int, WeirProcess] = {}
        for node_id in range(1, brokers_count + 1):
            host, prefix = placement(node_id) if placement else ("127.0.0.1", ())
            ports: dict[str, int] = {}
            if placement is not None:  # a namespace of its own: any port is free there
                ports = {"kafka_port": 9092, "http_port": 8090}
            broker_dir = base / f"broker-{node_id}"
            broker_dir.mkdir(parents=True, exist_ok=True)
            settings_file = broker_dir / SETTINGS_FILE_NAME
            if settings_for is not None:
                kafka_port, http_port = free_ports(2)
                ports = {"kafka_port": kafka_port, "http_port": http_port}
                settings_file.write_text(settings_for(node_id, kafka_port))
            else:
                settings_file.write_text(settings)
            data_dir = data_dir_of(node_id) if data_dir_of else None
            self.brokers[node_id] = WeirProcess(
                data_dir or broker_dir / "data",
                broker_dir / "logs",
                extra_args=(
                    "--node-id",
                    str(node_id),
                    "--etcd",
                    etcd.client_urls,
                    "--config",
                    str(settings_file),
                ),
                host=host,
                command_prefix=prefix,
                extra_env=broker_env(node_id) if broker_env else None,
                **ports,
            )

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self) -> None:
        """Every broker at once (as `weir cluster up` does), then until each is ready
        and all are whole (a topic created next finds every broker live)."""
        for broker in self.brokers.values():
            broker.spawn()
        for broker in self.brokers.values():
            broker.wait_ready()
        self.wait_whole()

    def wait_whole(self, timeout_s: float = BROKERS_KNOWN_TIMEOUT_S) -> None:
        """Until every running broker counts every broker live (`kafka_brokers` on its
        /metrics, as HTTP Basic `http_credentials` when security is on): a broker is
        ready as soon as it serves, before the controller may have seen it register."""
        count = len(self.brokers)
        self.wait_until(
            lambda: all(b.metric_samples("kafka_brokers") == {"": count} for b in self.running()),
            timeout_s,
            f"every broker counts {count} live brokers",
        )

    def stop(self) -> None:
        """Stop every broker (SIGTERM to all at once, as `weir cluster up` does, then
        each must exit in time); then no broker may have logged a traceback (a crash
        or an unexpected exception in one of its tasks) in any of its runs."""
        running = [broker for broker in self.brokers.values() if broker.is_running()]
        for broker in running:
            assert broker.process is not None
            broker.process.send_signal(signal.SIGTERM)
        for broker in running:
            broker.stop()
        for broker in self.brokers.values():
            broker.close()
        crashed = [f"{path}:\n{text[-3000:]}" for path, text in self.tracebacks()]
        assert not crashed, "a broker logged a traceback:\n" + "\n".join(crashed)

    def tracebacks(self) -> list[tuple[Path, str]]:
        """(stderr file, its text) of every broker run that logged a traceback."""
        found = []
        for broker in self.brokers.values():
            for path in sorted(broker.log_dir.glob("*.stderr")):
                text = path.read_text(errors="replace")
                if "Traceback" in text:
                    found.append((path, text))
        return found

    def running(self) -> Iterator[WeirProcess]:
        return (b for b in self.brokers.values() if b.is_running())

    def admin(self) -> AdminClient:
        bootstrap = ",".join(b.bootstrap for b in self.running())
        return AdminClient({"bootstrap.servers": bootstrap})

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, **configs: str
    ) -> None:
        admin = self.admin()  # alive until the futures resolve
        futures = admin.create_topics(
            [NewTopic(name, partitions, replication_factor, config=configs)],
            operation_timeout=10,
            request_timeout=15,
        )
        futures[name].result(timeout=20)

    def partitions(self, topic: str, broker: WeirProcess | None = None) -> dict[int, Any]:
        """Partition metadata (leader, replicas, isrs) as one broker reports it
        (`broker`, or any running one)."""
        admin = (
            self.admin() if broker is None else AdminClient({"bootstrap.servers": broker.bootstrap})
        )
        metadata = admin.list_topics(topic, timeout=5)
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            return {}
        return dict(described.partitions)

    def controller_id(self) -> int:
        admin = self.admin()  # alive until the future resolves
        description = admin.describe_cluster(request_timeout=5).result(timeout=10)
        controller = description.controller
        return -1 if controller is None else int(controller.id)

    def leader_of(self, topic: str, partition: int) -> int:
        return int(self.partitions(topic)[partition].leader)

    def wait_until(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if condition():
                    return
            except Exception:  # noqa: BLE001 - a broker may be restarting: ask again
                pass
            time.sleep(WAIT_INTERVAL_S)  # polling other processes: no event to wait on
        raise AssertionError(f"not within {timeout_s:.0f} s: {what}")

    def wait_full_isr(self, topic: str, timeout_s: float = 30.0) -> None:
        """Until every running broker reports every partition led with its full ISR
        (a broker just back from a partition may still report what it knew then)."""

        def full(broker: WeirProcess) -> bool:
            partitions = self.partitions(topic, broker)
            return bool(partitions) and all(
                p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas) for p in partitions.values()
            )

        self.wait_until(
            lambda: all(full(broker) for broker in self.running()),
            timeout_s,
            f"every partition of {topic} has its full ISR on every broker",
        )


def restore(cluster: WeirCluster, timeout_s: float = BROKERS_KNOWN_TIMEOUT_S) -> list[int]:
    """For a cluster that tests share: start again every broker found dead, then wait
    until every broker counts every broker live (the next test begins on a whole
    cluster). Returns the brokers found dead: the test before left them so."""
    dead = [node for node, broker in cluster.brokers.items() if not broker.is_running()]
    for node in dead:
        cluster.brokers[node].start()
    cluster.wait_whole(timeout_s)
    return dead


# Tests of a module that share its cluster, unless marked: `@pytest.mark.own_cluster`
# (registered in compat_tests/conftest.py) on a test that leaves brokers dead on purpose
# or stops the cluster.
OWN_CLUSTER_MARK = "own_cluster"


def shared_or_own_cluster(
    request: pytest.FixtureRequest, module_cluster_fixture: str, own_base: Path
) -> Iterator[WeirCluster]:
    """The body of a module's function-scoped `cluster` fixture: the module's cluster
    (the fixture named `module_cluster_fixture`), restored after the test and the test
    failed if it left a broker dead; or, for a test marked `own_cluster`, a fresh
    cluster under `own_base`, stopped after it."""
    if request.node.get_closest_marker(OWN_CLUSTER_MARK) is not None:
        with running_cluster(own_base) as own:
            yield own
        return
    shared: WeirCluster = request.getfixturevalue(module_cluster_fixture)
    yield shared
    dead = restore(shared)
    if dead:
        pytest.fail(
            f"the test left brokers {dead} of the module's cluster dead (started again): "
            f"mark it {OWN_CLUSTER_MARK}"
        )


Placement = Callable[[int], tuple[str, tuple[str, ...]]]


@contextmanager
def running_cluster(
    base: Path,
    *,
    brokers_count: int = 3,
    etcd_members: int = 1,
    etcd_host: str = "127.0.0.1",
    placement: Placement | None = None,
    settings: str = TEST_CLUSTER_SETTINGS,
    etcd_placement: Callable[[int], tuple[str, tuple[str, ...]]] | None = None,
    broker_env: Callable[[int], dict[str, str]] | None = None,
    data_dir_of: Callable[[int], Path | None] | None = None,
) -> Iterator[WeirCluster]:
    """etcd (`etcd_members`) and `brokers_count` started brokers under `base`, each
    with `settings` as its settings file; everything stopped on exit (a broker that
    logged a traceback fails it). `etcd_placement`, `broker_env`, `data_dir_of`: see
    EtcdCluster.start and WeirCluster."""
    secured = placement is None and etcd_placement is None and _secured_mode()
    tls = internal_tls_files(base / "tls") if secured else None
    etcd = EtcdCluster.start(
        base / "etcd", etcd_members, host=etcd_host, placement=etcd_placement, tls=tls
    )
    try:
        cluster = WeirCluster(
            base / "weir", etcd, brokers_count, placement, settings, broker_env, data_dir_of,
            settings_for=None if tls is None else internal_tls_settings(settings, tls),
        )  # fmt: skip
        if tls is not None:
            for broker in cluster.brokers.values():
                broker.http_credentials = ("broker", INTERNAL_PASSWORD)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
    finally:
        etcd.stop()


# On demand (not CI): `WEIR_TEST_CLUSTER_SECURED=1` runs every loopback cluster of
# `running_cluster` with brokers replicating over an internal SASL_SSL listener (SCRAM,
# the inter-broker user) and etcd over TLS with client certificates, while the tests'
# clients keep a PLAINTEXT listener on each broker's usual port: the earlier cluster
# tests, unchanged, then prove replication and failover over the secured paths.
SECURED_MODE_VARIABLE = "WEIR_TEST_CLUSTER_SECURED"
INTERNAL_PASSWORD = "internal-secret"


def _secured_mode() -> bool:
    return os.environ.get(SECURED_MODE_VARIABLE) == "1"


def internal_tls_files(directory: Path) -> EtcdTlsFiles:
    """A CA, a server certificate for 127.0.0.1 (etcd's and the brokers'), and a client
    certificate (the brokers' to etcd), as PEM files in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("weir-broker")
    files = EtcdTlsFiles(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server-key.pem",
        directory / "client.pem",
        directory / "client-key.pem",
    )
    ca.cert_pem.write_to_path(str(files.ca))
    files.cert.write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(files.key))
    files.client_cert.write_bytes(b"".join(blob.bytes() for blob in client.cert_chain_pems))
    client.private_key_pem.write_to_path(str(files.client_key))
    return files


def internal_tls_settings(settings: str, tls: EtcdTlsFiles) -> Callable[[int, int], str]:
    """Each broker's settings: `settings`, then a [security] table with the tests'
    PLAINTEXT listener on its port and an internal SASL_SSL one beside it."""

    def settings_for(node_id: int, kafka_port: int) -> str:
        (internal_port,) = free_ports(1)
        return (
            settings
            + f"""
[security]
listeners = "PLAINTEXT://127.0.0.1:{kafka_port},INTERNAL://127.0.0.1:{internal_port}"
listener_security_protocol_map = "INTERNAL:SASL_SSL"
inter_broker_listener_name = "INTERNAL"
ssl_certfile = "{tls.cert}"
ssl_keyfile = "{tls.key}"
ssl_cafile = "{tls.ca}"
sasl_enabled_mechanisms = ["SCRAM-SHA-512"]
inter_broker_sasl_username = "broker"
inter_broker_sasl_password = "{INTERNAL_PASSWORD}"
etcd_cafile = "{tls.ca}"
etcd_certfile = "{tls.client_cert}"
etcd_keyfile = "{tls.client_key}"
"""
        )

    return settings_for
