"""The broker's syncfs helper process lives and dies with the broker."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from compat_tests.harness import WeirProcess

EXIT_WAIT_S = 15.0


def helper_pids(broker_pid: int) -> list[int]:
    """Child processes of the broker running the syncfs helper (`python -I -c`)."""
    pids = []
    for task in Path(f"/proc/{broker_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            if b"-I" in cmdline and b"-c" in cmdline:
                pids.append(int(child))
    return pids


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def wait_until_gone(pid: int) -> bool:
    deadline = time.monotonic() + EXIT_WAIT_S
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)  # polling another process's state
    return False


@pytest.fixture
def helper_of(own_broker: WeirProcess) -> int:
    if "fsync method syncfs" not in own_broker.stderr_text():
        pytest.skip("this kernel uses the fdatasync method (no helper process)")
    pids = helper_pids(own_broker.pid)
    assert len(pids) == 1, pids
    return pids[0]


def test_the_helper_exits_when_the_broker_is_killed(
    own_broker: WeirProcess, helper_of: int
) -> None:
    own_broker.kill()
    assert wait_until_gone(helper_of), "the syncfs helper outlived a SIGKILLed broker"


def test_the_helper_exits_with_a_clean_shutdown(own_broker: WeirProcess, helper_of: int) -> None:
    assert own_broker.stop() == 0
    assert wait_until_gone(helper_of)


def test_a_killed_helper_is_replaced_without_failing_produces(
    own_broker: WeirProcess, helper_of: int, topic: str
) -> None:
    from confluent_kafka import Producer

    os.kill(helper_of, 9)
    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "acks": "all"})
    errors: list[object] = []
    for i in range(50):
        producer.produce(topic, f"m{i}".encode(), on_delivery=lambda e, m: errors.append(e))
    producer.flush(30)
    assert errors == [None] * 50
    replacements = helper_pids(own_broker.pid)
    assert len(replacements) == 1 and replacements[0] != helper_of
