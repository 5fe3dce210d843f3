"""A real Kafka Streams application with exactly_once_v2 on a 3-broker Weir cluster, while
a broker is SIGKILLed and restarted (issue 21).

`compat_tests/streams/` is a word count (org.apache.kafka:kafka-streams 4.4.0; the
input's words counted into an output topic, key the word, value its count so far) that
`scripts/test` compiles into `.cache/streams/` beforehand. The test produces a known
input with confluent-kafka, runs the app as a child JVM, kills the broker leading the
first output partition in the middle of the run, restarts it, and then reads the output
with read_committed: the last count of every word equals the count computed from the
input, and, since the app emits every update, each word's committed counts are exactly
1, 2, ... up to it (no update lost or replayed, none from an aborted transaction). The
same run passes against Apache Kafka 4.4 (single node, no kill).
"""

from __future__ import annotations

import random
import shutil
import signal
import struct
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from compat_tests.cluster_harness import WeirCluster, running_cluster
from compat_tests.harness import clean_environment

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where `scripts/test` builds compat_tests/streams (its pom's streams.app.dir).
STREAMS_APP_DIR = REPO_ROOT / ".cache" / "streams"
APP_JAR = STREAMS_APP_DIR / "app.jar"
APP_MAIN = "dev.weir.streams.WordCount"
JVM_OPTS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)

JVM_SIGTERM_EXIT_CODE = 143
PARTITIONS = 3
LINES = 2000  # half before the kill, half while the broker is down
VOCABULARY = [
    "apple",
    "banana",
    "cherry",
    "damson",
    "elder",
    "fig",
    "grape",
    "hazel",
    "ivy",
    "juniper",
    "kiwi",
    "lime",
    "mango",
    "nectar",
    "olive",
    "peach",
    "quince",
    "rowan",
    "sloe",
    "tamarind",
]
APP_RUNNING_TIMEOUT_S = 60.0
COUNTS_TIMEOUT_S = 60.0
APP_STOP_TIMEOUT_S = 30.0
IO_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.2


def input_lines(count: int, seed: int) -> list[str]:
    """`count` lines of 1-8 words of VOCABULARY, the same for the same seed."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 8))) for _ in range(count)]


def produce_lines(bootstrap: str, topic: str, lines: list[str]) -> None:
    """Every line, acknowledged by all in-sync replicas (keyed by its number, spread over
    the partitions)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    errors: list[KafkaError] = []
    for number, line in enumerate(lines):
        producer.produce(
            topic,
            key=str(number).encode(),
            value=line.encode(),
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )
        producer.poll(0)
    assert producer.flush(IO_TIMEOUT_S) == 0
    assert errors == []


def read_counts(bootstrap: str, topic: str, partitions: int) -> dict[str, list[int]]:
    """Every count the output topic holds for each word, in order, read with read_committed
    from the start up to the last stable offset."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"streams-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    counts: dict[str, list[int]] = {}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + IO_TIMEOUT_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"did not reach the end of {topic}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, f"consumer error: {error!r}"
                at_end.add(msg.partition())
                continue
            key, value = msg.key(), msg.value()
            assert key is not None and value is not None
            counts.setdefault(key.decode(), []).append(struct.unpack(">q", value)[0])
    finally:
        consumer.close()
    return counts


class WordCountApp:
    """The Streams word count as a child JVM; its output goes to `log_path`."""

    def __init__(
        self,
        bootstrap: str,
        source: str,
        output: str,
        work_dir: Path,
        replication_factor: int,
    ) -> None:
        java = shutil.which("java")
        if java is None or not APP_JAR.exists():
            pytest.fail(
                f"the Streams app is not built (java: {java}, {APP_JAR} exists: "
                f"{APP_JAR.exists()}): run scripts/test, which builds compat_tests/streams"
            )
        work_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = work_dir / "word-count.log"
        command = [
            java,
            *JVM_OPTS,
            "-cp",
            f"{APP_JAR}:{STREAMS_APP_DIR / 'lib'}/*",
            APP_MAIN,
            bootstrap,
            source,
            output,
            f"word-count-{uuid.uuid4().hex[:8]}",
            str(work_dir / "state"),
            str(replication_factor),
        ]
        self.lines: list[str] = []
        with self.log_path.open("wb") as log:
            log.write(f"$ {' '.join(command)}\n".encode())
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=clean_environment(),
        )
        self._reader = threading.Thread(target=self._read_output, daemon=True)
        self._reader.start()

    def _read_output(self) -> None:
        assert self.process.stdout is not None
        with self.log_path.open("ab") as log:
            for raw in self.process.stdout:
                log.write(raw)
                log.flush()
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def output_tail(self) -> str:
        return "\n".join(self.lines[-60:])

    def wait_running(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while "state RUNNING" not in self.lines:
            assert self.process.poll() is None, f"the app exited:\n{self.output_tail()}"
            assert time.monotonic() < deadline, f"the app is not RUNNING:\n{self.output_tail()}"
            time.sleep(POLL_INTERVAL_S)  # another process's output: no event to wait on

    def stop(self) -> int:
        """SIGTERM (the app's shutdown hook closes Streams: its open transaction ends) and
        the exit code: 143 (128 + SIGTERM) is the JVM's after its hooks ran."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=APP_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=5)
        return self.process.returncode


def run_word_count(
    bootstrap: str,
    source: str,
    output: str,
    work_dir: Path,
    replication_factor: int,
    mid_run: Callable[[Callable[[], None]], None],
) -> tuple[Counter[str], dict[str, list[int]], WordCountApp]:
    """Produce the first half of the input, start the app, wait for its first output,
    then `mid_run(produce_second_half)`; wait until the output's last counts are the
    input's; stop the app. Returns (expected counts, every count read, the app)."""
    lines = input_lines(LINES, seed=21)
    expected = Counter(word for line in lines for word in line.split())
    produce_lines(bootstrap, source, lines[: LINES // 2])
    app = WordCountApp(bootstrap, source, output, work_dir, replication_factor)
    try:
        app.wait_running(APP_RUNNING_TIMEOUT_S)
        wait_for(
            lambda: bool(read_counts(bootstrap, output, PARTITIONS)),
            COUNTS_TIMEOUT_S,
            lambda: f"no committed output yet:\n{app.output_tail()}",
        )
        mid_run(lambda: produce_lines(bootstrap, source, lines[LINES // 2 :]))

        def latest() -> dict[str, int]:
            return {w: c[-1] for w, c in read_counts(bootstrap, output, PARTITIONS).items()}

        wait_for(
            lambda: latest() == dict(expected),
            COUNTS_TIMEOUT_S,
            lambda: f"counts {latest()} != expected {dict(expected)}\n{app.output_tail()}",
        )
    finally:
        code = app.stop()
    closed = code == JVM_SIGTERM_EXIT_CODE and "state NOT_RUNNING" in app.lines
    assert closed, f"the app exited with {code}:\n{app.output_tail()}"
    return expected, read_counts(bootstrap, output, PARTITIONS), app


def wait_for(condition: Callable[[], bool], timeout_s: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what()}")
        time.sleep(POLL_INTERVAL_S)  # polling other processes: no event to wait on


def assert_exactly_once(expected: Counter[str], counts: dict[str, list[int]]) -> None:
    """Every word's committed counts are 1, 2, ... up to its count in the input, each once:
    the app emits every update (no cache), so an update lost, replayed or left over from
    an aborted transaction would show as a gap, a repeat or an extra."""
    assert {word: seen[-1] for word, seen in counts.items()} == dict(expected)
    for word, seen in counts.items():
        assert seen == list(range(1, expected[word] + 1)), (word, seen)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirCluster]:
    with running_cluster(tmp_path_factory.mktemp("streams-eos")) as weir:
        yield weir


@pytest.mark.timeout(180)
def test_streams_exactly_once_word_count_is_exact_across_a_broker_kill(
    cluster: WeirCluster, tmp_path: Path
) -> None:
    source = f"words-{uuid.uuid4().hex[:8]}"
    output = f"word-counts-{uuid.uuid4().hex[:8]}"
    for topic in (source, output):
        cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
        cluster.wait_full_isr(topic)
    victim = cluster.brokers[cluster.leader_of(output, 0)]

    def kill_produce_restart(produce_second_half: Callable[[], None]) -> None:
        victim.kill()
        produce_second_half()
        time.sleep(2.0)  # the app works on with the broker down before it comes back
        victim.start()

    expected, counts, app = run_word_count(
        cluster.bootstrap, source, output, tmp_path / "app", 3, kill_produce_restart
    )
    assert_exactly_once(expected, counts)
    assert "state RUNNING" in app.lines
