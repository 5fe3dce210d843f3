"""kafkajs (Node.js, from npm) against the real `weir serve` process.

`compat_tests/kafkajs/client.js` runs one scenario per process and prints a JSON
document; `scripts/test` installs its pinned kafkajs with `npm ci`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from compat_tests.harness import WeirProcess, create_topic
from compat_tests.test_durability import read_everything

CLIENT = Path(__file__).with_name("kafkajs") / "client.js"
RUN_TIMEOUT_S = 60


def run_kafkajs(broker: WeirProcess, scenario: str, topic: str, arg: str = "") -> Any:
    node = shutil.which("node")
    if node is None or not (CLIENT.parent / "node_modules" / "kafkajs").is_dir():
        pytest.fail("node or kafkajs is missing: run scripts/test, which installs them")
    result = subprocess.run(
        [node, str(CLIENT), broker.bootstrap, scenario, topic, arg],
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    document = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert result.returncode == 0, document.get("error", result.stderr.decode())
    return document


def test_kafkajs_admin_creates_grows_describes_and_deletes_topics(
    broker: WeirProcess, topic: str
) -> None:
    result = run_kafkajs(broker, "admin", topic)
    assert result == {
        "validateOnly": True,
        "created": True,
        "badName": "INVALID_TOPIC_EXCEPTION",
        "listed": True,
        "partitions": 3,
        "grownPartitions": 4,
        "offsets": [[p, "0", "0"] for p in range(4)],
        "deleted": True,
    }


@pytest.mark.parametrize("mode", ["plain", "idempotent"])
def test_kafkajs_producer_writes_keyed_records_with_headers(
    broker: WeirProcess, topic: str, mode: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=3)
    result = run_kafkajs(broker, "produce", topic, mode)
    assert len(result["sent"]) == 15  # 5 sends x 3 partitions
    stored = read_everything(broker.bootstrap, topic, 3)
    values = sorted(int(value.decode()[1:]) for _key, value in stored.values() if value)
    assert values == list(range(100))
    # kafkajs's default partitioner is murmur2 over the key, like Java's: one key, one partition.
    partitions_of_key: dict[bytes, set[int]] = {}
    for (partition, _offset), (key, _value) in stored.items():
        assert key is not None
        partitions_of_key.setdefault(key, set()).add(partition)
    assert all(len(partitions) == 1 for partitions in partitions_of_key.values())


def test_kafkajs_group_consumer_reads_everything_and_commits(
    broker: WeirProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, partitions=3)
    run_kafkajs(broker, "produce", topic, "plain")
    result = run_kafkajs(broker, "consume-group", topic, "100")
    assert sorted(result["values"]) == sorted(f"v{i}" for i in range(100))
    high = _high_watermarks(broker, topic, 3)
    # kafkajs commits on its interval and when it disconnects: everything it read.
    assert {p: o for p, o in result["committed"]} == high


def _high_watermarks(broker: WeirProcess, topic: str, partitions: int) -> dict[int, int]:
    stored = read_everything(broker.bootstrap, topic, partitions)
    ends: dict[int, int] = {}
    for partition, offset in stored:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends
