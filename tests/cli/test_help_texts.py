"""`--help` of every `weir` command, checked mechanically: every argument says what it
is, and every option with a default names it; the same option reads the same
everywhere; the default data dirs the commands write are kept out of git."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from weir.broker.config import BrokerConfig
from weir.broker.config import build_argument_parser as build_serve_parser
from weir.broker.repair import build_parser as build_repair_parser
from weir.cli.arguments import build_parser
from weir.cli.local_cluster import build_up_parser, parse_up_args

REPO_ROOT = Path(__file__).resolve().parents[2]
# A default that is not a value but "ask the broker": the help says whose default it is.
BROKER_DEFAULT_SENTINEL = -1
BROKER_DEFAULT_WORDS = "default: the broker's"
# Defaults that say nothing was given (no default to describe).
NO_DEFAULTS = (None, argparse.SUPPRESS, False, [])


def all_parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser a `weir ...` command line reaches, named by its command."""
    yield from _walk("weir", build_parser())
    yield "weir cluster up", build_up_parser()
    yield "weir serve", build_serve_parser()
    yield "weir repair", build_repair_parser()


def _walk(
    name: str, parser: argparse.ArgumentParser
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from _walk(f"{name} {command}", sub)


def described_arguments() -> Iterator[tuple[str, argparse.Action]]:
    for name, parser in all_parsers():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            if action.nargs == argparse.REMAINDER:  # handed whole to another parser
                continue
            yield name, action


def _label(command: str, action: argparse.Action) -> str:
    return f"{command} {'/'.join(action.option_strings) or action.dest}"


def test_every_argument_of_every_command_has_help() -> None:
    missing = [_label(c, a) for c, a in described_arguments() if not a.help]
    assert missing == [], "arguments without help: " + ", ".join(missing)


def test_every_option_with_a_default_names_it_in_its_help() -> None:
    silent = []
    for command, action in described_arguments():
        default = action.default
        if any(default is d or default == d for d in NO_DEFAULTS) or action.help is None:
            continue
        text = action.help % {"default": default}
        if default == BROKER_DEFAULT_SENTINEL and BROKER_DEFAULT_WORDS in text:
            continue
        if "default" not in text or str(default) not in text:
            silent.append(f"{_label(command, action)} (default {default!r}): {text!r}")
    assert silent == [], "options whose help does not name their default:\n" + "\n".join(silent)


def _format_action(parser: argparse.ArgumentParser) -> argparse.Action:
    return next(a for a in parser._actions if "--format" in a.option_strings)


def test_cluster_up_format_reads_as_the_global_format() -> None:
    overall, up = _format_action(build_parser()), _format_action(build_up_parser())
    assert (up.choices, up.help, up.default) == (overall.choices, overall.help, overall.default)
    assert parse_up_args(["--format", "table"]).output_format == overall.default


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_default_data_dirs_of_serve_and_cluster_up_are_git_ignored() -> None:
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    defaults = [
        BrokerConfig().data_dir,
        build_repair_parser().get_default("data_dir"),
        parse_up_args([]).data_dir,
    ]
    for directory in defaults:
        probe = Path(directory) / "some-file"
        ignored = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "check-ignore", "--no-index", "-q", str(probe)],
            check=False,
        )
        assert ignored.returncode == 0, f"{directory} is not in .gitignore"
