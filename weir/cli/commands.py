"""Runs one parsed client command against a cluster and prints its result."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, BinaryIO, TextIO

from weir.cli import (
    acl_commands,
    cluster_commands,
    group_commands,
    push_commands,
    queue_commands,
    queue_group_commands,
    topic_commands,
    txn_commands,
    user_commands,
)
from weir.cli.cluster import COORDINATOR_MOVING_ERRORS, Cluster
from weir.cli.consume_command import ConsumeOptions, Consumer, printer
from weir.cli.errors import KafkaCodeError
from weir.cli.formatting import JSON, render_json
from weir.cli.produce_command import (
    ACKS,
    COMPRESSION_CODECS,
    ProduceOptions,
    produce_lines,
    render_summary,
)
from weir.cli.produce_input import LineReader

EXIT_OK = 0
# How long a group command waits for a coordinator that is loading or moving.
COORDINATOR_SETTLE_MS = 15_000
COORDINATOR_RETRY_INTERVAL_S = 0.5
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130


def run_command(args: argparse.Namespace, cluster: Cluster, stdin: BinaryIO, stdout: TextIO) -> int:
    if args.command == "topic":
        return _run_topic_command(args, cluster, stdout)
    if args.command == "group":
        return _run_group_command(args, cluster, stdout)
    if args.command == "txn":
        return _run_txn_command(args, cluster, stdout)
    if args.command == "queue":
        return _run_queue_command(args, cluster, stdout)
    if args.command == "push":
        return push_commands.run_push_command(args, stdout)
    if args.command == "acl":
        return _run_acl_command(args, cluster, stdout)
    if args.command == "user":
        return _run_user_command(args, cluster, stdout)
    if args.command == "cluster":
        return _run_cluster_command(args, cluster, stdout)
    if args.command == "broker":
        return _run_broker_command(args, cluster, stdout)
    if args.command == "produce":
        return _run_produce(args, cluster, stdin, stdout)
    if args.command == "consume":
        return _run_consume(args, cluster, stdout)
    raise AssertionError(f"unknown command {args.command!r}")


def _run_topic_command(args: argparse.Namespace, cluster: Cluster, stdout: TextIO) -> int:
    action = args.topic_command
    document: dict[str, Any]
    render: Callable[[dict[str, Any]], str]
    if action == "create":
        document = topic_commands.create_topic(
            cluster,
            args.name,
            partitions=args.partitions,
            replication_factor=args.replication_factor,
            configs=args.config,
            timeout_ms=args.timeout_ms,
        )
        render = topic_commands.render_created
    elif action == "list":
        document = topic_commands.list_topics(cluster)
        render = topic_commands.render_topic_list
    elif action == "describe":
        document = topic_commands.describe_topic(cluster, args.name, all_configs=args.all_configs)
        render = topic_commands.render_description
    elif action == "delete":
        document = topic_commands.delete_topic(cluster, args.name, timeout_ms=args.timeout_ms)
        render = topic_commands.render_deleted
    elif action == "alter-config":
        document = topic_commands.alter_topic_config(
            cluster, args.name, set_configs=args.set_configs, delete=args.delete_configs
        )
        render = topic_commands.render_altered
    elif action == "add-partitions":
        document = topic_commands.add_partitions(
            cluster,
            args.name,
            add_count=args.add_count,
            total_count=args.total_count,
            timeout_ms=args.timeout_ms,
        )
        render = topic_commands.render_partitions_added
    elif action == "trim":
        document = topic_commands.trim_topic(
            cluster,
            args.name,
            before_offset=args.before_offset,
            before_timestamp_ms=args.before_timestamp_ms,
            partition=args.partition,
            timeout_ms=args.timeout_ms,
        )
        render = topic_commands.render_trimmed
    else:
        raise AssertionError(f"unknown topic action {action!r}")
    stdout.write(render_json(document) if args.output_format == JSON else render(document))
    return EXIT_OK


def _run_group_command(args: argparse.Namespace, cluster: Cluster, stdout: TextIO) -> int:
    """The action, run again while the group's coordinator is loading or moving (a
    cluster's first group request creates the offsets topic; a failover moves it):
    every action is refused whole then, so running it again is safe."""
    deadline = time.monotonic() + COORDINATOR_SETTLE_MS / 1000
    while True:
        try:
            document, render = _group_action(args, cluster)
            break
        except KafkaCodeError as exc:
            if exc.code not in COORDINATOR_MOVING_ERRORS or time.monotonic() >= deadline:
                raise
            time.sleep(COORDINATOR_RETRY_INTERVAL_S)
    stdout.write(render_json(document) if args.output_format == JSON else render(document))
    return EXIT_OK


def _group_action(
    args: argparse.Namespace, cluster: Cluster
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], str]]:
    action = args.group_command
    if action == "list":
        return group_commands.list_groups(cluster), group_commands.render_group_list
    if action == "describe":
        document = group_commands.describe_group(cluster, args.group)
        return document, group_commands.render_group_description
    if action == "delete":
        return group_commands.delete_group(cluster, args.group), group_commands.render_group_deleted
    if action == "reset-offsets":
        target = group_commands.parse_reset_target(
            args.to_earliest, args.to_latest, args.to_offset, args.to_timestamp_ms, args.shift_by
        )
        topic = None if args.all_topics else args.topic
        document = group_commands.reset_offsets(
            cluster, args.group, topic, target, execute=args.execute
        )
        return document, group_commands.render_reset_plan
    raise AssertionError(f"unknown group action {action!r}")


def _run_queue_command(args: argparse.Namespace, cluster: Cluster, stdout: TextIO) -> int:
    action = args.queue_command
    document: dict[str, Any]
    render: Callable[[dict[str, Any]], str]
    if action == "describe":
        document = queue_group_commands.describe_queue(cluster, args.group, args.http)
        render = queue_group_commands.render_queue
    elif action == "purge":
        document = queue_group_commands.purge_queue(
            cluster, args.group, args.topic, dry_run=args.dry_run
        )
        render = queue_group_commands.render_purge
    elif action in ("dead-letters", "peek"):
        document = queue_commands.list_dead_letters(
            cluster, args.group, args.dead_letter_topic, args.records_max
        )
        render = queue_commands.render_dead_letters
    elif action == "redrive":
        document = queue_commands.redrive(
            cluster, args.group, args.dead_letter_topic, args.to_topic, args.records_max
        )
        render = queue_commands.render_redriven
    else:
        raise AssertionError(f"unknown queue action {action!r}")
    stdout.write(render_json(document) if args.output_format == JSON else render(document))
    return EXIT_OK


def _run_txn_command(args: argparse.Namespace, cluster: Cluster, stdout: TextIO) -> int:
    """The action, run again while a transaction coordinator is loading or moving (as
    for groups: such an answer changed nothing)."""
    deadline = time.monotonic() + COORDINATOR_SETTLE_MS / 1000
    while True:
        try:
            document, render = _txn_action(args, cluster)
            break
        except KafkaCodeError as exc:
            if exc.code not in COORDINATOR_MOVING_ERRORS or time.monotonic() >= deadline:
                raise
            time.sleep(COORDINATOR_RETRY_INTERVAL_S)
    stdout.write(render_json(document) if args.output_format == JSON else render(document))
    return EXIT_OK


def _txn_action(
    args: argparse.Namespace, cluster: Cluster
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], str]]:
    action = args.txn_command
    if action == "list":
        filters = txn_commands.ListFilters(
            states=tuple(args.states),
            producer_ids=tuple(args.producer_ids),
            duration_ms=args.duration_filter_ms,
            transactional_id_pattern=args.transactional_id_pattern,
        )
        return txn_commands.list_transactions(
            cluster, filters
        ), txn_commands.render_transaction_list
    if action == "describe":
        document = txn_commands.describe_transaction(cluster, args.transactional_id)
        return document, txn_commands.render_transaction_description
    if action == "abort":
        if args.start_offset is not None:
            spec = txn_commands.find_abort_spec(
                cluster, args.topic, args.partition, args.start_offset
            )
        else:
            spec = txn_commands.abort_spec_from_arguments(
                args.topic, args.partition, args.producer_id, args.producer_epoch,
                args.coordinator_epoch,
            )  # fmt: skip
        return txn_commands.abort_transaction(cluster, spec), txn_commands.render_aborted
    if action == "find-hanging":
        document = txn_commands.find_hanging(
            cluster,
            broker_id=args.broker_id,
            topic=args.topic,
            partition=args.partition,
            max_transaction_timeout_ms=args.max_transaction_timeout_minutes
            * txn_commands.MINUTE_MS,
        )
        return document, txn_commands.render_hanging
    raise AssertionError(f"unknown txn action {action!r}")


def _run_cluster_command(args: argparse.Namespace, cluster: Cluster, stdout: TextIO) -> int:
    action = args.cluster_command
    document: dict[str, Any]
    render: Callable[[dict[str, Any]], str]
    if action == "info":
        document = cluster_commands.cluster_info(cluster)
        render = cluster_commands.render_cluster_info
    elif action == "status":
        document = cluster_commands.cluster_status(cluster)
        render = cluster_commands.render_cluster_status
    elif action == "brokers":
        document = cluster_commands.cluster_brokers(cluster)
        render = cluster_commands.render_cluster_brokers
    elif action == "partitions":
        document = cluster_commands.cluster_partitions(
            cluster, topic=args.topic, under_replicated=args.under_replicated, offline=args.offline
        )
        render = cluster_commands.render_cluster_partitions
    elif action == "elect-leaders":
        document = cluster_commands.elect_leaders(
            cluster, topic=args.topic, partition=args.partition, election_type=args.election_type
        )
        render = cluster_commands.render_elections
    elif action == "reassign":
        target = None if args.cancel else args.replicas
        document = cluster_commands.reassign(cluster, {(args.topic, args.partition): target})
        render = cluster_commands.render_reassign
    elif action == "reassignments":
        document = cluster_commands.list_reassignments(cluster)
        render = cluster_commands.render_reassignments
    else:
        raise AssertionError(f"unknown cluster action {action!r}")
    stdout.write(render_json(document) if args.output_format == JSON else render(document))
    return EXIT_OK


def _run_acl_command(args: argparse.Namespace, cluster: Cluster, stdout: TextIO) -> int:
    selection = acl_commands.resource_selection(
        args.topics, args.groups, args.transactional_ids, args.cluster, args.resource_pattern_type
    )
    document: dict[str, Any]
    render: Callable[[dict[str, Any]], str]
    if args.acl_command == "create":
        document = acl_commands.create_acls(
            cluster,
            args.allow_principals,
            args.deny_principals,
            args.hosts,
            args.operations,
            selection,
        )
        render = acl_commands.render_created
    else:
        filters = acl_commands.acl_filters(
            selection, args.principals, args.host, args.operation, args.permission
        )
        if args.acl_command == "list":
            document, render = acl_commands.list_acls(cluster, filters), acl_commands.render_listed
        else:
            document = acl_commands.delete_acls(cluster, filters)
            render = acl_commands.render_deleted
    stdout.write(render_json(document) if args.output_format == JSON else render(document))
    return EXIT_OK


def _run_user_command(args: argparse.Namespace, cluster: Cluster, stdout: TextIO) -> int:
    document: dict[str, Any]
    render: Callable[[dict[str, Any]], str]
    if args.user_command == "create":
        document = user_commands.create_user(
            cluster, args.name, args.password, args.mechanisms, args.iterations
        )
        render = user_commands.render_created
    elif args.user_command == "list":
        document, render = user_commands.list_users(cluster, args.names), user_commands.render_users
    else:
        document = user_commands.delete_user(cluster, args.name, args.mechanisms)
        render = user_commands.render_deleted
    stdout.write(render_json(document) if args.output_format == JSON else render(document))
    return EXIT_OK


def _run_broker_command(args: argparse.Namespace, cluster: Cluster, stdout: TextIO) -> int:
    assert args.broker_command == "decommission", args.broker_command
    plan = cluster_commands.decommission_plan(cluster, args.node_id)
    document: dict[str, Any] = {
        "node_id": args.node_id,
        "plan": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in plan.items()],
        "submitted": False,
    }
    if plan and not args.dry_run:
        cluster_commands.reassign(cluster, plan)
        document["submitted"] = True
    if args.output_format == JSON:
        stdout.write(render_json(document))
    else:
        stdout.write(cluster_commands.render_plan(document))
        if document["submitted"]:
            stdout.write(f"submitted; watch `weir cluster reassignments` until empty, then "
                         f"stop broker {args.node_id}\n")  # fmt: skip
    return EXIT_OK


def _run_produce(
    args: argparse.Namespace, cluster: Cluster, stdin: BinaryIO, stdout: TextIO
) -> int:
    options = ProduceOptions(
        key_separator=None if args.key_separator is None else args.key_separator.encode("utf-8"),
        record_format=args.record_tokens,
        key=None if args.key is None else args.key.encode("utf-8"),
        headers=args.headers,
        partition=args.partition,
        acks=ACKS[args.acks],
        compression=COMPRESSION_CODECS[args.compression],
        timeout_ms=args.timeout_ms,
        max_records=args.max_records,
    )
    summary = produce_lines(cluster, args.topic, LineReader(stdin), options, _print_notice)
    document = summary.to_document()
    stdout.write(render_json(document) if args.output_format == JSON else render_summary(document))
    stdout.flush()
    for error in summary.errors:
        print(f"error: {error}", file=sys.stderr)
    if summary.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILURE if summary.errors else EXIT_OK


def _print_notice(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _run_consume(args: argparse.Namespace, cluster: Cluster, stdout: TextIO) -> int:
    options = ConsumeOptions(
        offsets=args.offset_specs,
        partitions=None if not args.partitions else tuple(args.partitions),
        max_records=args.max_records,
        idle_timeout_ms=args.timeout_ms,
        exit_at_end=args.exit_at_end,
        group_id=args.group_id,
    )
    stdout.flush()
    emit = printer(
        stdout.buffer,
        output_json=args.output_format == JSON,
        print_key=args.print_key,
        record_format=args.record_tokens,
    )
    Consumer(cluster, args.topic, options, emit).run()
    return EXIT_OK
