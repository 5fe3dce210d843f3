"""`weir serve`: start the broker, serve until SIGTERM/SIGINT, shut down cleanly."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.cluster.cluster_member import ClusterMember, register_cluster_metrics
from weir.broker.cluster.etcd_client import EtcdClient, EtcdError, EtcdTls
from weir.broker.cluster.etcd_layout import (
    EtcdMetadataStore,
    etcd_request_timeout_s,
    load_cluster_metadata,
)
from weir.broker.config import (
    BrokerConfig,
    ConfigError,
    HostPort,
    SettingSources,
    check_data_dir,
    load_config_and_sources,
    log_level,
    remove_new_data_dir,
)
from weir.broker.coordinators.group_service import attach_group_service
from weir.broker.coordinators.share_service import attach_share_service
from weir.broker.coordinators.transaction_service import attach_transaction_service
from weir.broker.data_dir_lock import lock_data_dir
from weir.broker.descriptor_budget import raise_open_files_limit
from weir.broker.http.broker_stats import advertised_http_url, traffic_history_of
from weir.broker.http.exporter_metrics import register_exporter_metrics
from weir.broker.http.group_views import register_group_metrics
from weir.broker.http.listener import serve_http
from weir.broker.http.queue_views import register_queue_metrics
from weir.broker.listen import ListenError
from weir.broker.oauth_keys import OAuthBearerKeys
from weir.broker.push.service import push_service_of
from weir.broker.server.kafka_listener import KafkaServer
from weir.controller.controller import MetadataChange
from weir.controller.metadata import MetadataCorruptError, MetadataMissingError
from weir.controller.security_state import ScramOutcome, ScramUpsertion
from weir.format.errors import ErrorCode
from weir.security.authorizer import AclAuthorizer, AuthorizerSettings
from weir.security.scram import (
    DEFAULT_ITERATIONS,
    SALT_BYTES,
    ScramMechanism,
    password_matches,
    salted_password,
)
from weir.wire.protocol import precompile_all

log = logging.getLogger("weir")


EXIT_FAILURE = 1
EXIT_USAGE = 2


def main_serve(argv: Sequence[str]) -> int:
    """Every failure to start is one line on stderr and a non-zero exit; a data dir
    this start created is removed again unless the broker became ready."""
    try:
        config, sources = load_config_and_sources(argv, os.environ)
        level = log_level(os.environ)
        _check_etcd_urls(config, sources)
        created = check_data_dir(config.data_dir, sources.of("data_dir"))
    except ConfigError as exc:
        return _report(str(exc), EXIT_USAGE)
    try:
        lock = lock_data_dir(config.data_dir, sources.of("data_dir"))
    except ConfigError as exc:
        remove_new_data_dir(created)
        return _report(str(exc), EXIT_USAGE)
    _configure_logging(level)
    open_files_note = raise_open_files_limit()
    readiness = trio.Event()  # set by serve; read here after trio.run, not awaited
    try:
        trio.run(serve, config, open_files_note, readiness)
    except BaseException as exc:
        message = _failure_message(exc, sources)
        if message is None:
            raise
        return _report(message, EXIT_FAILURE)
    finally:
        lock.close()
        if not readiness.is_set():
            remove_new_data_dir(created)
    return 0


def _report(message: str, exit_code: int) -> int:
    print(f"weir serve: error: {message}", file=sys.stderr)
    return exit_code


def _check_etcd_urls(config: BrokerConfig, sources: SettingSources) -> None:
    if config.etcd is not None:
        try:
            EtcdClient.from_urls(config.etcd)  # a bad URL is a one-line error now
        except ValueError as exc:
            raise ConfigError(f"{sources.of('etcd')}: {exc}") from None


async def _attach_security(broker: Broker, nursery: trio.Nursery) -> None:
    """The authorizer over the stored ACLs, and OAUTHBEARER's keys (refreshed in
    `nursery`), when the security table asks for them."""
    security = broker.config.security
    if security.authorizer_enabled:
        settings = AuthorizerSettings(
            super_users=frozenset(security.super_users),
            allow_everyone_if_no_acl_found=security.allow_everyone_if_no_acl_found,
        )
        broker.authorizer = AclAuthorizer(settings, broker.controller.acl_bindings())
    if "OAUTHBEARER" in security.sasl_enabled_mechanisms and (
        security.sasl_oauthbearer_jwks_endpoint_url
    ):
        keys = await OAuthBearerKeys.load(security)
        broker.oauthbearer = keys
        nursery.start_soon(keys.refresh_forever)


async def _ensure_inter_broker_user(broker: Broker) -> None:
    """The inter-broker user's SCRAM credentials (both mechanisms) stored with the
    configured password, unless they already hold it: how a secured cluster gets its
    first user, which then creates the others (docs/security.md)."""
    security = broker.config.security
    name, password = security.inter_broker_sasl_username, security.inter_broker_sasl_password
    if not name or not password:
        return
    for mechanism in ScramMechanism:
        stored = broker.controller.scram_credential(name, mechanism)
        if stored is not None and password_matches(mechanism, stored, password):
            continue
        salt = os.urandom(SALT_BYTES)
        salted = salted_password(mechanism, password, salt, DEFAULT_ITERATIONS)
        upsertion = ScramUpsertion(name, mechanism, DEFAULT_ITERATIONS, salt, salted)
        # One request alters one credential of a user (Kafka's rule): one commit each.
        outcomes: list[ScramOutcome] = []

        def stage(
            upsertion: ScramUpsertion = upsertion, outcomes: list[ScramOutcome] = outcomes
        ) -> MetadataChange | None:
            change, results = broker.controller.stage_alter_scram_credentials([], [upsertion])
            outcomes[:] = results
            return change

        await broker.topic_changes.commit_metadata(stage)
        refused = [o for o in outcomes if o.error_code != ErrorCode.NONE]
        if refused:
            raise ConfigError(
                f"security.inter_broker_sasl_username: cannot store {name}'s "
                f"{mechanism.sasl_name} credential: {refused[0].error_message}"
            )
        log.info("stored the %s credential of the inter-broker user %s", mechanism.sasl_name, name)


def _etcd_tls(config: BrokerConfig) -> EtcdTls | None:
    """etcd over TLS when the security table names its CA or a client certificate."""
    security = config.security
    if not (security.etcd_cafile or security.etcd_certfile):
        return None
    return EtcdTls(security.etcd_cafile, security.etcd_certfile, security.etcd_keyfile)


def _configure_logging(level: int) -> None:
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # httpx logs every etcd request at INFO: only its warnings are worth reading.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _failure_message(exc: BaseException, sources: SettingSources) -> str | None:
    """The one line for a failure the user can act on (Trio may wrap it in
    exception groups); None for anything else (a bug: its traceback is shown)."""
    for leaf in _leaves(exc):
        if isinstance(leaf, ListenError):
            return leaf.describe(sources.of(leaf.setting))
        if isinstance(leaf, MetadataCorruptError):
            return f"cluster metadata is unreadable: {leaf}"
        if isinstance(leaf, MetadataMissingError):
            return str(leaf)
        if isinstance(leaf, EtcdError):
            return f"etcd ({sources.of('etcd')}): {leaf}"
        if isinstance(leaf, OSError):
            return str(leaf.strerror or leaf)
    return None


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _warn_if_over_budget(broker: Broker) -> None:
    """A lower limit than at creation: everything is served, nothing more is admitted."""
    partitions_max = broker.descriptor_budget.partitions_max
    if len(broker.partitions) > partitions_max:
        log.warning("%d partitions exceed the %d this open files limit admits: they are "
                    "served, but creating more is refused until `ulimit -n` is raised",
                    len(broker.partitions), partitions_max)  # fmt: skip


def ready_line(
    config: BrokerConfig,
    kafka_port: int,
    http_port: int,
    fsync_method: str,
    listener_ports: dict[str, int] | None = None,
) -> str:
    """The start-up line: every address the broker listens on, advertises and
    reaches (the bound ports, which differ from the configured ones for port 0)."""
    http = HostPort(config.http_listen.host, http_port)
    etcd = f", etcd {config.etcd}" if config.etcd is not None else ""
    if config.security.listeners:
        ports = listener_ports or {}
        kafka_text = "Kafka on " + ", ".join(
            f"{listener.name} ({listener.protocol.value}) "
            f"{HostPort(listener.host, ports.get(listener.name, listener.port))} "
            f"(advertised as {HostPort(listener.advertised_host, listener.advertised_port)})"
            for listener in config.kafka_listeners
        )
    else:
        kafka = HostPort(config.kafka_listen.host, kafka_port)
        kafka_text = f"Kafka on {kafka} (advertised as {config.advertised})"
    return (
        f"weir broker {config.node_id} ready: {kafka_text}, HTTP on {http}"
        f"{' (TLS)' if config.security.http_tls else ''}{etcd}, data in {config.data_dir}, "
        f"fsync method {fsync_method}"
    )


# Of shutdown_timeout_ms, the part in-flight requests may use (the rest closes logs).
SHUTDOWN_DRAIN_SHARE = 0.25
# Logs closed at once at shutdown (LogManager.close_all): their fsyncs overlap.
SHUTDOWN_CLOSE_THREADS = 8


async def serve(
    config: BrokerConfig,
    open_files_note: tuple[int, str] | None = None,
    readiness: trio.Event | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT, then shut down within shutdown_timeout_ms:
    close the Kafka listener, let connections answer what they have read
    (a quarter of the timeout at most), stop the other tasks, close the logs
    in the time left (`LogManager.close_all`). `open_files_note`: (level,
    message) about the open files limit, logged once serving; `readiness` is
    set once Kafka clients can be served."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        # Compiling a schema on its first use stalled the loop: all of them first.
        precompile_all()
        etcd: EtcdClient | None = None
        member: ClusterMember | None = None
        if config.etcd is None:
            broker = Broker(config)
        else:
            etcd = EtcdClient.from_urls(
                config.etcd,
                request_timeout_s=etcd_request_timeout_s(config),
                tls=_etcd_tls(config),
            )
            metadata, revision = await load_cluster_metadata(etcd)
            broker = Broker(config, EtcdMetadataStore(metadata))
            member = ClusterMember(broker, etcd, revision)
        started = False
        shutdown_deadline_s: float | None = None
        try:
            async with trio.open_nursery() as nursery:
                await _attach_security(broker, nursery)
                http_port = await nursery.start(serve_http, broker)
                nursery.start_soon(broker.loop_lag.run)
                nursery.start_soon(traffic_history_of(broker).run)
                broker.open_logs()
                groups = attach_group_service(broker)
                transactions = attach_transaction_service(broker)
                shares = attach_share_service(broker)
                register_group_metrics(broker, groups)
                register_queue_metrics(broker, shares)
                register_exporter_metrics(broker)
                await nursery.start(broker.flusher.run)
                if member is not None:
                    member.http_url = advertised_http_url(config, http_port)
                    register_cluster_metrics(broker, member)
                    await nursery.start(member.run)
                await _ensure_inter_broker_user(broker)
                await nursery.start(groups.run, wall_clock_ms)
                await nursery.start(transactions.run, wall_clock_ms)
                await nursery.start(shares.run)
                await nursery.start(push_service_of(broker).run)
                kafka = KafkaServer(broker)
                async with trio.open_nursery() as kafka_nursery:
                    kafka_port = await kafka_nursery.start(kafka.run)
                    nursery.start_soon(broker.run_retention)
                    broker.ready = started = True
                    # Once serving, unlike Kafka, which waits for the first group
                    # request: librdkafka's admin client retries COORDINATOR_NOT_AVAILABLE
                    # for a few hundred ms only, then waits out its whole timeout, so
                    # the window in which FindCoordinator answers it is kept short.
                    if member is None:
                        # A cluster creates it on the first group request instead (as
                        # Kafka does), when the other brokers have joined: its
                        # replication factor is min(3, live brokers) at that moment.
                        groups.ensure_ready(wall_clock_ms())
                    if readiness is not None:
                        readiness.set()
                    method = broker.flusher.method
                    log.info("%s", ready_line(config, kafka_port, http_port, method, kafka.ports))
                    if open_files_note is not None:
                        log.log(*open_files_note)
                    log.info("%s", broker.descriptor_budget.describe())
                    _warn_if_over_budget(broker)
                    async for signum in signals:
                        log.info("received %s, shutting down", signal.Signals(signum).name)
                        break
                    shutdown_deadline_s = time.monotonic() + config.shutdown_timeout_ms / 1000
                    broker.ready = False
                    if member is not None:
                        await member.leave()
                    drain_s = config.shutdown_timeout_ms / 1000 * SHUTDOWN_DRAIN_SHARE
                    kafka.stop(trio.current_time() + drain_s)
                nursery.cancel_scope.cancel()
        finally:
            timeout_s = None
            if shutdown_deadline_s is not None:
                timeout_s = max(shutdown_deadline_s - time.monotonic(), 0.0)
            # Every task has ended: the logs may be closed on worker threads.
            broker.close(timeout_s, threads_count=SHUTDOWN_CLOSE_THREADS)
            if etcd is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    await etcd.aclose()
            if started:
                log.info("shutdown complete")
