"""Maven for the Java suites: where its repository and what it built live, and running it
offline.

`scripts/test` resolves every artifact into `.cache/maven` (the project's ignored cache)
and compiles the suite before pytest runs; the wrappers then run Maven with `-o`, so a
test never downloads anything and a missing artifact fails instead of hanging on the
network.
"""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import pytest

from compat_tests.harness import clean_environment

REPO_ROOT = Path(__file__).resolve().parent.parent
MAVEN_REPOSITORY = REPO_ROOT / ".cache" / "maven"
JAVA_SUITE = REPO_ROOT / "compat_tests" / "java"
# Where `scripts/test` compiles the suite, one directory per kafka-clients version
# (the pom's <build><directory>).
JAVA_SUITE_BUILDS = REPO_ROOT / ".cache" / "java-suite"
KAFKA_TOOLS_VERSION = "4.3.1"
# kafka-tools and its runtime dependencies, copied by compat_tests/java/kafka-tools/pom.xml.
KAFKA_TOOLS_DIR = REPO_ROOT / ".cache" / "kafka-tools" / KAFKA_TOOLS_VERSION
# kafka-configs.sh's ConfigCommand is in kafka-tools from 4.4.0 (scripts/test fetches both).
KAFKA_CONFIG_TOOLS_DIR = REPO_ROOT / ".cache" / "kafka-tools" / "4.4.0"
OUTPUT_TAIL_CHARS = 8000


def require_maven_build(*paths: Path) -> str:
    """The `mvn` executable, once `paths` (what scripts/test builds) exist; fails the test
    with what to run otherwise."""
    mvn = shutil.which("mvn")
    missing = [str(p) for p in paths if not p.exists()]
    if mvn is None or missing:
        pytest.fail(
            "the Java suites are not built (missing: "
            + ", ".join((["mvn on PATH"] if mvn is None else []) + missing)
            + "): run scripts/test, which installs Maven and resolves them into .cache/"
        )
    return mvn


def run_offline(
    mvn: str, *args: str, pom: Path, timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """`mvn -o -B -q ARGS` (no colour codes) on `pom` with the project's repository;
    stdout and stderr merged."""
    return subprocess.run(
        [
            mvn,
            "-o",
            "-B",
            "-q",
            "-Dstyle.color=never",
            f"-Dmaven.repo.local={MAVEN_REPOSITORY}",
            "-f",
            str(pom),
            *args,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout_s,
        env=clean_environment(),
        check=False,
    )


def tail(text: str) -> str:
    return text if len(text) <= OUTPUT_TAIL_CHARS else "...\n" + text[-OUTPUT_TAIL_CHARS:]


@dataclass(frozen=True)
class CaseOutcome:
    """One test case of a surefire XML report."""

    name: str  # "Class.method(...) display name"
    outcome: str  # "passed", "failed", "error" or "skipped"
    message: str


def surefire_outcomes(reports_dir: Path) -> list[CaseOutcome]:
    """Every test case of the TEST-*.xml reports in `reports_dir`."""
    outcomes = []
    for report in sorted(reports_dir.glob("TEST-*.xml")):
        for case in ElementTree.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name', '')}"
            outcome, message = "passed", ""
            for kind in ("failure", "error", "skipped"):
                element = case.find(kind)
                if element is not None:
                    outcome = {"failure": "failed"}.get(kind, kind)
                    message = (element.get("message") or "") + "\n" + (element.text or "")
                    break
            outcomes.append(CaseOutcome(name, outcome, message.strip()))
    return outcomes
