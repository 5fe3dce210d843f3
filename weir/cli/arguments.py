"""The `weir` command line: subcommands, options and their validation (argparse)."""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Sequence
from typing import Any

from weir.cli.formatting import FORMATS, JSON, TABLE, TABLE_ALIAS
from weir.cli.offset_specs import (
    BEGINNING,
    OffsetSpec,
    PartitionOffsetSpec,
    parse_partition_offset_spec,
)
from weir.cli.push_commands import add_push_commands
from weir.cli.record_format import (
    FormatError,
    check_input_format,
    compile_format,
    input_tokens,
)
from weir.security.scram import DEFAULT_ITERATIONS

BOOTSTRAP_DEFAULT = "127.0.0.1:9092"
BOOTSTRAP_ENV = "WEIR_BOOTSTRAP"
# Named here, not imported, so the parser never loads the client stack.
CLIENT_CONFIG_ENV = "WEIR_CLIENT_CONFIG"
REQUEST_TIMEOUT_MS_DEFAULT = 10_000
ADMIN_TIMEOUT_MS_DEFAULT = 30_000
PRODUCE_TIMEOUT_MS_DEFAULT = 30_000
COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS_NAMES = ("0", "1", "all", "-1")


def positive_int(text: str) -> int:
    value = _int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more, not {text!r}")
    return value


def output_format(text: str) -> str:
    return TABLE if text == TABLE_ALIAS else text


def config_entry(text: str) -> tuple[str, str]:
    """`key=value` -> (key, value); the value may be empty or contain '='."""
    key, found, value = text.partition("=")
    if not found or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, not {text!r}")
    return key.strip(), value


def config_key(text: str) -> str:
    if not text.strip() or "=" in text:
        raise argparse.ArgumentTypeError(f"expected a config name, not {text!r}")
    return text.strip()


def timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 time (UTC when it names no zone)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected milliseconds since the epoch or an ISO-8601 time "
            f"like 2026-11-22T10:00:00Z, not {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


class VersionAction(argparse.Action):
    """`weir --version`: prints `weir X.Y.Z` and exits 0. The version is looked up only
    when asked for, so the parser itself never loads the client stack."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from weir.cli.kafka_client import client_software_version

        sys.stdout.write(f"weir {client_software_version()}\n")
        parser.exit(0)


def key_separator(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("the key separator must not be empty")
    return text


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def add_format_option(parser: argparse.ArgumentParser, *, default: str = TABLE) -> None:
    """`--format text|json` (`table` accepted for text), in the same words everywhere."""
    parser.add_argument(
        "--format",
        dest="output_format",
        type=output_format,
        choices=FORMATS,
        default=default,
        help="text for people (tables; the default), json for scripts",
    )


def _connection_options(suppress_defaults: bool) -> argparse.ArgumentParser:
    """Options accepted both before and after the subcommand (`weir --format json topic list`
    and `weir topic list --format json`). On subcommands their defaults are suppressed so a
    value given before the subcommand is not overwritten."""
    parent = argparse.ArgumentParser(add_help=False)
    default = argparse.SUPPRESS if suppress_defaults else None
    parent.add_argument(
        "-b",
        "--bootstrap",
        # Kafka's own tools and rpk spell it --bootstrap-server: accepted as the same flag.
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        default=default,
        help=f"brokers to connect to, comma-separated (env {BOOTSTRAP_ENV}; "
        f"default {BOOTSTRAP_DEFAULT})",
    )
    add_format_option(parent, default=argparse.SUPPRESS if suppress_defaults else TABLE)
    parent.add_argument(
        "--request-timeout-ms",
        type=positive_int,
        metavar="MS",
        default=argparse.SUPPRESS if suppress_defaults else REQUEST_TIMEOUT_MS_DEFAULT,
        help=f"how long to wait for each answer (default {REQUEST_TIMEOUT_MS_DEFAULT})",
    )
    _add_client_config_options(parent, suppress_defaults)
    return parent


def _add_client_config_options(parent: argparse.ArgumentParser, suppress_defaults: bool) -> None:
    """kcat's `-X key=value` and `-F FILE`: TLS and SASL settings (librdkafka's names).
    `-X` before and after the subcommand go to two lists (a subcommand's values would
    replace the others), joined by `parse_args`, the ones before first."""
    parent.add_argument(
        "-X",
        dest="client_properties" if suppress_defaults else "global_client_properties",
        action="append",
        metavar="KEY=VALUE",
        default=argparse.SUPPRESS if suppress_defaults else [],
        help="a client setting as kcat takes it, e.g. -X security.protocol=SASL_SSL "
        "(repeatable; see the user guide)",
    )
    parent.add_argument(
        "-F",
        # The Kafka tools' spelling of a client properties file.
        "--command-config",
        dest="client_config_file",
        metavar="FILE",
        default=argparse.SUPPRESS if suppress_defaults else None,
        help=f"a file of key=value client settings, as kcat's -F (env {CLIENT_CONFIG_ENV})",
    )


def build_parser() -> argparse.ArgumentParser:
    common = _connection_options(suppress_defaults=True)
    parser = argparse.ArgumentParser(
        prog="weir",
        description="Weir: a Kafka-compatible broker, and a client for it.",
        parents=[_connection_options(suppress_defaults=False)],
    )
    parser.add_argument("--version", action=VersionAction, help="print weir's version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = commands.add_parser(
        "serve", help="run a broker (see `weir serve --help`)", add_help=False
    )
    serve.add_argument("serve_args", nargs=argparse.REMAINDER)
    repair = commands.add_parser(
        "repair",
        help="check and repair a stopped broker's data dir (see `weir repair --help`)",
        add_help=False,
    )
    repair.add_argument("repair_args", nargs=argparse.REMAINDER)

    _add_topic_commands(commands, common)
    _add_group_commands(commands, common)
    _add_txn_commands(commands, common)
    _add_queue_commands(commands, common)
    add_push_commands(commands, common)
    _add_acl_commands(commands, common)
    _add_user_commands(commands, common)
    _add_cluster_commands(commands, common)
    _add_broker_commands(commands, common)

    _add_produce_command(commands, common)
    _add_consume_command(commands, common)
    return parser


def _add_topic_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    topic = commands.add_parser(
        "topic", help="create, list, describe, alter, add partitions to, trim or delete topics"
    )
    topic_commands = topic.add_subparsers(dest="topic_command", metavar="ACTION", required=True)

    create = topic_commands.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("name", help="the topic's name")
    create.add_argument(
        "--partitions",
        type=positive_int,
        default=-1,
        help="number of partitions (default: the broker's default_partition_count, 1 unless set)",
    )
    create.add_argument(
        "--replication-factor",
        type=positive_int,
        default=-1,
        help="replicas per partition (default: the broker's, 1)",
    )
    create.add_argument(
        "--config",
        type=config_entry,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config override, e.g. retention.ms=60000 (repeat for more)",
    )
    _add_admin_timeout(create, "the topic to be created")

    topic_commands.add_parser("list", parents=[common], help="list topics")

    describe = topic_commands.add_parser(
        "describe", parents=[common], help="partitions, leaders, offsets and configs of a topic"
    )
    describe.add_argument("name", help="the topic")
    describe.add_argument(
        "--all-configs", action="store_true", help="show every config, not only overrides"
    )

    delete = topic_commands.add_parser("delete", parents=[common], help="delete a topic")
    delete.add_argument("name", help="the topic")
    _add_admin_timeout(delete, "the topic to be deleted")

    alter = topic_commands.add_parser(
        "alter-config", parents=[common], help="set or remove topic config overrides"
    )
    alter.add_argument("name", help="the topic")
    alter.add_argument(
        "--set",
        dest="set_configs",
        type=config_entry,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one config override (repeat for more)",
    )
    alter.add_argument(
        "--delete",
        dest="delete_configs",
        type=config_key,
        action="append",
        default=[],
        metavar="KEY",
        help="remove one config override, back to the default (repeat for more)",
    )

    add = topic_commands.add_parser(
        "add-partitions", parents=[common], help="add partitions to a topic (never removes any)"
    )
    add.add_argument("name", help="the topic")
    count = add.add_mutually_exclusive_group(required=True)
    count.add_argument(
        "-n", "--num", dest="add_count", type=positive_int, metavar="N", help="add N partitions"
    )
    count.add_argument(
        "--total",
        dest="total_count",
        type=positive_int,
        metavar="N",
        help="grow the topic to N partitions in all",
    )
    _add_admin_timeout(add, "the partitions to be created")

    trim = topic_commands.add_parser(
        "trim",
        parents=[common],
        help="delete a topic's oldest records: move each partition's log start forward",
    )
    trim.add_argument("name", help="the topic")
    before = trim.add_mutually_exclusive_group(required=True)
    before.add_argument(
        "--before-offset",
        type=non_negative_int,
        metavar="O",
        help="delete the records below offset O (the new log start)",
    )
    before.add_argument(
        "--before-timestamp",
        dest="before_timestamp_ms",
        type=timestamp_ms,
        metavar="MS|ISO-8601",
        help="delete the records older than this time (ms since the epoch or ISO-8601)",
    )
    trim.add_argument("--partition", type=non_negative_int, metavar="P", help="only this partition")
    _add_admin_timeout(trim, "every partition to be trimmed")


def _add_admin_timeout(parser: argparse.ArgumentParser, awaited: str) -> None:
    parser.add_argument(
        "--timeout-ms",
        type=positive_int,
        default=ADMIN_TIMEOUT_MS_DEFAULT,
        metavar="MS",
        help=f"how long the broker may wait for {awaited} (default {ADMIN_TIMEOUT_MS_DEFAULT})",
    )


def _add_produce_command(commands: Any, common: argparse.ArgumentParser) -> None:
    produce = commands.add_parser(
        "produce",
        parents=[common],
        help="send stdin lines as records (one per line), like kcat -P",
        description="Each line of stdin becomes one record: its value, key and value split "
        "at -K, or the fields of a -f format. Input from a pipe or file is checked (up to "
        "16 MiB) before anything is sent.",
        epilog=FORMAT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_topic_argument(produce)
    produce.add_argument(
        "-K",
        "--key-separator",
        type=key_separator,
        metavar="SEP",
        help="split each line at the first SEP into key and value",
    )
    produce.add_argument(
        "-f",
        "--record-format",
        metavar="FORMAT",
        help="read each line with this format, e.g. '%%k %%v' (see below)",
    )
    produce.add_argument(
        "-k", "--key", metavar="KEY", help="the key of every record (a key from -K or -f wins)"
    )
    produce.add_argument(
        "-H",
        "--header",
        dest="headers",
        type=header_entry,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a header on every record (repeatable)",
    )
    produce.add_argument(
        "-p",
        "--partition",
        type=non_negative_int,
        metavar="P",
        help="send every record to partition P (default: by key, else sticky)",
    )
    produce.add_argument(
        "-c",
        "--count",
        dest="max_records",
        type=positive_int,
        metavar="N",
        help="stop after N records",
    )
    produce.add_argument(
        "--acks",
        choices=ACKS_NAMES,
        default="all",
        help="all (the default; also -1): every in-sync replica has each record, and the "
        "producer is idempotent; 1: the leader has it; 0: no answer awaited",
    )
    produce.add_argument(
        "-z",
        "--compression",
        choices=COMPRESSION_NAMES,
        default="none",
        help="compress each batch with this codec (default none)",
    )
    produce.add_argument(
        "--timeout-ms",
        type=positive_int,
        default=PRODUCE_TIMEOUT_MS_DEFAULT,
        metavar="MS",
        help="how long the broker may take to make a write durable "
        f"(default {PRODUCE_TIMEOUT_MS_DEFAULT})",
    )


def _add_consume_command(commands: Any, common: argparse.ArgumentParser) -> None:
    consume = commands.add_parser(
        "consume",
        parents=[common],
        help="print a topic's records, like kcat -C",
        description="Print records of a topic: of every partition (or those of -p) from "
        "the offsets of -o, or as a member of consumer group -g, which commits what it "
        "printed.",
        epilog=OFFSET_EPILOG + "\n" + FORMAT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_topic_argument(consume)
    consume.add_argument(
        "-g",
        "--group",
        dest="group_id",
        metavar="GROUP",
        help="consume as a member of this group, committing as it goes",
    )
    consume.add_argument(
        "-p",
        "--partition",
        dest="partitions",
        type=non_negative_int,
        action="append",
        metavar="P",
        help="only partition P (repeatable)",
    )
    consume.add_argument(
        "-o",
        "--offset",
        dest="offsets",
        type=offset_spec,
        action="append",
        default=[],
        metavar="[P:]SPEC",
        help="where to start (default end; in a group, where nothing is committed); see below",
    )
    consume.add_argument("--from-beginning", action="store_true", help="the same as -o beginning")
    consume.add_argument(
        "-e",
        "--exit-at-end",
        action="store_true",
        help="exit once every partition is read up to its end",
    )
    consume.add_argument(
        "-c",
        "-n",
        "--count",
        "--max-records",
        dest="max_records",
        type=positive_int,
        metavar="N",
        help="exit after N records",
    )
    consume.add_argument(
        "--timeout-ms",
        type=positive_int,
        metavar="T",
        help="exit after T ms without a new record (default: wait forever)",
    )
    consume.add_argument(
        "-f",
        "--record-format",
        metavar="FORMAT",
        help="print each record with this format, e.g. '%%p %%o %%k %%v\\n'",
    )
    consume.add_argument("--print-key", action="store_true",
                         help="print key<TAB>value instead of the value")  # fmt: skip


def _add_topic_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", nargs="?", help="the topic (or -t TOPIC)")
    parser.add_argument("-t", "--topic", dest="topic_flag", metavar="TOPIC",
                        help="the topic, as kcat's -t (instead of the TOPIC argument)")  # fmt: skip


def header_entry(text: str) -> tuple[str, bytes]:
    key, value = config_entry(text)
    return key, value.encode("utf-8")


def offset_spec(text: str) -> PartitionOffsetSpec:
    try:
        return parse_partition_offset_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _check_produce_consume(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    command = args.command
    if args.topic is not None and args.topic_flag is not None and args.topic != args.topic_flag:
        parser.error(
            f"{command}: the topic is given twice ({args.topic!r} and -t {args.topic_flag!r})"
        )
    args.topic = args.topic or args.topic_flag
    if not args.topic:
        parser.error(f"{command}: name the topic (weir {command} TOPIC, or -t TOPIC)")
    if args.record_format is not None:
        if command == "consume" and args.output_format == JSON:
            parser.error("consume: -f and --format json exclude each other")
        try:
            tokens = compile_format(args.record_format)
            if command == "produce":
                tokens = input_tokens(tokens)
                check_input_format(tokens, args.record_format)
        except FormatError as exc:
            parser.error(f"{command}: -f: {exc}")
        args.record_tokens = tokens
    else:
        args.record_tokens = None
    if command == "produce":
        if args.record_format is not None and args.key_separator is not None:
            parser.error("produce: -f and -K exclude each other (the format says where the key is)")
        return
    _check_consume(parser, args)


def _check_consume(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    specs: dict[int | None, OffsetSpec] = {}
    for item in args.offsets:
        if item.partition in specs:
            where = "every partition" if item.partition is None else f"partition {item.partition}"
            parser.error(f"consume: -o is given twice for {where}")
        specs[item.partition] = item.spec
    if args.from_beginning:
        if None in specs:
            parser.error("consume: -o and --from-beginning exclude each other")
        specs[None] = BEGINNING
    args.offset_specs = specs
    if args.group_id is not None and args.partitions:
        parser.error("consume: -p and -g exclude each other (the group assigns the partitions)")
    if args.print_key and (args.record_format is not None or args.output_format == JSON):
        parser.error("consume: --print-key goes with the plain output only (use %k in -f)")


OFFSET_EPILOG = """offsets (-o [P:]SPEC, repeatable; P: for partition P only):
  beginning | end      the log start | the end (only new records; the default)
  N                    offset N (an error, naming the valid range, if it is not held)
  +N | -N              N after the beginning | N before the end
  @MS                  the first record at or after timestamp MS (epoch milliseconds)
"""

FORMAT_EPILOG = """format fields (-f, kcat-style):
  %t topic  %p partition  %o offset  %T timestamp (ms)  %k key  %K key length
  %s or %v value  %S or %V value length  %h headers (k=v,k=v)  %H header count
  %% percent; escapes \\n \\r \\t \\0 \\\\
  produce reads %k %v %h %p %T from each line; text between fields tells where
  one ends. A null key or value prints empty, its length as -1.
"""


def _add_cluster_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    cluster = commands.add_parser(
        "cluster", help="a cluster's brokers, partitions and health; start a local one"
    )
    actions = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    actions.add_parser(
        "info", parents=[common], help="cluster id, controller, brokers and versions (API ranges)"
    )
    actions.add_parser(
        "status", parents=[common], help="controller, brokers, under-replicated and offline counts"
    )
    actions.add_parser("brokers", parents=[common], help="every live broker and what it leads")
    partitions = actions.add_parser(
        "partitions", parents=[common], help="leader, replicas and ISR of every partition"
    )
    partitions.add_argument("--topic", help="only this topic")
    partitions.add_argument(
        "--under-replicated", action="store_true", help="only partitions whose ISR is short"
    )
    partitions.add_argument("--offline", action="store_true", help="only partitions without leader")
    elect = actions.add_parser(
        "elect-leaders",
        parents=[common],
        help="move leadership back to each partition's preferred (first) replica",
    )
    elect.add_argument("--topic", help="only this topic (default: every partition)")
    elect.add_argument("--partition", type=non_negative_int, help="only this partition")
    elect.add_argument("--type", dest="election_type", choices=("preferred", "unclean"),
                       default="preferred",
                       help="preferred (the default): the first replica of each partition; "
                            "unclean: let an out-of-sync replica lead an offline partition "
                            "(loses what it lacks)")  # fmt: skip
    move = actions.add_parser(
        "reassign",
        parents=[common],
        help="move a partition's replicas to other brokers, while it serves",
    )
    move.add_argument("--topic", required=True, help="the partition's topic")
    move.add_argument(
        "--partition", type=non_negative_int, required=True, help="the partition's index"
    )
    target = move.add_mutually_exclusive_group(required=True)
    target.add_argument("--replicas", type=broker_list, metavar="N,N,...",
                        help="the new replicas, preferred leader first")  # fmt: skip
    target.add_argument("--cancel", action="store_true", help="cancel a move in progress")
    actions.add_parser("reassignments", parents=[common], help="moves in progress")
    up = actions.add_parser(
        "up",
        help="start etcd and a local cluster of brokers in the foreground (Ctrl-C stops all)",
        add_help=False,
    )
    up.add_argument("up_args", nargs=argparse.REMAINDER)


def _add_broker_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    broker = commands.add_parser("broker", help="take a broker out of service")
    actions = broker.add_subparsers(dest="broker_command", metavar="ACTION", required=True)
    decommission = actions.add_parser(
        "decommission",
        parents=[common],
        help="move every replica off a broker (to the others), so it can be stopped",
    )
    decommission.add_argument("node_id", type=non_negative_int, help="the broker's node id")
    decommission.add_argument("--dry-run", action="store_true", help="print the plan only")


def _add_resource_options(parser: argparse.ArgumentParser, pattern_types: Sequence[str]) -> None:
    parser.add_argument(
        "--topic",
        dest="topics",
        action="append",
        default=[],
        metavar="NAME",
        help="a topic (or, with --resource-pattern-type prefixed, a prefix); "
        "repeatable; * is every topic",
    )
    parser.add_argument(
        "--group",
        dest="groups",
        action="append",
        default=[],
        metavar="NAME",
        help="a consumer group; repeatable",
    )
    parser.add_argument(
        "--transactional-id",
        dest="transactional_ids",
        action="append",
        default=[],
        metavar="ID",
        help="a transactional id; repeatable",
    )
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type",
        choices=pattern_types,
        default=pattern_types[0],
        type=str.lower,
        help=f"how resource names match (default: {pattern_types[0]})",
    )


def _add_acl_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    acl = commands.add_parser("acl", help="create, list or delete ACLs (as kafka-acls.sh)")
    actions = acl.add_subparsers(dest="acl_command", metavar="ACTION", required=True)
    create = actions.add_parser(
        "create", parents=[common], help="allow or deny principals operations on resources"
    )
    create.add_argument(
        "--allow-principal",
        dest="allow_principals",
        action="append",
        default=[],
        metavar="PRINCIPAL",
        help="User:NAME (User:* for everyone) to allow; repeatable",
    )
    create.add_argument(
        "--deny-principal",
        dest="deny_principals",
        action="append",
        default=[],
        metavar="PRINCIPAL",
        help="a principal to deny; repeatable",
    )
    create.add_argument(
        "--host",
        dest="hosts",
        action="append",
        default=[],
        metavar="HOST",
        help="the client address the ACL applies to (default: * for any)",
    )
    create.add_argument(
        "--operation",
        dest="operations",
        action="append",
        default=[],
        metavar="OPERATION",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
        "DescribeConfigs, AlterConfigs, IdempotentWrite, All; repeatable",
    )
    _add_resource_options(create, ("literal", "prefixed"))
    for name, text in (
        ("list", "the ACLs matching a filter (everything left out matches anything)"),
        ("delete", "delete the ACLs matching a filter"),
    ):
        action = actions.add_parser(name, parents=[common], help=text)
        action.add_argument(
            "--principal",
            dest="principals",
            action="append",
            default=[],
            metavar="PRINCIPAL",
            help="only of this principal; repeatable",
        )
        action.add_argument("--host", help="only for this host")
        action.add_argument("--operation", help="only of this operation")
        action.add_argument(
            "--permission",
            choices=("allow", "deny"),
            type=str.lower,
            help="only ALLOW or DENY ACLs",
        )
        _add_resource_options(action, ("any", "match", "literal", "prefixed"))


def _add_user_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    user = commands.add_parser(
        "user", help="create, list or delete SCRAM users (as kafka-configs.sh --entity-type users)"
    )
    actions = user.add_subparsers(dest="user_command", metavar="ACTION", required=True)
    create = actions.add_parser(
        "create", parents=[common], help="store a user's SCRAM credential (salted here)"
    )
    create.add_argument("name", help="the user name (the principal is User:NAME)")
    create.add_argument("--password", required=True, help="the user's password")
    create.add_argument(
        "--mechanism",
        dest="mechanisms",
        action="append",
        default=[],
        choices=("SCRAM-SHA-256", "SCRAM-SHA-512"),
        type=str.upper,
        help="SCRAM-SHA-256 (default) or SCRAM-SHA-512; repeatable",
    )
    create.add_argument(
        "--iterations",
        type=positive_int,
        default=DEFAULT_ITERATIONS,
        help=f"PBKDF2 iterations, 4096-16384 (default {DEFAULT_ITERATIONS})",
    )
    listing = actions.add_parser(
        "list", parents=[common], help="users with SCRAM credentials, mechanisms and iterations"
    )
    listing.add_argument("names", nargs="*", metavar="NAME", help="only these users")
    delete = actions.add_parser("delete", parents=[common], help="delete a user's credentials")
    delete.add_argument("name", help="the user name")
    delete.add_argument(
        "--mechanism",
        dest="mechanisms",
        action="append",
        default=[],
        choices=("SCRAM-SHA-256", "SCRAM-SHA-512"),
        type=str.upper,
        help="only this mechanism's credential (default: all); repeatable",
    )


def broker_list(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected broker ids like 1,2,3, not {text!r}") from None
    if not ids or any(i < 0 for i in ids):
        raise argparse.ArgumentTypeError(f"expected broker ids like 1,2,3, not {text!r}")
    return ids


def _add_group_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    group = commands.add_parser(
        "group", help="list, describe, delete consumer groups or reset their offsets"
    )
    actions = group.add_subparsers(dest="group_command", metavar="ACTION", required=True)
    actions.add_parser("list", parents=[common], help="list groups with their type and state")
    describe = actions.add_parser(
        "describe", parents=[common], help="members, committed offsets and lag of a group"
    )
    describe.add_argument("group", help="the group id")
    delete = actions.add_parser("delete", parents=[common], help="delete an empty group")
    delete.add_argument("group", help="the group id")
    reset = actions.add_parser(
        "reset-offsets",
        parents=[common],
        help="move a group's committed offsets (a dry run without --execute)",
    )
    reset.add_argument("group", help="the group id")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", help="every partition of this topic")
    scope.add_argument(
        "--all-topics", action="store_true", help="every topic the group has committed offsets for"
    )
    reset.add_argument("--to-earliest", action="store_true", help="to the log start")
    reset.add_argument("--to-latest", action="store_true", help="to the high watermark")
    reset.add_argument("--to-offset", type=non_negative_int, metavar="N", help="to offset N")
    reset.add_argument(
        "--to-datetime",
        dest="to_timestamp_ms",
        type=timestamp_ms,
        metavar="ISO-8601",
        help="to the first record at or after this time, e.g. 2026-11-22T10:00:00Z",
    )
    reset.add_argument(
        "--shift-by",
        type=_int,
        metavar="N",
        help="move each committed offset by N (negative: back), kept within the log",
    )
    reset.add_argument("--execute", action="store_true", help="commit the plan")


def _add_queue_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    queue = commands.add_parser(
        "queue",
        help="share groups as queues: describe, purge, list and redrive their dead letters",
    )
    actions = queue.add_subparsers(dest="queue_command", metavar="ACTION", required=True)
    describe = actions.add_parser(
        "describe",
        parents=[common],
        help="a share group's state, members and, per partition, its start offset and lag",
    )
    describe.add_argument("--group", required=True, help="the share group")
    describe.add_argument(
        "--http",
        action="append",
        metavar="URL",
        help="a broker's HTTP address (HOST:PORT or URL; once per broker): adds the records "
        "by state its GET /v1/queues shows for the partitions it leads",
    )
    purge = actions.add_parser(
        "purge",
        parents=[common],
        help="move a share group past every record produced so far (its members stopped)",
    )
    purge.add_argument("--group", required=True, help="the share group")
    purge.add_argument("--topic", help="only this topic (default: every topic of the group)")
    purge.add_argument(
        "--dry-run", action="store_true", help="show what would be skipped, change nothing"
    )
    letters = actions.add_parser(
        "dead-letters",
        aliases=["peek"],
        parents=[common],
        help="list a share group's dead letters, with their source and reason",
    )
    redrive = actions.add_parser(
        "redrive",
        parents=[common],
        help="write a share group's dead letters back to their topic (or another), once each",
    )
    for action in (letters, redrive):
        action.add_argument("--group", required=True, help="the share group")
        action.add_argument(
            "--from",
            dest="dead_letter_topic",
            metavar="TOPIC",
            help="the dead-letter topic (default: the group's errors.deadletterqueue.topic.name)",
        )
        action.add_argument(
            "--max", dest="records_max", type=positive_int, metavar="N", help="at most N"
        )
    redrive.add_argument(
        "--to",
        dest="to_topic",
        metavar="TOPIC",
        help="write them to TOPIC, partitioned by key (default: each to its source "
        "topic and partition)",
    )


FIND_HANGING_TIMEOUT_MINUTES_DEFAULT = 15


def _add_txn_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    txn = commands.add_parser(
        "txn", help="list, describe transactions; find and abort hanging ones"
    )
    actions = txn.add_subparsers(dest="txn_command", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list", parents=[common], help="transactional ids, their coordinator, producer and state"
    )
    listing.add_argument("--state", dest="states", action="append", default=[], metavar="STATE",
                         help="only in this state (Empty, Ongoing, PrepareCommit, PrepareAbort, "
                              "CompleteCommit, CompleteAbort, ...); repeatable")  # fmt: skip
    listing.add_argument("--producer-id", dest="producer_ids", action="append", default=[],
                         type=non_negative_int, metavar="ID",
                         help="only of this producer id; repeatable")  # fmt: skip
    listing.add_argument(
        "--duration-filter-ms",
        # kafka-transactions.sh spells it --duration-filter (KIP-994)
        "--duration-filter",
        dest="duration_filter_ms",
        type=non_negative_int,
        metavar="MS",
        help="only transactions running longer than this",
    )
    listing.add_argument("--transactional-id-pattern", metavar="REGEX",
                         help="only transactional ids matching this regular expression "
                              "(Java syntax, matched by the broker)")  # fmt: skip
    describe = actions.add_parser(
        "describe", parents=[common], help="state, producer and partitions of a transactional id"
    )
    describe.add_argument("transactional_id", metavar="TRANSACTIONAL-ID", nargs="?",
                          help="the transactional id")  # fmt: skip
    describe.add_argument("--transactional-id", dest="transactional_id_option",
                          metavar="TRANSACTIONAL-ID",
                          help="the same, as kafka-transactions.sh spells it")  # fmt: skip
    abort = actions.add_parser(
        "abort",
        parents=[common],
        help="abort a hanging transaction on one partition (writes an abort marker)",
        description="Write an abort marker for one producer's open transaction on one "
        "partition, as kafka-transactions.sh abort does. Name the transaction by the "
        "offset it starts at (see `weir txn find-hanging`), or by its producer id, "
        "producer epoch and coordinator epoch.",
    )
    abort.add_argument("--topic", required=True, help="the partition's topic")
    abort.add_argument(
        "--partition", type=non_negative_int, required=True, help="the partition's index"
    )
    abort.add_argument(
        "--start-offset",
        type=non_negative_int,
        metavar="OFFSET",
        help="the offset the open transaction starts at",
    )
    abort.add_argument(
        "--producer-id",
        type=non_negative_int,
        metavar="ID",
        help="the producer id (with --producer-epoch and --coordinator-epoch)",
    )
    abort.add_argument(
        "--producer-epoch", type=non_negative_int, metavar="EPOCH", help="the producer epoch"
    )
    abort.add_argument(
        "--coordinator-epoch",
        type=_int,
        metavar="EPOCH",
        help="the coordinator epoch (-1, as DescribeProducers may say, counts as 0)",
    )
    hanging = actions.add_parser(
        "find-hanging",
        parents=[common],
        help="open transactions no coordinator will end (they hold back read_committed reads)",
    )
    hanging.add_argument("--broker-id", type=non_negative_int, metavar="ID",
                         help="search the partitions this broker has a replica of")  # fmt: skip
    hanging.add_argument("--topic", help="search this topic's partitions")
    hanging.add_argument("--partition", type=non_negative_int, help="only this partition")
    hanging.add_argument(
        "--max-transaction-timeout",
        dest="max_transaction_timeout_minutes",
        type=non_negative_int,
        metavar="MINUTES",
        default=FIND_HANGING_TIMEOUT_MINUTES_DEFAULT,
        help="the longest transaction timeout in use: transactions open longer are "
        f"checked (default {FIND_HANGING_TIMEOUT_MINUTES_DEFAULT})",
    )


def _check_txn(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.txn_command == "describe":
        given = [t for t in (args.transactional_id, args.transactional_id_option) if t is not None]
        if len(given) != 1:
            parser.error("txn describe: give the transactional id once")
        args.transactional_id = given[0]
    elif args.txn_command == "abort":
        by_producer = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
        if args.start_offset is not None and any(v is not None for v in by_producer):
            parser.error(
                "txn abort: --start-offset excludes --producer-id, --producer-epoch and "
                "--coordinator-epoch"
            )
        if args.start_offset is None and any(v is None for v in by_producer):
            parser.error(
                "txn abort: name the transaction with --start-offset, or with all of "
                "--producer-id, --producer-epoch and --coordinator-epoch"
            )
    elif args.txn_command == "find-hanging":
        if args.topic is None and args.broker_id is None:
            parser.error("txn find-hanging: give --topic or --broker-id to limit the search")
        if args.partition is not None and args.topic is None:
            parser.error("txn find-hanging: --partition needs --topic")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse and cross-check options; argparse exits with code 2 on misuse."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.client_properties = [
        *args.global_client_properties,
        *getattr(args, "client_properties", []),
    ]
    if args.command in ("produce", "consume"):
        _check_produce_consume(parser, args)
    if args.command == "txn":
        _check_txn(parser, args)
    if args.command == "topic" and args.topic_command == "alter-config":
        if not args.set_configs and not args.delete_configs:
            parser.error("topic alter-config: give --set KEY=VALUE and/or --delete KEY")
        overlap = {k for k, _ in args.set_configs} & set(args.delete_configs)
        if overlap:
            parser.error(f"topic alter-config: both set and deleted: {', '.join(sorted(overlap))}")
    return args
