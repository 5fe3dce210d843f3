"""Apache Kafka as a benchmark peer: one KRaft node from Maven Central's jars, and Kafka's tools.

Run from the repository root:

    .venv/bin/python benchmarks/kafka_peer.py fetch
    .venv/bin/python benchmarks/kafka_peer.py start --port 19092 --dir /tmp/kafka-peer

``fetch`` runs Maven once (``benchmarks/kafka-peer/pom.xml``,
``dependency:copy-dependencies``) and leaves two classpaths in the git-ignored
``.cache/kafka-peer/``: ``broker/`` (``org.apache.kafka:kafka_2.13`` 4.4.0 and its
runtime dependencies) and ``tools/`` (``org.apache.kafka:kafka-tools`` 4.3.1, whose
``ProducerPerformance``/``ConsumerPerformance`` are ``kafka-producer-perf-test`` and
``kafka-consumer-perf-test``). The Maven repository goes to ``.cache/maven``. A
second call downloads nothing: the jars are reused while the poms are unchanged.

``start`` fetches when needed, formats ``--dir`` (the first time; a restart on the
same dir keeps its data) and runs one node in KRaft
combined mode (``process.roles=broker,controller``) on ``127.0.0.1:--port``, with a
controller listener on another free loopback port; Kafka's defaults otherwise,
except that the internal topics have replication factor 1 (a single node could
not create them with the default 3), as in the ``config/server.properties`` Kafka
ships for one node. The JVM runs with the heap and GC options of Kafka's own
start script (``-Xmx1G -Xms1G``, G1). It prints the bootstrap address on stdout
once the broker is serving and stays up until it gets SIGTERM or SIGINT (it then
stops Kafka cleanly) or its parent dies. The broker's log is ``--dir``/kafka.log.

``start --security sasl_ssl`` (or ``ssl``) secures the listener on ``--port`` instead:
SASL_SSL with SCRAM-SHA-256/512, PLAIN and OAUTHBEARER (RS256 JWTs checked against a
JWKS file), or SSL requiring a client certificate (mutual TLS), with the certificates,
users and tokens of ``compat_tests/security_harness.py`` (written to ``--dir``/security
the first time), SCRAM users added at format time (``kafka-storage format
--add-scram``), Kafka's ``StandardAuthorizer`` with ``User:admin`` as the super user
(ACLs deny everyone else until granted) and the controller listener left PLAINTEXT. It
writes ``--dir``/client.properties: the admin's client settings for that listener (for
``--command-config`` and the perf tools). Without ``--security`` nothing changes.

``benchmarks/run.py`` and its ``side_by_side`` package import :func:`ensure_jars`,
:func:`start_kafka` and the perf-tool helpers from here.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
POM_DIR = REPO_ROOT / "benchmarks" / "kafka-peer"
POMS = (POM_DIR / "pom.xml", POM_DIR / "broker" / "pom.xml", POM_DIR / "tools" / "pom.xml")
LIB_DIR = REPO_ROOT / ".cache" / "kafka-peer"
MAVEN_REPO = REPO_ROOT / ".cache" / "maven"
FETCHED_MARKER = LIB_DIR / "fetched-poms.sha256"

KAFKA_VERSION = "4.4.0"
TOOLS_VERSION = "4.3.1"
# bin/kafka-server-start.sh and bin/kafka-run-class.sh of the Kafka distribution
BROKER_JVM_OPTS = (
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# bin/kafka-producer-perf-test.sh and bin/kafka-consumer-perf-test.sh
TOOL_JVM_OPTS = ("-Xmx512M", "-server", "-XX:+UseG1GC", "-Djava.awt.headless=true")
SERVER_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
PRODUCER_PERF_MAIN = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF_MAIN = "org.apache.kafka.tools.ConsumerPerformance"
# KafkaRaftServer logs this once the broker is unfenced and serving clients
SERVER_STARTED_LINE = "Kafka Server started"
NODE_ID = 1
STOP_GRACE_S = 30.0

BROKER_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
"""
TOOLS_LOG4J = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""


class KafkaPeerError(RuntimeError):
    pass


# --------------------------------------------------------------------------- jars


@dataclass(frozen=True)
class KafkaJars:
    broker_dir: Path
    tools_dir: Path

    @property
    def broker_classpath(self) -> str:
        return f"{self.broker_dir}/*"

    @property
    def tools_classpath(self) -> str:
        return f"{self.tools_dir}/*"


def poms_digest() -> str:
    digest = hashlib.sha256()
    for pom in POMS:
        digest.update(pom.read_bytes())
    return digest.hexdigest()


def ensure_jars(log: Callable[[str], None] = print) -> KafkaJars:
    """The broker and tools classpaths, fetched by Maven when absent or when a pom changed."""
    jars = KafkaJars(LIB_DIR / "broker", LIB_DIR / "tools")
    wanted = poms_digest()
    if FETCHED_MARKER.exists() and FETCHED_MARKER.read_text().strip() == wanted:
        return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaPeerError("mvn not found: install Maven 3.8+ (apt-get install maven)")
    # a changed pom must not leave other versions' jars on the classpath
    for directory in (jars.broker_dir, jars.tools_dir):
        shutil.rmtree(directory, ignore_errors=True)
    FETCHED_MARKER.unlink(missing_ok=True)
    cmd = [
        mvn,
        "--batch-mode",
        "--quiet",
        "-f",
        str(POMS[0]),
        f"-Dmaven.repo.local={MAVEN_REPO}",
        "dependency:copy-dependencies",
    ]
    log(f"fetching Kafka {KAFKA_VERSION} and kafka-tools {TOOLS_VERSION}: {' '.join(cmd)}")
    done = subprocess.run(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        raise KafkaPeerError(f"Maven failed (exit {done.returncode}): {' '.join(cmd)}")
    for directory, jar in (
        (jars.broker_dir, f"kafka_2.13-{KAFKA_VERSION}.jar"),
        (jars.tools_dir, f"kafka-tools-{TOOLS_VERSION}.jar"),
    ):
        if not (directory / jar).is_file():
            raise KafkaPeerError(f"Maven finished but {directory / jar} is missing")
    FETCHED_MARKER.write_text(wanted + "\n")
    return jars


# --------------------------------------------------------------------------- broker


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def random_cluster_id() -> str:
    """Kafka's Uuid text form: 16 random bytes, URL-safe base64 without padding."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka never hands out ids that read as a flag
            return text


SECURITY_MODES = ("plaintext", "sasl_ssl", "ssl")
SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# A client certificate's subject CN=alice,OU=eng,O=Weir is the principal User:alice
SSL_PRINCIPAL_MAPPING_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"
OAUTH_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}


@dataclass(frozen=True)
class PeerSecurity:
    """A secured peer: its listeners and the PEM files, users and JWKS it trusts.

    `listeners` are (security protocol, port) pairs, each listener named after its
    protocol; the first is the inter-broker listener (a SASL one logs in with PLAIN as
    `admin_user`; an SSL one presents the broker's certificate, principal
    User:broker). SSL listeners require a client certificate; SASL listeners enable
    every mechanism of SASL_MECHANISMS. `users` (name -> password) become SCRAM-SHA-256
    and SCRAM-SHA-512 credentials at format time and PLAIN users in the JAAS config.
    """

    listeners: tuple[tuple[str, int], ...]
    keystore_file: Path  # the broker's PKCS#8 key then certificate chain, PEM
    ca_file: Path  # the CA client certificates must chain to, PEM
    users: dict[str, str]
    admin_user: str = "admin"
    jwks_file: Path | None = None
    jwt_issuer: str = ""
    jwt_audience: str = ""
    scram_iterations: int = 4096

    @property
    def super_users(self) -> str:
        # the broker (its certificate on SSL) and ANONYMOUS: what reaches the PLAINTEXT
        # controller listener, the broker's own registration and heartbeats included
        return f"User:{self.admin_user};User:broker;User:ANONYMOUS"

    def bootstrap(self, protocol: str) -> str:
        return next(f"127.0.0.1:{port}" for name, port in self.listeners if name == protocol)


def security_properties(security: PeerSecurity) -> list[str]:
    """server.properties lines for `security` (after the listener lines)."""
    inter_broker = security.listeners[0][0]
    lines = [
        f"inter.broker.listener.name={inter_broker}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={security.keystore_file}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={security.ca_file}",
        f"ssl.principal.mapping.rules={SSL_PRINCIPAL_MAPPING_RULES}",
        f"authorizer.class.name={STANDARD_AUTHORIZER}",
        f"super.users={security.super_users}",
        "allow.everyone.if.no.acl.found=false",
    ]
    plain_users = " ".join(f'user_{name}="{secret}"' for name, secret in security.users.items())
    admin_password = security.users[security.admin_user]
    for protocol, _port in security.listeners:
        prefix = f"listener.name.{protocol.lower()}."
        if protocol == "SSL":
            lines.append(f"{prefix}ssl.client.auth=required")
            continue
        if not protocol.startswith("SASL_"):
            continue
        mechanisms = [m for m in SASL_MECHANISMS if m != "OAUTHBEARER" or security.jwks_file]
        lines.append(f"{prefix}sasl.enabled.mechanisms={','.join(mechanisms)}")
        for mechanism in mechanisms:
            module = JAAS_MODULES[mechanism]
            options = ""
            if mechanism == "PLAIN":
                options = (
                    f' username="{security.admin_user}" password="{admin_password}" {plain_users}'
                )
            lines.append(
                f"{prefix}{mechanism.lower()}.sasl.jaas.config={module} required{options};"
            )
        if security.jwks_file is not None:
            lines.append(
                f"{prefix}oauthbearer.sasl.server.callback.handler.class={OAUTH_VALIDATOR}"
            )
    if inter_broker.startswith("SASL_"):
        lines.append("sasl.mechanism.inter.broker.protocol=PLAIN")
    if security.jwks_file is not None:
        lines += [
            f"sasl.oauthbearer.jwks.endpoint.url={security.jwks_file.resolve().as_uri()}",
            f"sasl.oauthbearer.expected.issuer={security.jwt_issuer}",
            f"sasl.oauthbearer.expected.audience={security.jwt_audience}",
        ]
    return lines


def security_jvm_options(security: PeerSecurity | None) -> list[str]:
    """Kafka 4.x reads an OAuth JWKS file only when a system property allows it."""
    if security is None or security.jwks_file is None:
        return []
    jwks = security.jwks_file.resolve()
    return [
        f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks.as_uri()}",
        f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.files={jwks}",
    ]


def scram_format_arguments(security: PeerSecurity | None) -> list[str]:
    """kafka-storage format's --add-scram arguments: every user, both mechanisms."""
    if security is None:
        return []
    args = []
    for name, password in security.users.items():
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            args += [
                "--add-scram",
                f"{mechanism}=[name={name},password={password},"
                f"iterations={security.scram_iterations}]",
            ]
    return args


def server_properties(
    port: int,
    controller_port: int,
    log_dir: Path,
    security: PeerSecurity | None = None,
    extra: Sequence[str] = (),
) -> str:
    """One node, broker and controller in one process; Kafka's defaults for everything else.

    With `security`, its listeners replace PLAINTEXT on `port` (`port` is unused).
    `extra` are more `key=value` lines, last (a repeated key overrides an earlier one)."""
    controller = f"CONTROLLER://127.0.0.1:{controller_port}"
    if security is None:
        broker = f"PLAINTEXT://127.0.0.1:{port}"
        protocol_map = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        listener_lines = ["inter.broker.listener.name=PLAINTEXT"]
    else:
        broker = ",".join(f"{name}://127.0.0.1:{p}" for name, p in security.listeners)
        protocol_map = ",".join(
            [*(f"{name}:{name}" for name, _p in security.listeners), "CONTROLLER:PLAINTEXT"]
        )
        listener_lines = security_properties(security)
    return "\n".join(
        [
            "process.roles=broker,controller",
            f"node.id={NODE_ID}",
            f"controller.quorum.voters={NODE_ID}@127.0.0.1:{controller_port}",
            f"listeners={broker},{controller}",
            f"advertised.listeners={broker}",
            f"listener.security.protocol.map={protocol_map}",
            *listener_lines,
            "controller.listener.names=CONTROLLER",
            f"log.dirs={log_dir}",
            # the internal topics' default replication factor is 3: one node needs 1
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            *extra,
            "",
        ]
    )


def _die_with_parent() -> None:
    """preexec_fn: the kernel sends the child SIGTERM when the process that started it dies."""
    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def stop_process(proc: subprocess.Popen[bytes], grace_s: float) -> dict[str, object]:
    """SIGTERM, wait up to `grace_s`, then SIGKILL. Returns how it went (a broker
    benchmark reports it): exit code, seconds to stop, whether it was killed."""
    if proc.poll() is not None:
        return {"exit_code": proc.returncode, "already_exited": True}
    started = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=grace_s)
        killed = False
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
        killed = True
    return {
        "exit_code": code,
        "stop_s": round(time.perf_counter() - started, 3),
        "sigkilled": killed,
    }


@dataclass
class KafkaNode:
    proc: subprocess.Popen[bytes]
    bootstrap: str
    data_dir: Path
    log_path: Path
    cmd: list[str]
    startup_s: float

    def stop(self, grace_s: float = STOP_GRACE_S) -> dict[str, object]:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL after `grace_s`."""
        return stop_process(self.proc, grace_s)


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"


def format_storage(
    jars: KafkaJars,
    java: str,
    properties: Path,
    log_path: Path,
    security: PeerSecurity | None = None,
) -> None:
    """kafka-storage format: a fresh cluster id, this node's metadata log, its features
    (and with `security`, its users' SCRAM credentials)."""
    cmd = [
        java,
        *TOOL_JVM_OPTS,
        "-cp",
        jars.broker_classpath,
        STORAGE_TOOL_MAIN,
        "format",
        "--config",
        str(properties),
        "--cluster-id",
        random_cluster_id(),
        *scram_format_arguments(security),
    ]
    shown = [re.sub(r"password=[^,\]]*", "password=***", arg) for arg in cmd]
    with log_path.open("ab") as log_file:
        log_file.write(f"$ {' '.join(shown)}\n".encode())
        log_file.flush()
        done = subprocess.run(
            cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False
        )
    if done.returncode != 0:
        raise KafkaPeerError(f"kafka-storage format failed; log tail:\n{_log_tail(log_path)}")


def start_kafka(
    port: int,
    data_dir: Path,
    *,
    controller_port: int | None = None,
    java: str = "java",
    jars: KafkaJars | None = None,
    log_path: Path | None = None,
    startup_timeout_s: float = 120.0,
    die_with_parent: bool = False,
    log: Callable[[str], None] = print,
    security: PeerSecurity | None = None,
    extra_properties: Sequence[str] = (),
) -> KafkaNode:
    """Format `data_dir` if needed, start Kafka on 127.0.0.1:`port`, return once it serves.

    `data_dir` holds server.properties, the log4j2 config and the Kafka log dir
    (`data/`); the broker's console output (its log) goes to `log_path`, by default
    `data_dir`/kafka.log. With `security` the node serves `security.listeners` instead
    of PLAINTEXT on `port` (`port` must be the first of them: the bootstrap returned).
    `extra_properties` are more server.properties lines (`key=value`).
    """
    jars = jars or ensure_jars(log)
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    controller_port = controller_port or free_port()
    properties = data_dir / "server.properties"
    if security is not None and security.listeners[0][1] != port:
        raise KafkaPeerError(f"port {port} is not the first listener of {security.listeners}")
    properties.write_text(
        server_properties(port, controller_port, data_dir / "data", security, extra_properties)
    )
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(BROKER_LOG4J)
    log_path = log_path or data_dir / "kafka.log"
    log_path.touch()
    if not (data_dir / "data" / "meta.properties").exists():
        # a formatted dir keeps its cluster id: Kafka starts on it again as it is
        format_storage(jars, java, properties, log_path, security)
    cmd = [
        java,
        *BROKER_JVM_OPTS,
        *security_jvm_options(security),
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        jars.broker_classpath,
        SERVER_MAIN,
        str(properties),
    ]
    log(f"starting kafka: {' '.join(cmd)}")
    started = time.perf_counter()
    log_offset = log_path.stat().st_size
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(
            cmd,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=data_dir,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
    node = KafkaNode(proc, f"127.0.0.1:{port}", data_dir, log_path, cmd, 0.0)
    deadline = time.monotonic() + startup_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise KafkaPeerError(
                f"kafka exited with code {proc.returncode}; log tail:\n{_log_tail(log_path)}"
            )
        with log_path.open("rb") as log_file:
            log_file.seek(log_offset)
            if SERVER_STARTED_LINE.encode() in log_file.read():
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                    node.startup_s = time.perf_counter() - started
                    return node
        time.sleep(0.1)
    node.stop()
    raise KafkaPeerError(
        f"kafka not serving after {startup_timeout_s}s; log tail:\n{_log_tail(log_path)}"
    )


# --------------------------------------------------------------------------- perf tools


def tool_command(jars: KafkaJars, java: str, main_class: str, log4j: Path) -> list[str]:
    return [
        java,
        *TOOL_JVM_OPTS,
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        jars.tools_classpath,
        main_class,
    ]


def write_tools_log4j(directory: Path) -> Path:
    path = directory / "tools-log4j2.properties"
    path.write_text(TOOLS_LOG4J)
    return path


def producer_perf_args(
    bootstrap: str,
    topic: str,
    records: int,
    record_size: int,
    properties: dict[str, str],
) -> list[str]:
    """kafka-producer-perf-test's arguments: as fast as it can (--throughput -1)."""
    return [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(record_size),
        "--throughput",
        "-1",
        "--print-metrics",
        "--command-property",
        *(f"{key}={value}" for key, value in properties.items()),
    ]


# "1000000 records sent, 512345.6 records/sec (48.86 MB/sec), 20.12 ms avg latency,
#  150.00 ms max latency, 18 ms 50th, 40 ms 95th, 60 ms 99th, 90 ms 99.9th."
_PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \([\d.]+ MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, "
    r"(?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99\.9th"
)


def parse_producer_perf(output: str) -> dict[str, float]:
    """The final summary line of kafka-producer-perf-test (latency: send() to ack)."""
    matches = list(_PRODUCER_SUMMARY.finditer(output))
    if not matches:
        raise KafkaPeerError(f"no summary line in producer perf output:\n{output[-2000:]}")
    last = matches[-1]
    return {
        "records": int(last["records"]),
        "records_per_s": float(last["rate"]),
        "latency_avg_ms": float(last["avg"]),
        "latency_max_ms": float(last["max"]),
        "latency_p50_ms": float(last["p50"]),
        "latency_p95_ms": float(last["p95"]),
        "latency_p99_ms": float(last["p99"]),
        "latency_p999_ms": float(last["p999"]),
    }


# "producer-metrics:records-per-request-avg:{client-id=perf-producer-client}   : 4056.795"
_PRODUCER_METRIC = re.compile(r"^producer-metrics:(?P<name>[\w-]+):\{[^}]*\}\s*:\s*(?P<value>\S+)$")
PRODUCER_METRICS_KEPT = (
    "records-per-request-avg",
    "request-latency-avg",
    "batch-size-avg",
    "record-queue-time-avg",
    "request-rate",
)


def parse_producer_metrics(output: str) -> dict[str, float]:
    """A few of the Java producer's own metrics (--print-metrics), over its last 30 s."""
    kept: dict[str, float] = {}
    for line in output.splitlines():
        match = _PRODUCER_METRIC.match(line.strip())
        if match and match["name"] in PRODUCER_METRICS_KEPT:
            with contextlib.suppress(ValueError):
                kept[match["name"]] = float(match["value"])
    return kept


def consumer_perf_args(
    bootstrap: str, topic: str, records: int, group: str, timeout_ms: int
) -> list[str]:
    """kafka-consumer-perf-test's arguments: subscribe in `group`, read from the earliest."""
    return [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--group",
        group,
        "--timeout",
        str(timeout_ms),
    ]


def parse_consumer_perf(output: str) -> dict[str, float]:
    """kafka-consumer-perf-test's CSV: overall figures and the fetch figures after the join.

    `fetch_*` exclude the group join (rebalance.time.ms): they time the reading only.
    """
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines[:-1]):
        if line.startswith("start.time,"):
            names = [name.strip() for name in line.split(",")]
            values = [value.strip() for value in lines[index + 1].split(",")]
            if len(values) != len(names):
                break
            row = dict(zip(names, values, strict=True))
            return {
                "records": int(row["data.consumed.in.nMsg"]),
                "records_per_s": float(row["nMsg.sec"]),
                "rebalance_ms": float(row["rebalance.time.ms"]),
                "fetch_ms": float(row["fetch.time.ms"]),
                "fetch_records_per_s": float(row["fetch.nMsg.sec"]),
                "fetch_MB_per_s_binary": float(row["fetch.MB.sec"]),
            }
    raise KafkaPeerError(f"no result row in consumer perf output:\n{output[-2000:]}")


# --------------------------------------------------------------------------- command line


def _wait_for_signal(node: KafkaNode) -> int:
    stop_requested = False

    def request_stop(_signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    while not stop_requested and node.proc.poll() is None:
        time.sleep(0.2)
    if node.proc.poll() is not None:
        print(f"kafka exited with code {node.proc.returncode}", file=sys.stderr)
        return 1
    outcome = node.stop()
    print(f"kafka stopped: {outcome}", file=sys.stderr)
    return 0


def secure_peer(mode: str, port: int, directory: Path) -> PeerSecurity:
    """Fresh certificates, users and tokens from compat_tests/security_harness.py in
    `directory`, the peer's security for `mode` on `port`, and `directory`/../client.properties:
    the admin's Java client settings for it (SCRAM-SHA-512 on sasl_ssl, the admin's
    certificate on ssl)."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from compat_tests import security_harness as harness  # noqa: PLC0415  (only when secured)

    material = harness.make_security_material(directory)
    protocol = {"sasl_ssl": "SASL_SSL", "ssl": "SSL"}[mode]
    client = (
        harness.sasl_ssl(material, "SCRAM-SHA-512", harness.ADMIN_USER)
        if protocol == "SASL_SSL"
        else harness.mutual_tls(material, harness.ADMIN_USER)
    )
    harness.write_java_properties(client, directory.parent / "client.properties")
    return PeerSecurity(
        listeners=((protocol, port),),
        keystore_file=material.broker.keystore,
        ca_file=material.ca_file,
        users=material.users,
        admin_user=harness.ADMIN_USER,
        jwks_file=material.jwks_file,
        jwt_issuer=harness.JWT_ISSUER,
        jwt_audience=harness.JWT_AUDIENCE,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="fetch the broker and tools jars with Maven (once)")
    start = commands.add_parser(
        "start", help="run one KRaft node; print the bootstrap; stay up until SIGTERM/SIGINT"
    )
    start.add_argument("--port", type=int, required=True, help="Kafka listener on 127.0.0.1")
    start.add_argument("--dir", type=Path, required=True, help="config, log and data dir")
    start.add_argument("--controller-port", type=int, help="default: a free loopback port")
    start.add_argument("--java", default=os.environ.get("JAVA", "java"))
    start.add_argument("--startup-timeout", type=float, default=120.0)
    start.add_argument(
        "--security",
        choices=SECURITY_MODES,
        default="plaintext",
        help="sasl_ssl: SCRAM/PLAIN/OAUTHBEARER over TLS; ssl: mutual TLS; both with ACLs",
    )
    start.add_argument(
        "--broker-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one more server.properties line (repeatable), e.g. "
        "group.share.min.record.lock.duration.ms=1000",
    )
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        if args.command == "fetch":
            jars = ensure_jars(log)
            print(f"broker: {jars.broker_classpath}\ntools: {jars.tools_classpath}")
            return 0
        security = None
        if args.security != "plaintext":
            security = secure_peer(args.security, args.port, args.dir.resolve() / "security")
            log(f"client settings (admin): {args.dir.resolve() / 'client.properties'}")
        node = start_kafka(
            args.port,
            args.dir,
            controller_port=args.controller_port,
            java=args.java,
            startup_timeout_s=args.startup_timeout,
            die_with_parent=True,
            log=log,
            security=security,
            extra_properties=args.broker_property,
        )
    except KafkaPeerError as exc:
        log(f"kafka_peer: {exc}")
        return 1
    log(f"kafka {KAFKA_VERSION} ready in {node.startup_s:.1f}s; log: {node.log_path}")
    print(node.bootstrap, flush=True)
    return _wait_for_signal(node)


if __name__ == "__main__":
    sys.exit(main())
