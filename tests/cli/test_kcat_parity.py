"""`weir produce` and `weir consume` as kcat users use them, against a real broker:
format strings, headers, offset specs, exit at end, consumer groups, auto-creation,
bad input and a broker lost mid-produce."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import (
    WeirProcess,
    clean_environment,
    interruptible_child,
    run_cli,
    weir_executable,
)
from tests.cli.test_cli_end_to_end import assert_one_error_line, cli, ok

# Recent: records stamped older than the default retention (7 days) would be deleted.
BASE_TIMESTAMP_MS = (int(time.time()) - 3600) * 1000
GROUP_WAIT_S = 30.0


def consume(broker: WeirProcess, topic: str, *args: str) -> str:
    return ok(broker, "consume", topic, *args)


def values(text: str) -> list[str]:
    return text.splitlines()


def test_headers_keys_and_timestamps_round_trip_through_format_strings(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    lines = f"k1|v1|a=1,b=2|{BASE_TIMESTAMP_MS}\nk2|v2||{BASE_TIMESTAMP_MS + 5}\n"
    out = ok(
        broker, "produce", topic_name, "-f", "%k|%v|%h|%T\\n", "-H", "src=cli",
        stdin=lines.encode(),
    )  # fmt: skip
    assert out == f"wrote 2 records to topic '{topic_name}'\n"
    printed = consume(broker, topic_name, "-o", "beginning", "-e",
                      "-f", "%t %p %o %k=%v [%h] %K/%S/%H %T\\n")  # fmt: skip
    assert printed == (
        f"{topic_name} 0 0 k1=v1 [src=cli,a=1,b=2] 2/2/3 {BASE_TIMESTAMP_MS}\n"
        f"{topic_name} 0 1 k2=v2 [src=cli] 2/2/1 {BASE_TIMESTAMP_MS + 5}\n"
    )
    as_json = consume(broker, topic_name, "-o", "beginning", "-e", "--format", "json")
    records = [json.loads(line) for line in as_json.splitlines()]
    assert records[0]["headers"] == [
        {"key": "src", "value": "cli"},
        {"key": "a", "value": "1"},
        {"key": "b", "value": "2"},
    ]
    assert records[1]["timestamp_ms"] == BASE_TIMESTAMP_MS + 5


def test_fixed_key_and_key_separator_set_keys(broker: WeirProcess, topic_name: str) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    ok(broker, "produce", "-t", topic_name, "-k", "fixed", stdin=b"a\nb\n")
    ok(broker, "produce", "-t", topic_name, "-K", "::", "-k", "unused", stdin=b"own::c\n")
    printed = consume(broker, topic_name, "-o", "beginning", "-e", "-f", "%k:%s\\n")
    assert printed == "fixed:a\nfixed:b\nown:c\n"


@pytest.fixture
def ten_records(broker: WeirProcess, topic_name: str) -> str:
    """Values 0..9 at offsets 0..9, record i stamped BASE + 1000 * i."""
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    lines = "".join(f"{BASE_TIMESTAMP_MS + 1000 * i} {i}\n" for i in range(10))
    ok(broker, "produce", topic_name, "-f", "%T %v", stdin=lines.encode())
    return topic_name


@pytest.mark.parametrize(
    ("spec_args", "expected"),
    [
        (["-o", "beginning", "-e"], [str(i) for i in range(10)]),
        (["-o", "end", "-e"], []),
        (["-o", "4", "-c", "2"], ["4", "5"]),
        (["-o", "+3", "-c", "1"], ["3"]),
        (["-o", "-2", "-e"], ["8", "9"]),
        (["-o", "-50", "-e"], [str(i) for i in range(10)]),
        (["-o", f"@{BASE_TIMESTAMP_MS + 6500}", "-e"], ["7", "8", "9"]),
        (["-o", f"@{BASE_TIMESTAMP_MS + 99_000}", "-e"], []),
        (["-o", "0:7", "-e"], ["7", "8", "9"]),
        (["--from-beginning", "-c", "3"], ["0", "1", "2"]),
    ],
)
def test_offset_specs_choose_where_reading_starts(
    broker: WeirProcess, ten_records: str, spec_args: list[str], expected: list[str]
) -> None:
    assert values(consume(broker, ten_records, *spec_args)) == expected


def test_an_offset_outside_the_log_names_the_valid_range(
    broker: WeirProcess, ten_records: str
) -> None:
    code, out, err = cli(broker, "consume", ten_records, "-o", "50", "-e")
    assert (code, out) == (1, "")
    assert_one_error_line(
        err,
        f"offset 50 is out of range for topic '{ten_records}' partition 0: it holds offsets "
        "0 to 9 (the next is 10) (OFFSET_OUT_OF_RANGE)",
    )


def test_offsets_per_partition_and_partition_selection(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "3")
    for partition in range(3):
        lines = "".join(f"p{partition}-{i}\n" for i in range(4))
        ok(broker, "produce", topic_name, "-p", str(partition), stdin=lines.encode())
    printed = consume(broker, topic_name, "-o", "0:-1", "-o", "2:+2", "-o", "beginning", "-e",
                      "-f", "%v\\n")  # fmt: skip
    assert sorted(values(printed)) == ["p0-3", "p1-0", "p1-1", "p1-2", "p1-3", "p2-2", "p2-3"]
    printed = consume(broker, topic_name, "-p", "2", "-p", "0", "-o", "-1", "-e")
    assert sorted(values(printed)) == ["p0-3", "p2-3"]


def test_exit_at_end_returns_at_once_on_an_empty_topic(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "4")
    started = time.monotonic()
    assert consume(broker, topic_name, "-o", "beginning", "-e") == ""
    assert time.monotonic() - started < 10


def test_group_member_commits_what_it_printed_and_the_next_run_resumes(
    broker: WeirProcess, ten_records: str
) -> None:
    group = f"{ten_records}-group"
    first = consume(broker, ten_records, "-g", group, "-o", "beginning", "-c", "4")
    assert values(first) == ["0", "1", "2", "3"]
    second = consume(broker, ten_records, "-g", group, "-o", "beginning", "-e")
    assert values(second) == ["4", "5", "6", "7", "8", "9"]
    assert consume(broker, ten_records, "-g", group, "-e") == ""
    ok(broker, "produce", ten_records, stdin=b"10\n")
    assert values(consume(broker, ten_records, "-g", group, "-e")) == ["10"]


def test_a_new_group_starts_where_its_offset_spec_says(
    broker: WeirProcess, ten_records: str
) -> None:
    assert consume(broker, ten_records, "-g", f"{ten_records}-late", "-e") == ""
    printed = consume(broker, ten_records, "-g", f"{ten_records}-tail", "-o", "-3", "-e")
    assert values(printed) == ["7", "8", "9"]


def _stable_member_count(broker: WeirProcess, group: str) -> int:
    """Members of `group` once it is Stable (every member has its assignment), else 0."""
    try:
        with urllib.request.urlopen(f"{broker.http_url}/v1/groups/{group}", timeout=2) as answer:
            described = json.load(answer)
    except OSError:
        return 0
    return len(described["members"]) if described["state"] == "Stable" else 0


def test_two_group_members_split_the_partitions_between_them(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "4")
    group = f"{topic_name}-pair"
    command = [weir_executable(), "--bootstrap", broker.bootstrap, "consume", topic_name,
               "-g", group, "-f", "%p %v\\n", "--timeout-ms", "8000"]  # fmt: skip
    members = [
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_environment()
        )  # fmt: skip
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + GROUP_WAIT_S
        while _stable_member_count(broker, group) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _stable_member_count(broker, group) == 2
        lines = "".join(f"{p}:{p}-{i}\n" for p in range(4) for i in range(5))
        ok(broker, "produce", topic_name, "-f", "%p:%v", stdin=lines.encode())
        outputs = [member.communicate(timeout=60) for member in members]
    finally:
        for member in members:
            member.kill()
    for member, (_, err) in zip(members, outputs, strict=True):
        assert member.returncode == 0, err
    printed = [values(out.decode()) for out, _ in outputs]
    partitions = [{line.split()[0] for line in lines} for lines in printed]
    assert all(partitions), printed
    assert not partitions[0] & partitions[1]
    assert sorted(line.split()[1] for lines in printed for line in lines) == sorted(
        f"{p}-{i}" for p in range(4) for i in range(5)
    )


def test_produce_creates_a_missing_topic_when_the_broker_creates_topics_on_use(
    broker: WeirProcess, topic_name: str
) -> None:
    code, out, err = cli(broker, "produce", topic_name, stdin=b"first\n")
    assert (code, out) == (0, f"wrote 1 record to topic '{topic_name}'\n"), err
    described = json.loads(ok(broker, "topic", "describe", topic_name, "--format", "json"))
    partitions = len(described["partitions"])
    replicas = len(described["partitions"][0]["replicas"])
    assert err == (
        f"created topic '{topic_name}' ({partitions} partition{'s' * (partitions != 1)}, "
        f"replication factor {replicas}): it did not exist and the broker creates topics "
        "on use (broker setting auto_create_topics)\n"
    )
    assert consume(broker, topic_name, "-o", "beginning", "-e") == "first\n"
    # The topic exists now: producing to it again says nothing on stderr.
    assert ok(broker, "produce", topic_name, stdin=b"second\n") == (
        f"wrote 1 record to topic '{topic_name}'\n"
    )


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    base = tmp_path_factory.mktemp("weir-strict")
    settings = base / "weir.toml"
    settings.write_text("auto_create_topics = false\n")
    proc = WeirProcess(base / "data", base / "logs", extra_args=("--config", str(settings)))
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()


def test_produce_to_a_missing_topic_says_how_to_create_it_when_the_broker_does_not(
    strict_broker: WeirProcess,
) -> None:
    code, out, err = cli(strict_broker, "produce", "nowhere", stdin=b"x\n")
    assert (code, out) == (1, "")
    assert_one_error_line(
        err,
        "topic 'nowhere' does not exist and the broker does not create topics on use: "
        "create it with `weir topic create nowhere` (UNKNOWN_TOPIC_OR_PARTITION)",
    )


def test_a_line_that_does_not_match_the_format_sends_nothing(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "2")
    code, out, err = cli(broker, "produce", topic_name, "-f", "%k:%v", "--format", "json",
                         stdin=b"a:1\nb:2\nno colon\nc:3\n")  # fmt: skip
    assert code == 1
    assert_one_error_line(
        err, "line 3: does not match the format: no ':' after the key; nothing was sent"
    )
    summary = json.loads(out)
    assert summary["records_acknowledged"] == 0
    assert summary["lines_not_sent"] == "1-3"
    assert consume(broker, topic_name, "-o", "beginning", "-e") == ""

    code, _, err = cli(broker, "produce", topic_name, "-f", "%p %v", stdin=b"0 a\n7 b\n")
    assert code == 1
    assert_one_error_line(
        err, f"line 2: topic '{topic_name}' has no partition 7 (it has 2: 0..1); nothing was sent"
    )


def test_a_broker_killed_mid_produce_leaves_an_exact_account_of_acknowledged_lines(
    tmp_path: Path,
) -> None:
    proc = WeirProcess(tmp_path / "data", tmp_path / "logs")
    proc.start()
    try:
        ok(proc, "topic", "create", "doomed", "--partitions", "1")
        producer = subprocess.Popen(
            [weir_executable(), "--bootstrap", proc.bootstrap, "produce", "doomed",
             "--format", "json"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=clean_environment(),
        )  # fmt: skip
        assert producer.stdin is not None
        line = 0
        for _ in range(20):  # a quiet pipe between bursts: each burst is sent on its own
            for _ in range(10):
                line += 1
                producer.stdin.write(f"{line}\n".encode())
            producer.stdin.flush()
            time.sleep(0.1)
        proc.kill()
        rest = "".join(f"{number}\n" for number in range(line + 1, line + 11))
        out, err = producer.communicate(rest.encode(), timeout=60)
        assert producer.returncode == 1
        summary = json.loads(out)
        acknowledged = summary["records_acknowledged"]
        assert acknowledged >= 100, summary
        assert summary["lines_acknowledged"] == f"1-{acknowledged}"
        accounted = acknowledged + summary["records_sent_unconfirmed"] + summary["records_not_sent"]
        assert accounted == summary["records_read"], summary
        assert "error: " in err.decode()
        proc.restart()
        kept = values(consume(proc, "doomed", "-o", "beginning", "-e"))
        assert kept[:acknowledged] == [str(i) for i in range(1, acknowledged + 1)]
    finally:
        proc.close()


def test_ctrl_c_during_produce_prints_what_was_acknowledged(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "1")
    producer = subprocess.Popen(
        [weir_executable(), "--bootstrap", broker.bootstrap, "produce", topic_name,
         "--format", "json"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=clean_environment(), preexec_fn=interruptible_child,
    )  # fmt: skip
    try:
        assert producer.stdin is not None
        producer.stdin.write(b"one\ntwo\n")
        producer.stdin.flush()
        deadline = time.monotonic() + 20
        while consume(broker, topic_name, "-o", "beginning", "-e") != "one\ntwo\n":
            assert time.monotonic() < deadline, "the two lines were never written"
            time.sleep(0.2)
        producer.send_signal(signal.SIGINT)
        out, err = producer.communicate(timeout=30)
    finally:
        producer.kill()
    assert producer.returncode == 130, err
    summary = json.loads(out)
    assert (summary["records_acknowledged"], summary["lines_acknowledged"]) == (2, "1-2")
    assert err.decode() == "error: interrupted (Ctrl-C)\n"


def test_consume_format_output_is_byte_identical_to_kcats(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "3")
    ok(broker, "produce", topic_name, "-K", ":", "-H", "h1=x", "-H", "h2=",
       stdin=b"k1:v1\nk2:\nk3:three\n")  # fmt: skip
    ok(broker, "produce", topic_name, "-p", "1", stdin=b"no key\n\n")
    fmt = "%t|%p|%o|%k|%K|%s|%S|%h|%T\\n"
    kcat = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-C", "-t", topic_name, "-o", "beginning", "-e", "-q",
         "-f", fmt],
        capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    ours = subprocess.run(
        [weir_executable(), "-b", broker.bootstrap, "consume", "-t", topic_name, "-o",
         "beginning", "-e", "-f", fmt],
        capture_output=True, timeout=60, check=True, env=clean_environment(),
    )  # fmt: skip
    assert len(kcat.stdout.splitlines()) == 5
    assert sorted(ours.stdout.splitlines()) == sorted(kcat.stdout.splitlines())


def test_ctrl_c_in_a_group_commits_what_was_printed_and_leaves(
    broker: WeirProcess, ten_records: str
) -> None:
    group = f"{ten_records}-interrupted"
    member = subprocess.Popen(
        [weir_executable(), "-b", broker.bootstrap, "consume", ten_records, "-g", group,
         "-o", "beginning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_environment(),
        preexec_fn=interruptible_child,
    )  # fmt: skip
    try:
        assert member.stdout is not None
        printed = [member.stdout.readline() for _ in range(10)]
        member.send_signal(signal.SIGINT)
        _, err = member.communicate(timeout=30)
    finally:
        member.kill()
    assert member.returncode == 130, err
    assert printed == [f"{i}\n".encode() for i in range(10)]
    described = json.loads(ok(broker, "group", "describe", group, "--format", "json"))
    assert (described["state"], described["members"]) == ("Empty", [])
    assert [row["committed_offset"] for row in described["offsets"]] == [10]


def test_an_offset_for_a_partition_not_read_is_an_error(
    broker: WeirProcess, topic_name: str
) -> None:
    ok(broker, "topic", "create", topic_name, "--partitions", "2")
    code, _, err = cli(broker, "consume", topic_name, "-o", "5:beginning", "-e")
    assert code == 1
    assert_one_error_line(err, f"topic '{topic_name}' has no partition 5 (it has 2: 0..1)")
    code, _, err = cli(broker, "consume", topic_name, "-p", "0", "-o", "1:beginning", "-e")
    assert code == 1
    assert_one_error_line(err, "-o names partition 1, which -p leaves out")


def test_bootstrap_at_the_brokers_http_port_fails_fast_and_says_so(broker: WeirProcess) -> None:
    http_address = broker.http_url.removeprefix("http://")
    started = time.monotonic()
    result = run_cli("-b", http_address, "topic", "list")
    assert result.returncode == 1
    # The HTTP server answers the Kafka request bytes with an HTTP error, which the
    # CLI recognises.
    assert result.stderr == (
        f"error: {http_address} answered in HTTP, not the Kafka protocol "
        "(is that the broker's HTTP port, or a proxy?)\n"
    )
    assert time.monotonic() - started < 10
