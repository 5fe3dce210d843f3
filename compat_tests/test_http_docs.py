"""docs/http.md's tour, run: its ```sh blocks in order in bash (`set -euo pipefail`;
the examples use `curl -sf`, so an HTTP error fails them) and its boto3 block where
it stands, against a real `weir serve`, with the addresses of this test's broker in
place of the defaults the page shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import WeirProcess

pytestmark = pytest.mark.timeout(120)

DOC = Path(__file__).resolve().parents[1] / "docs" / "http.md"
BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)
DOC_HTTP = "127.0.0.1:8090"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    process = WeirProcess(
        tmp_path_factory.mktemp("http-docs") / "data", tmp_path_factory.mktemp("logs")
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_the_http_tour_runs_as_written(broker: WeirProcess) -> None:
    address = broker.http_url.removeprefix("http://")
    blocks = BLOCK.findall(DOC.read_text())
    assert [kind for kind, _ in blocks].count("python") == 1, "the tour has one boto3 block"
    prelude = ""  # the first block's variables, for the blocks after it
    outputs = []
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "WEIR_BOOTSTRAP": broker.bootstrap,
        "HOME": str(broker.data_dir.parent),  # no ~/.aws, no ~/.curlrc
    }
    for kind, text in blocks:
        text = text.replace(DOC_HTTP, address)
        if kind == "python":
            exec(text, {})  # noqa: S102 (the document's own example)
            continue
        script = f"set -euo pipefail\n{prelude}{text}"
        done = subprocess.run(
            ["bash", "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode == 0, f"{text}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        outputs.append(done.stdout)
        if not prelude:
            prelude = "".join(
                line + "\n" for line in text.splitlines() if "=" in line.split(" ")[0]
            )
    shown = "".join(outputs)
    assert shown.startswith("3.1"), shown
    assert '{"partition_id":0,"offset":0}' in shown, shown
    assert '{"item":"book","qty":2}' in shown, shown
    assert "hello" in shown, shown  # the AWS CLI received what it sent
    assert "orders-hook" in shown, shown
