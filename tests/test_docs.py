"""The docs, checked against the code they describe, mechanically:

- every `weir ...` command in README.md and docs/*.md (shell code blocks and
  inline code) names commands and options the real parsers have; one without
  placeholders (NAME, [--flag], ...) is parsed whole, as `weir` would parse it;
- every TOML shown (```toml blocks, `cat > x.toml <<EOF` files) loads through
  the broker's own settings loader, and every inline `key = value` names a setting;
- a `weir serve --config FILE` shows FILE in the same document.

Commands run against a broker are not run here: parsing proves the spelling,
the CLI's own tests prove the behaviour."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from weir.broker.config import BrokerConfig, ConfigError, Limits, load_config
from weir.broker.config import build_argument_parser as build_serve_parser
from weir.broker.repair import build_parser as build_repair_parser
from weir.broker.security_config import SETTING_NAMES as SECURITY_SETTING_NAMES
from weir.cli.arguments import build_parser, parse_args
from weir.cli.local_cluster import build_up_parser, parse_up_args

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"sh", "bash", "shell", "console", ""}
# Words that may stand before the command itself on a shell line.
COMMAND_PREFIXES = {"sudo", "nohup", "exec", "time", "env", "!"}
# A word that stands for a value the reader picks: NAME, N, HOST:PORT, URL[,URL...].
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(?:[:,=.]\S*)?$|[\[\]<>{}|]|\.\.\.")
# Shell variables and substitutions stand for a bootstrap list or a broker id.
SHELL_VALUE = re.compile(r"\$\(|\$\{?[A-Za-z_]")
TOML_ASSIGNMENT = re.compile(r"^(limits\.)?([a-z][a-z0-9_]*) = \S")


@dataclass(frozen=True)
class Found:
    """Something a doc says, and where."""

    path: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.text}"


@dataclass(frozen=True)
class CodeBlock:
    path: Path
    first_line: int  # of the block's first content line
    language: str
    lines: tuple[str, ...]


def code_blocks(path: Path) -> Iterator[CodeBlock]:
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = lines[index].strip()
        if opening.startswith("```"):
            language = opening[3:].strip()
            end = index + 1
            while end < len(lines) and not lines[end].strip().startswith("```"):
                end += 1
            yield CodeBlock(path, index + 2, language, tuple(lines[index + 1 : end]))
            index = end
        index += 1


def prose_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The lines outside code blocks, numbered; a paragraph's inline code may wrap,
    so each line is joined with the next."""
    lines = path.read_text().splitlines()
    inside = False
    for number, line in enumerate(lines, start=1):
        if line.strip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            following = lines[number] if number < len(lines) else ""
            yield number, line + " " + following.strip()


def inline_code(path: Path) -> Iterator[Found]:
    seen: set[tuple[int, str]] = set()
    for number, text in prose_lines(path):
        for match in re.finditer(r"`([^`]+)`", text):
            span = " ".join(match.group(1).split())
            start_line = number if match.start() < len(text) else number + 1
            if (start_line, span) not in seen and (number - 1, span) not in seen:
                seen.add((start_line, span))
                yield Found(path, start_line, span)


def shell_commands(block: CodeBlock) -> Iterator[Found]:
    """Each simple command of a shell block (comments and heredoc bodies dropped),
    split at pipes, `;`, `&&`, `||` and `&`."""
    for number, line in logical_lines(block):
        for segment in re.split(r"\|\||&&|[|;&]|\$\(|\)", _alternatives_joined(line)):
            if segment.strip():
                yield Found(block.path, number, segment.strip())


def logical_lines(block: CodeBlock) -> Iterator[tuple[int, str]]:
    """A block's lines, a `\\` continuation or a synopsis's indented `[...]`, `(...)`
    or `| ...` continuation joined to the line before; heredoc bodies left out."""
    joined: list[tuple[int, str]] = []
    heredoc_end: str | None = None
    continued = False
    for offset, raw in enumerate(block.lines):
        if heredoc_end is not None:
            heredoc_end = None if raw.strip() == heredoc_end else heredoc_end
            continue
        line = "" if raw.lstrip().startswith("#") else raw.split(" #")[0].rstrip()
        synopsis_more = raw[:1].isspace() and raw.lstrip()[:1] in ("[", "(", "|")
        if joined and (continued or synopsis_more):
            joined[-1] = (joined[-1][0], joined[-1][1] + " " + line.strip().rstrip("\\"))
        else:
            joined.append((block.first_line + offset, line.rstrip("\\")))
        continued = line.endswith("\\")
        heredoc = re.search(r"<<-?\s*'?\"?(\w+)", line)
        if heredoc:
            heredoc_end = heredoc.group(1)
    yield from joined


def _alternatives_joined(line: str) -> str:
    """A synopsis's `(--num N | --total N)` or `[-K SEP | -f FORMAT]`: its `|` is
    not a pipe, nor its `(` a subshell; inside brackets both become spaces
    (a `$(...)` substitution stays)."""
    opened: list[str] = []
    out = []
    for index, char in enumerate(line):
        if char in "([":
            substitution = char == "(" and line[index - 1 : index] == "$"
            opened.append("$" if substitution else char)
            out.append(char if substitution or char == "[" else " ")
        elif char in ")]" and opened:
            kind = opened.pop()
            out.append(" " if kind == "(" else char)
        elif char == "|" and any(kind != "$" for kind in opened):
            out.append(" ")
        else:
            out.append(char)
    return "".join(out)


def _without_redirections(words: list[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in ("<", ">", ">>", "2>", "2>>"):
            skip = True
        elif not re.match(r"^\d?>>?&?\S|^<\S", word):
            kept.append(word)
    return kept


def weir_arguments(command: str) -> list[str] | None:
    """The arguments of `weir` (or `path/to/weir`) when it is the command run."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and (words[0] in COMMAND_PREFIXES or re.match(r"^[A-Z_]+=", words[0])):
        words = words[1:]
    if not words or (words[0] != "weir" and not words[0].endswith("/weir")):
        return None
    if len(words) > 1 and words[1].endswith(":"):
        return None  # its output shown (`weir serve: error: ...`), not a command
    return _without_redirections(words[1:])


def documented_commands() -> Iterator[tuple[Found, list[str], bool]]:
    """(where, arguments, whole): `whole` commands are complete shell lines;
    inline code may name only the start of a command."""
    for path in DOCS:
        for block in code_blocks(path):
            if block.language not in SHELL_LANGUAGES:
                continue
            for command in shell_commands(block):
                arguments = weir_arguments(command.text)
                if arguments is not None:
                    yield command, arguments, True
        for span in inline_code(path):
            arguments = weir_arguments(span.text)
            if arguments is not None:
                yield span, arguments, False


def _parser_for(arguments: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser of a command whose arguments go to another parser whole."""
    if arguments[:1] == ["serve"]:
        return build_serve_parser(), arguments[1:]
    if arguments[:1] == ["repair"]:
        return build_repair_parser(), arguments[1:]
    if arguments[:2] == ["cluster", "up"]:
        return build_up_parser(), arguments[2:]
    return build_parser(), arguments


def spelling_errors(arguments: list[str]) -> list[str]:
    """Commands and options that do not exist, checked without values: each option
    must be one of the parser the words so far reached (or of one above it, as the
    global options are), each word where a command is expected one of its choices."""
    parser, words = _parser_for(arguments)
    reachable = [parser]
    errors = []
    index = 0
    while index < len(words):
        word = words[index].strip("[]()")
        index += 1
        if word.startswith("-") and len(word) > 1 and not re.match(r"^-\d", word):
            name = word.split("=")[0].rstrip(".")
            action = next(
                (p._option_string_actions[name] for p in reversed(reachable)
                 if name in p._option_string_actions),
                None,
            )  # fmt: skip
            if action is None:
                errors.append(f"no option {name}")
            elif action.nargs != 0 and "=" not in word:
                index += 1  # its value
            continue
        commands = [a for a in reachable[-1]._actions if isinstance(a, argparse._SubParsersAction)]
        if commands and not PLACEHOLDER.search(word) and not SHELL_VALUE.search(word):
            choice = commands[0].choices.get(word)
            if choice is None:
                errors.append(f"no command {word!r} (choose from {', '.join(commands[0].choices)})")
                break
            reachable.append(choice)
    return errors


def parse_errors(arguments: list[str]) -> str | None:
    """The whole command, through the parser `weir` uses; its error, or None."""
    values = [re.sub(r"^\$.*|\$\(.*", "1", word) for word in arguments]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            if values[:1] == ["serve"]:
                build_serve_parser().parse_args(values[1:])
            elif values[:1] == ["repair"]:
                build_repair_parser().parse_args(values[1:])
            elif values[:2] == ["cluster", "up"]:
                parse_up_args(values[2:])
            else:
                parse_args(values)
    except ConfigError as exc:
        return str(exc)
    except SystemExit as exc:
        return None if exc.code == 0 else stderr.getvalue().strip().splitlines()[-1]
    return None


def has_placeholder(arguments: list[str]) -> bool:
    return any(PLACEHOLDER.search(word) for word in arguments)


def test_docs_name_commands_and_options_that_exist() -> None:
    wrong = []
    for found, arguments, _ in documented_commands():
        errors = spelling_errors(arguments)
        if errors:
            wrong.append(f"{found.where()}\n    {'; '.join(errors)}")
    assert wrong == [], "commands in the docs that weir does not have:\n" + "\n".join(wrong)


def test_docs_complete_commands_parse_as_weir_parses_them() -> None:
    wrong = []
    checked = 0
    for found, arguments, whole in documented_commands():
        if not whole or not arguments or has_placeholder(arguments):
            continue
        checked += 1
        error = parse_errors(arguments)
        if error is not None:
            wrong.append(f"{found.where()}\n    {error}")
    assert wrong == [], "commands in the docs that weir refuses:\n" + "\n".join(wrong)
    assert checked >= 20, f"only {checked} complete commands found: is the extraction broken?"


def toml_documents() -> Iterator[tuple[Found, str]]:
    """Each ```toml block, and each file a shell block writes with `cat > F.toml <<EOF`."""
    for path in DOCS:
        for block in code_blocks(path):
            if block.language == "toml":
                yield Found(path, block.first_line, "```toml"), "\n".join(block.lines)
                continue
            if block.language not in SHELL_LANGUAGES:
                continue
            lines = list(block.lines)
            for index, line in enumerate(lines):
                heredoc = re.search(r"cat\s+>\s*(\S+\.toml)\s+<<-?\s*'?\"?(\w+)", line)
                if heredoc:
                    end = lines.index(heredoc.group(2), index + 1)
                    body = "\n".join(lines[index + 1 : end])
                    yield Found(path, block.first_line + index, line.strip()), body


# The [security] table checks that its certificate files exist; the docs' example
# paths (/etc/weir/broker.pem) need not.
MISSING_FILE_TEXT = ": no file "


def test_docs_toml_loads_through_the_brokers_settings_loader(tmp_path: Path) -> None:
    wrong = []
    documents = list(toml_documents())
    for number, (found, text) in enumerate(documents):
        settings_file = tmp_path / f"doc-{number}.toml"
        settings_file.write_text(text)
        try:
            load_config(["--config", str(settings_file)], {})
        except ConfigError as exc:
            if MISSING_FILE_TEXT not in str(exc):  # example paths need not exist here
                wrong.append(f"{found.where()}\n    {exc}")
    assert wrong == [], "TOML in the docs that `weir serve` refuses:\n" + "\n".join(wrong)
    assert len(documents) >= 2


def _setting_names() -> tuple[set[str], set[str]]:
    broker = {f.name for f in dataclasses.fields(BrokerConfig)} - {"limits", "security"}
    broker |= set(SECURITY_SETTING_NAMES)
    return broker, {f.name for f in dataclasses.fields(Limits)}


def test_docs_inline_settings_are_settings_of_the_broker() -> None:
    broker, limits = _setting_names()
    wrong = []
    for path in DOCS:
        for span in inline_code(path):
            match = TOML_ASSIGNMENT.match(span.text)
            if match is None:
                continue
            in_limits, name = match.groups()
            if name not in (limits if in_limits else broker | limits):
                wrong.append(span.where())
    assert wrong == [], "settings in the docs that the broker does not have:\n" + "\n".join(wrong)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_config_file_given_to_serve_is_shown_in_the_same_doc(path: Path) -> None:
    shown = {Path(found.text.split(">")[1].split()[0]).name for found, _ in toml_documents()
             if found.path == path and found.text.startswith("cat")}  # fmt: skip
    text = path.read_text()
    missing = []
    for found, arguments, whole in documented_commands():
        if found.path != path or not whole or arguments[:1] != ["serve"]:
            continue
        if "--config" in arguments:
            name = arguments[arguments.index("--config") + 1]
            named_in_toml_intro = re.search(rf"`{re.escape(name)}`[^`]*\n*```toml", text)
            if not PLACEHOLDER.search(name) and name not in shown and not named_in_toml_intro:
                missing.append(found.where())
    assert missing == [], "`--config FILE` with FILE shown nowhere in the doc:\n" + "\n".join(
        missing
    )


def test_readme_failover_time_is_the_default_session_timeout() -> None:
    """The cluster walkthrough says how long a killed leader's partitions wait, in
    the default's own words: keep it true when the default changes."""
    readme = (ROOT / "README.md").read_text()
    session_s = BrokerConfig().broker_session_timeout_ms / 1000
    assert f"`broker_session_timeout_ms` ({session_s:g} s by default)" in readme


def test_the_checks_catch_what_they_are_for() -> None:
    """The checker itself: a misspelt command, an unknown option, a bad value."""
    assert spelling_errors(["topic", "alter", "t"]) != []
    assert spelling_errors(["--bootstrap-servers", "h:1", "topic", "list"]) != []
    assert spelling_errors(["topic", "create", "NAME", "[--partitions", "N]"]) == []
    assert parse_errors(["produce", "t", "--acks", "2"]) is not None
    assert parse_errors(["serve", "--node-id", "1", "--bogus"]) is not None
    assert parse_errors(["cluster", "up", "--format", "yaml"]) is not None
    block = CodeBlock(ROOT / "README.md", 1, "sh", ("a | weir -b $B produce t &  # note",))
    assert [weir_arguments(c.text) for c in shell_commands(block)] == [
        None, ["-b", "$B", "produce", "t"],
    ]  # fmt: skip
