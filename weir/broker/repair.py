"""`weir repair`: check and repair a stopped broker's data directory.

    weir repair --data-dir DIR [--topic T [--partition P]] [--start-offset N]
                [--rebuild-metadata] [--execute]

Without `--execute` it only reports (nothing on disk changes). It takes the
data directory's lock, so it refuses to run beside a broker using it. What a
repair keeps and skips is `weir.log.repair`'s protocol: every intact batch
stays at its offset, damaged ranges become gaps, offsets are never reused.

- A damaged partition (the broker logged it offline): its damaged ranges are
  copied to `damaged/` in the partition directory and skipped.
- A partition whose directory is gone: recreated empty from `--start-offset N`
  (given with `--topic` and `--partition`); choose N above every offset the
  partition held, e.g. above what consumers committed.
- `cluster-metadata.json` gone (the broker refuses to start): with
  `--rebuild-metadata`, rebuilt from the partition directories'
  `partition.metadata` files; topic configs return to their defaults.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from weir.broker.config import ConfigError
from weir.broker.data_dir_lock import lock_data_dir
from weir.controller.metadata import (
    ClusterMetadata,
    EmbeddedMetadataStore,
    MetadataCorruptError,
    TopicRecord,
    new_cluster_id,
)
from weir.log.manager import parse_partition_directory_name, partition_directories
from weir.log.partition_metadata import (
    PartitionIdentity,
    PartitionMetadataError,
    encode_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)
from weir.log.repair import apply_repair, plan_repair, recreate_missing_partition

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class RepairError(Exception):
    """Something the operator must fix first; the message says what."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="weir repair",
        description="Check a stopped broker's data directory and repair damaged partitions "
        "(keeps every intact record, never reuses an offset). Reports only, unless --execute.",
    )
    parser.add_argument("--data-dir", metavar="DIR", default="./weir-data", type=Path,
                        help="the stopped broker's data dir (default ./weir-data)")  # fmt: skip
    parser.add_argument("--topic", help="only this topic")
    parser.add_argument("--partition", type=int, help="only this partition (with --topic)")
    parser.add_argument(
        "--start-offset",
        type=int,
        metavar="N",
        help="recreate a missing partition directory empty, starting at offset N "
        "(with --topic and --partition)",
    )
    parser.add_argument(
        "--rebuild-metadata",
        action="store_true",
        help="rebuild a missing cluster-metadata.json from the partition directories",
    )
    parser.add_argument("--execute", action="store_true", help="apply the repair")
    return parser


def main_repair(argv: Sequence[str], out: TextIO = sys.stdout) -> int:
    try:
        args = build_parser().parse_args(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    data_dir: Path = args.data_dir
    try:
        _check_arguments(args)
        if not data_dir.is_dir():
            raise RepairError(f"{data_dir} is not a directory")
        lock = lock_data_dir(data_dir)
    except (RepairError, ConfigError) as exc:
        print(f"weir repair: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _repair(args, data_dir, out)
    except (RepairError, MetadataCorruptError, OSError) as exc:
        print(f"weir repair: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        lock.close()


def _check_arguments(args: argparse.Namespace) -> None:
    if args.partition is not None and args.topic is None:
        raise RepairError("--partition needs --topic")
    if args.start_offset is not None and (args.topic is None or args.partition is None):
        raise RepairError("--start-offset needs --topic and --partition")
    if args.start_offset is not None and args.start_offset < 0:
        raise RepairError("--start-offset must be zero or more")


def _repair(args: argparse.Namespace, data_dir: Path, out: TextIO) -> int:
    store = EmbeddedMetadataStore(data_dir)
    if not store.exists():
        if not args.rebuild_metadata:
            raise RepairError(
                f"{store.path} is missing; pass --rebuild-metadata to rebuild it "
                "from the partition directories"
            )
        return _rebuild_metadata(store, data_dir, args.execute, out)
    if args.rebuild_metadata:
        raise RepairError(f"{store.path} exists; --rebuild-metadata is only for a missing one")
    metadata = store.load()
    damaged = 0
    for topic in metadata.topics.values():
        if args.topic is not None and topic.name != args.topic:
            continue
        for index in range(topic.partition_count):
            if args.partition is None or index == args.partition:
                damaged += _repair_partition(args, data_dir, topic, index, out)
    verb = "repaired" if args.execute else "need repair"
    print(f"{damaged} partition(s) {verb}", file=out)
    if damaged and not args.execute:
        print("run again with --execute to apply", file=out)
    return EXIT_OK


def _repair_partition(
    args: argparse.Namespace, data_dir: Path, topic: TopicRecord, index: int, out: TextIO
) -> int:
    name = f"{topic.name}-{index}"
    directory = data_dir / name
    if not directory.is_dir():
        return _recreate(args, directory, topic, out)
    identity = PartitionIdentity(topic.topic_id, topic.name)
    lines = _identity_problems(directory, identity)
    plan = plan_repair(directory)
    lines += plan.describe()
    if not lines:
        return 0
    print(f"{name}:", file=out)
    for line in lines:
        print(f"  {line}", file=out)
    if args.execute:
        write_partition_metadata(directory, identity)
        if plan.needs_repair:
            apply_repair(plan)
    return 1


def _identity_problems(directory: Path, identity: PartitionIdentity) -> list[str]:
    """A `partition.metadata` that cannot be read is rewritten; one naming
    another topic means the directory is not this partition's: stop."""
    try:
        found = read_partition_metadata(directory)
    except PartitionMetadataError as exc:
        return [f"{exc}: it will be rewritten for topic {identity.topic_name!r}"]
    if found is not None and found != identity:
        raise RepairError(
            f"{directory} belongs to topic {found.topic_name!r} with another id "
            f"({encode_topic_id(found.topic_id)}): move it away, then repair again "
            "(the partition is then missing: recreate it with --start-offset)"
        )
    return []


def _recreate(args: argparse.Namespace, directory: Path, topic: TopicRecord, out: TextIO) -> int:
    print(f"{directory.name}:\n  its directory is missing", file=out)
    if args.start_offset is None:
        print(
            f"  recreate it empty with --topic {topic.name} --partition "
            f"{directory.name.rpartition('-')[2]} --start-offset N, N above every offset "
            "it held (e.g. above what its consumers committed)",
            file=out,
        )
        return 1
    print(f"  recreated empty from offset {args.start_offset}", file=out)
    if args.execute:
        identity = PartitionIdentity(topic.topic_id, topic.name)
        recreate_missing_partition(directory, identity, args.start_offset)
    return 1


def _rebuild_metadata(
    store: EmbeddedMetadataStore, data_dir: Path, execute: bool, out: TextIO
) -> int:
    counts: dict[str, int] = {}
    ids: dict[str, uuid.UUID] = {}
    for name in partition_directories(data_dir):
        parsed = parse_partition_directory_name(name)
        assert parsed is not None
        topic, index = parsed
        try:
            identity = read_partition_metadata(data_dir / name)
        except PartitionMetadataError as exc:
            raise RepairError(f"cannot tell which topic {name} belongs to: {exc}") from exc
        topic_id = identity.topic_id if identity is not None else ids.get(topic, uuid.uuid4())
        if ids.setdefault(topic, topic_id) != topic_id:
            raise RepairError(f"{name} belongs to another topic {topic!r}: move it away")
        counts[topic] = max(counts.get(topic, 0), index + 1)
    records = [
        TopicRecord(name=topic, topic_id=ids[topic], partition_count=count)
        for topic, count in sorted(counts.items())
    ]
    for record in records:
        print(f"topic {record.name}: {record.partition_count} partition(s)", file=out)
    if execute:
        # Producer ids handed out before are unknown: start far above any a broker
        # could have reached (blocks of 1,000 from 0) in its lifetime.
        next_producer_id = time.time_ns() // 1_000_000 * 1024
        metadata = ClusterMetadata(new_cluster_id(), {r.name: r for r in records}, next_producer_id)
        store.save(metadata)
        print(f"wrote {store.path}", file=out)
    else:
        print("run again with --execute to write it", file=out)
    return EXIT_OK
