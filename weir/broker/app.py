"""`weir serve`: start the broker, serve until SIGTERM/SIGINT, shut down cleanly."""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import trio

from weir.broker.broker import Broker, wall_clock_ms
from weir.broker.config import BrokerConfig, ConfigError, check_data_dir, load_config
from weir.broker.descriptor_budget import raise_open_files_limit
from weir.broker.group_service import attach_group_service
from weir.broker.group_views import register_group_metrics
from weir.broker.http import serve_http
from weir.broker.server import serve_kafka
from weir.controller.metadata import MetadataCorruptError

log = logging.getLogger("weir")

LOCK_FILE_NAME = ".lock"


def main_serve(argv: Sequence[str]) -> int:
    try:
        config = load_config(argv, os.environ)
        if config.etcd is not None:
            raise ConfigError("--etcd: clustering over etcd is not available in this version yet")
        check_data_dir(config.data_dir)
        lock = _lock_data_dir(config.data_dir)
    except ConfigError as exc:
        print(f"weir serve: error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=os.environ.get("WEIR_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    open_files_note = raise_open_files_limit()
    try:
        trio.run(serve, config, open_files_note)
    except MetadataCorruptError as exc:
        print(f"weir serve: error: cluster metadata is unreadable: {exc}", file=sys.stderr)
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


def _lock_data_dir(data_dir: Path) -> IO[bytes]:
    lock = open(data_dir / LOCK_FILE_NAME, "wb")  # noqa: SIM115 - held for the process lifetime
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise ConfigError(f"--data-dir: {data_dir} is in use by another weir process") from None
    return lock


async def serve(config: BrokerConfig, open_files_note: tuple[int, str] | None = None) -> None:
    """Serve until SIGTERM/SIGINT. `open_files_note`: (level, message) about the
    open files limit, logged once serving."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        broker = Broker(config)
        started = False
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(serve_http, broker)
                broker.open_logs()
                groups = attach_group_service(broker)
                register_group_metrics(broker, groups)
                await nursery.start(broker.flusher.run)
                nursery.start_soon(groups.run, wall_clock_ms)
                await nursery.start(serve_kafka, broker)
                nursery.start_soon(broker.run_retention)
                broker.ready = started = True
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
                broker.ready = False
                nursery.cancel_scope.cancel()
        finally:
            broker.close()
            if started:
                log.info("shutdown complete")
