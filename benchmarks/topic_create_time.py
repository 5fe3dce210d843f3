"""Wall time of creating and deleting one many-partition topic on a fresh broker.

Starts `weir serve` from the given source tree (its own ports and a fresh data
dir), then times confluent-kafka's AdminClient creating one topic of
`--partitions` partitions and deleting it:

    .venv/bin/python benchmarks/topic_create_time.py /tmp/weir-before --port 19600
    .venv/bin/python benchmarks/topic_create_time.py . --port 19610

Run the builds alternately, several times: this machine's disk latency drifts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parent.parent
PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
READY_TIMEOUT_S = 30.0
SETTLE_S = 2.0  # the broker's own start-up work (the offsets topic) finishes first
ADMIN_TIMEOUT_S = 120.0


def start_broker(tree: Path, port: int, data_dir: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            str(PYTHON),
            "-m",
            "weir.cli.main",
            "serve",
            "--data-dir",
            data_dir,
            "--kafka-listen",
            f"127.0.0.1:{port}",
            "--http-listen",
            f"127.0.0.1:{port + 1}",
        ],  # fmt: skip
        env=dict(os.environ, PYTHONPATH=str(tree)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_until_serving(admin: AdminClient) -> None:
    deadline_s = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            admin.list_topics(timeout=1)
            return
        except Exception:  # not listening yet
            if time.monotonic() > deadline_s:
                raise
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="source tree to run weir from")
    parser.add_argument("--port", type=int, default=19600, help="Kafka port (HTTP: port + 1)")
    parser.add_argument("--partitions", type=int, default=1000)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="weir-create-time-")
    broker = start_broker(args.tree.resolve(), args.port, data_dir)
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{args.port}", "log_level": 0})
        wait_until_serving(admin)
        time.sleep(SETTLE_S)
        started_s = time.monotonic()
        created = admin.create_topics(
            [NewTopic("big", args.partitions)], request_timeout=ADMIN_TIMEOUT_S
        )
        created["big"].result(ADMIN_TIMEOUT_S)
        create_s = time.monotonic() - started_s
        started_s = time.monotonic()
        deleted = admin.delete_topics(["big"], request_timeout=ADMIN_TIMEOUT_S)
        deleted["big"].result(ADMIN_TIMEOUT_S)
        delete_s = time.monotonic() - started_s
        print(
            f"{args.tree}: create {args.partitions} partitions {create_s:.2f} s, "
            f"delete {delete_s:.2f} s"
        )
    finally:
        broker.terminate()
        broker.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
