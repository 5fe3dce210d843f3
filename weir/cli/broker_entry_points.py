"""`weir serve` and `weir repair`: the only two places the `weir` command enters the
broker package, by name. Every other CLI command is a Kafka-protocol client that talks
to a running broker over the network; the import contracts (pyproject.toml,
`[tool.importlinter]`) forbid weir.cli from importing weir.broker anywhere else.

The imports are inside the functions so that the client commands never load the
broker (and its Trio server) at all.
"""

from __future__ import annotations

import sys

EXIT_FAILURE = 1


def run_serve(argv: list[str]) -> int:
    """`weir serve ARGS...`: every argument goes untouched to the broker's own parser."""
    try:
        from weir.broker.app import main_serve
    except ImportError as exc:
        return _cannot_load("the broker", exc)
    return main_serve(argv)


def run_repair(argv: list[str]) -> int:
    """`weir repair ARGS...`: the offline repair tool over a stopped broker's data dir."""
    try:
        from weir.broker.repair import main_repair
    except ImportError as exc:
        return _cannot_load("the repair tool", exc)
    return main_repair(argv)


def _cannot_load(what: str, exc: ImportError) -> int:
    print(f"error: {what} cannot be loaded: {exc}", file=sys.stderr)
    return EXIT_FAILURE
