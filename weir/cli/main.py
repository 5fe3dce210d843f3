"""The `weir` command: `serve` runs a broker; `topic`, `produce`, `consume` are clients.

`weir serve ...` hands every argument, untouched, to `weir.broker.app.main_serve`
(through `weir.cli.broker_entry_points`, the CLI's only way into the broker).
Client commands report expected failures (connection refused, unknown topic, Kafka
error codes) as one `error: ...` line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from weir.cli.arguments import BOOTSTRAP_DEFAULT, BOOTSTRAP_ENV, parse_args
from weir.cli.broker_entry_points import run_repair, run_serve

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["serve"]:
        return run_serve(args_list[1:])
    if args_list[:1] == ["repair"]:
        return run_repair(args_list[1:])
    if args_list[:2] == ["cluster", "up"]:
        from weir.cli.local_cluster import main_cluster_up

        return main_cluster_up(args_list[2:])
    try:
        args = parse_args(args_list)
    except SystemExit as exc:  # argparse: --help (0) or misuse (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.command == "serve":
        return run_serve(args.serve_args)
    if args.command == "repair":
        return run_repair(args.repair_args)
    try:
        return run_client_command(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout was closed early (`weir consume t | head`): not an error of ours.
        _silence_stdout()
        return EXIT_OK


def run_client_command(args: argparse.Namespace) -> int:
    # Imported here so that `weir serve` and `weir --help` never depend on the client stack.
    from weir.cli.client_config import resolve_client_config
    from weir.cli.cluster import Cluster
    from weir.cli.commands import run_command
    from weir.cli.errors import CliError
    from weir.cli.kafka_client import parse_bootstrap

    try:
        config = resolve_client_config(args.client_properties, args.client_config_file, os.environ)
    except CliError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    bootstrap_text = (
        args.bootstrap or config.bootstrap or os.environ.get(BOOTSTRAP_ENV) or BOOTSTRAP_DEFAULT
    )
    try:
        bootstrap = parse_bootstrap(bootstrap_text)
    except ValueError as exc:
        print(f"error: --bootstrap: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with Cluster(
            bootstrap, request_timeout_ms=args.request_timeout_ms, security=config.security
        ) as cluster:
            return run_command(args, cluster, sys.stdin.buffer, sys.stdout)
    except CliError as exc:
        sys.stdout.flush()
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
