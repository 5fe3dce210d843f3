"""`weir serve`: start the broker, serve until SIGTERM/SIGINT, shut down cleanly."""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.cluster_member import (
    ClusterMember,
    EtcdMetadataStore,
    load_cluster_metadata,
    register_cluster_metrics,
)
from weir.broker.config import BrokerConfig, ConfigError, check_data_dir, load_config
from weir.broker.descriptor_budget import raise_open_files_limit
from weir.broker.etcd_client import EtcdClient
from weir.broker.group_service import attach_group_service
from weir.broker.group_views import register_group_metrics
from weir.broker.http import serve_http
from weir.broker.server import KafkaServer
from weir.controller.metadata import MetadataCorruptError, MetadataMissingError
from weir.wire.protocol import precompile_all

log = logging.getLogger("weir")

LOCK_FILE_NAME = ".lock"


def main_serve(argv: Sequence[str]) -> int:
    try:
        config = load_config(argv, os.environ)
        if config.etcd is not None:
            try:
                EtcdClient.from_urls(config.etcd)  # a bad URL is a one-line error now
            except ValueError as exc:
                raise ConfigError(f"--etcd: {exc}") from None
        check_data_dir(config.data_dir)
        lock = lock_data_dir(config.data_dir)
    except ConfigError as exc:
        print(f"weir serve: error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=os.environ.get("WEIR_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # httpx logs every etcd request at INFO: only its warnings are worth reading.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    open_files_note = raise_open_files_limit()
    try:
        trio.run(serve, config, open_files_note)
    except MetadataCorruptError as exc:
        print(f"weir serve: error: cluster metadata is unreadable: {exc}", file=sys.stderr)
        return 1
    except MetadataMissingError as exc:
        print(f"weir serve: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"weir serve: error: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except BaseExceptionGroup as group:
        os_error = _first_os_error(group)
        if os_error is None:
            raise
        print(f"weir serve: error: {os_error.strerror or os_error}", file=sys.stderr)
        return 1
    finally:
        lock.close()
    return 0


def _first_os_error(group: BaseExceptionGroup) -> OSError | None:
    """A listener that cannot bind surfaces as an OSError inside Trio's exception group."""
    matched: BaseException | None = group.subgroup(OSError)
    while isinstance(matched, BaseExceptionGroup):
        matched = matched.exceptions[0] if matched.exceptions else None
    return matched if isinstance(matched, OSError) else None


def _warn_if_over_budget(broker: Broker) -> None:
    """A lower limit than at creation: everything is served, nothing more is admitted."""
    partitions_max = broker.descriptor_budget.partitions_max
    if len(broker.partitions) > partitions_max:
        log.warning("%d partitions exceed the %d this open files limit admits: they are "
                    "served, but creating more is refused until `ulimit -n` is raised",
                    len(broker.partitions), partitions_max)  # fmt: skip


def lock_data_dir(data_dir: Path) -> IO[bytes]:
    lock = open(data_dir / LOCK_FILE_NAME, "wb")  # noqa: SIM115 - held for the process lifetime
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise ConfigError(f"--data-dir: {data_dir} is in use by another weir process") from None
    return lock


# Of shutdown_timeout_ms, the part in-flight requests may use (the rest closes logs).
SHUTDOWN_DRAIN_SHARE = 0.25
# Logs closed at once at shutdown (LogManager.close_all): their fsyncs overlap.
SHUTDOWN_CLOSE_THREADS = 8


async def serve(config: BrokerConfig, open_files_note: tuple[int, str] | None = None) -> None:
    """Serve until SIGTERM/SIGINT, then shut down within shutdown_timeout_ms:
    close the Kafka listener, let connections answer what they have read
    (a quarter of the timeout at most), stop the other tasks, close the logs
    in the time left (`LogManager.close_all`). `open_files_note`: (level,
    message) about the open files limit, logged once serving."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        # Compiling a schema on its first use stalled the loop: all of them first.
        precompile_all()
        etcd: EtcdClient | None = None
        member: ClusterMember | None = None
        if config.etcd is None:
            broker = Broker(config)
        else:
            etcd = EtcdClient.from_urls(config.etcd)
            metadata, revision = await load_cluster_metadata(etcd)
            broker = Broker(config, EtcdMetadataStore(metadata))
            member = ClusterMember(broker, etcd, revision)
        started = False
        shutdown_deadline_s: float | None = None
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(serve_http, broker)
                nursery.start_soon(broker.loop_lag.run)
                broker.open_logs()
                groups = attach_group_service(broker)
                register_group_metrics(broker, groups)
                await nursery.start(broker.flusher.run)
                if member is not None:
                    register_cluster_metrics(broker, member)
                    await nursery.start(member.run)
                await nursery.start(groups.run, wall_clock_ms)
                kafka = KafkaServer(broker)
                async with trio.open_nursery() as kafka_nursery:
                    await kafka_nursery.start(kafka.run)
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
                    log.info(
                        "weir broker %d ready, data in %s, fsync method %s",
                        config.node_id, config.data_dir, broker.flusher.method,
                    )  # fmt: skip
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
