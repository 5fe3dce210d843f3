"""`weir produce` and `weir consume` throughput of several CLI builds, side by side
against one broker, in one run.

    git worktree add /tmp/weir-before <commit>
    .venv/bin/python benchmarks/cli_produce.py before=/tmp/weir-before after=. \\
        --lines 200000 --value-bytes 100 --rounds 5

Starts one `weir serve` (of this tree), writes an input file of `--lines` lines, and
in each round runs every build's `weir produce TOPIC < file` (its own topic, one
partition) and then `weir consume TOPIC --from-beginning -n LINES` of that topic; the builds
alternate within each round because this machine's speed drifts over minutes.
Prints each round's lines/s and the medians. The builds' code is chosen with
PYTHONPATH (the interpreter and dependencies are this tree's .venv).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
READY_TIMEOUT_S = 30.0
KAFKA_PORT = 19492
HTTP_PORT = 18492


@dataclass
class Build:
    name: str
    tree: Path
    produce_rates: list[float] = field(default_factory=list)
    consume_rates: list[float] = field(default_factory=list)


def parse_builds(specs: list[str]) -> list[Build]:
    builds = []
    for spec in specs:
        name, sep, tree = spec.partition("=")
        if not sep:
            raise SystemExit(f"expected NAME=SOURCE_TREE, got {spec!r}")
        builds.append(Build(name, Path(tree).resolve()))
    return builds


def start_broker(data_dir: Path) -> subprocess.Popen[bytes]:
    broker = subprocess.Popen(
        [str(PYTHON), "-m", "weir.cli.main", "serve", "--data-dir", str(data_dir),
         "--kafka-listen", f"127.0.0.1:{KAFKA_PORT}", "--http-listen", f"127.0.0.1:{HTTP_PORT}"],
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{HTTP_PORT}/health/ready", timeout=1):
                return broker
        except OSError:
            time.sleep(0.2)
    broker.kill()
    raise SystemExit("the broker did not become ready")


def weir(build: Build, *args: str, stdin_path: Path | None = None) -> float:
    """Run `weir ARGS` of `build`; the seconds it took."""
    command = [str(PYTHON), "-m", "weir.cli.main", "-b", f"127.0.0.1:{KAFKA_PORT}", *args]
    env = dict(os.environ, PYTHONPATH=str(build.tree))
    started = time.monotonic()
    with open(stdin_path or os.devnull, "rb") as stdin:
        subprocess.run(command, stdin=stdin, stdout=subprocess.DEVNULL, env=env, check=True)
    return time.monotonic() - started


def write_input(path: Path, lines: int, value_bytes: int) -> None:
    with open(path, "w") as out:
        for n in range(lines):
            out.write(f"{n:0{value_bytes}d}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs="+", metavar="NAME=SOURCE_TREE")
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    builds = parse_builds(args.builds)
    work = Path(tempfile.mkdtemp(prefix="weir-cli-bench-"))
    input_path = work / "input.txt"
    write_input(input_path, args.lines, args.value_bytes)
    broker = start_broker(work / "data")
    try:
        for round_index in range(args.rounds):
            for build in builds:
                topic = f"bench-{build.name}-{round_index}"
                weir(build, "topic", "create", topic, "--partitions", "1")
                produce_s = weir(build, "produce", topic, stdin_path=input_path)
                # Flags every build has: read from the start until all lines are printed.
                consume_s = weir(build, "consume", topic, "--from-beginning", "-n", str(args.lines))
                build.produce_rates.append(args.lines / produce_s)
                build.consume_rates.append(args.lines / consume_s)
                print(f"round {round_index + 1} {build.name}: produce "
                      f"{args.lines / produce_s:,.0f} lines/s, consume "
                      f"{args.lines / consume_s:,.0f} lines/s", flush=True)  # fmt: skip
        for build in builds:
            produce = statistics.median(build.produce_rates)
            consume = statistics.median(build.consume_rates)
            print(f"median {build.name}: produce {produce:,.0f} lines/s, "
                  f"consume {consume:,.0f} lines/s")  # fmt: skip
    finally:
        broker.terminate()
        broker.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
