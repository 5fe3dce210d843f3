"""kcat (the Debian package, its own librdkafka) against the real `weir serve` process.

kcat must be installed (scripts/test installs it); a missing kcat fails these tests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from compat_tests.harness import WeirProcess, create_topic

KCAT_TIMEOUT_S = 30


def kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    path = shutil.which("kcat")
    assert path is not None, "kcat is not installed (scripts/test installs it with apt-get)"
    result = subprocess.run(
        [path, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=KCAT_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, (
        f"kcat {' '.join(args)} exited with {result.returncode}\n"
        f"stdout: {result.stdout.decode(errors='replace')}\n"
        f"stderr: {result.stderr.decode(errors='replace')}"
    )
    return result


def consume_json(broker: WeirProcess, topic: str, *extra: str) -> list[dict[str, Any]]:
    result = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-e", "-J", *extra)
    return [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]


def test_metadata_lists_the_broker_and_topic_partitions(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, partitions=3)
    result = kcat("-b", broker.bootstrap, "-L", "-J", "-t", topic)
    metadata = json.loads(result.stdout)
    assert metadata["brokers"] == [{"id": 1, "name": broker.bootstrap}]
    assert metadata["controllerid"] == 1
    [described] = metadata["topics"]
    assert described["topic"] == topic
    assert "error" not in described
    partitions = sorted(described["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in partitions] == [0, 1, 2]
    for partition in partitions:
        assert partition["leader"] == 1
        assert partition["replicas"] == [{"id": 1}]
        assert partition["isrs"] == [{"id": 1}]


def test_metadata_text_listing_names_the_topic(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, partitions=2)
    text = kcat("-b", broker.bootstrap, "-L").stdout.decode()
    assert f'topic "{topic}" with 2 partitions:' in text
    assert f"broker 1 at {broker.bootstrap}" in text


def test_produce_with_keys_then_consume_from_beginning(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic)
    lines = [f"key-{i}:value number {i}" for i in range(25)]
    kcat(
        "-b",
        broker.bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-K:",
        stdin="\n".join(lines).encode() + b"\n",
    )

    messages = consume_json(broker, topic, "-o", "beginning")
    assert [(m["partition"], m["offset"], m["key"], m["payload"]) for m in messages] == [
        (0, i, f"key-{i}", f"value number {i}") for i in range(25)
    ]


def test_plain_consumer_output_with_key_delimiter(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic)
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-K:", stdin=b"a:1\nb:2\nc:3\n")
    result = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-K:")
    assert result.stdout.decode().splitlines() == ["a:1", "b:2", "c:3"]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_produce_with_headers_round_trips(
    broker: WeirProcess, topic: str, codec: str
) -> None:
    create_topic(broker.bootstrap, topic)
    payload = "".join(f"k{i}:{codec}-{'z' * i}\n" for i in range(40)).encode()
    kcat(
        "-b",
        broker.bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-K:",
        "-z",
        codec,
        "-H",
        "origin=kcat",
        "-H",
        f"codec={codec}",
        "-X",
        "linger.ms=100",
        stdin=payload,
    )
    messages = consume_json(broker, topic, "-o", "beginning")
    assert [(m["offset"], m["key"], m["payload"]) for m in messages] == [
        (i, f"k{i}", f"{codec}-{'z' * i}") for i in range(40)
    ]
    assert all(m["headers"] == ["origin", "kcat", "codec", codec] for m in messages)


def test_consume_from_an_offset_with_a_count(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic)
    kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin=b"".join(b"m%d\n" % i for i in range(10)))
    messages = consume_json(broker, topic, "-o", "4", "-c", "3")
    assert [(m["offset"], m["payload"]) for m in messages] == [(4, "m4"), (5, "m5"), (6, "m6")]


def test_consume_relative_to_end(broker: WeirProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic)
    kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin=b"".join(b"m%d\n" % i for i in range(10)))
    messages = consume_json(broker, topic, "-o", "-2")
    assert [(m["offset"], m["payload"]) for m in messages] == [(8, "m8"), (9, "m9")]
