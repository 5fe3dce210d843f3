"""The web console at scale: one broker with about 10,000 partitions (many small
topics and a few wide ones) and 1,000 consumer groups, then the time of

- the topic list API's first page (`GET /v3/clusters/{c}/topics?page=1&page_size=50
  &sort=...`), by name and by partition count, and searched (`q=`);
- the console's topic list rendered in headless Chromium: navigation start to the
  table filled with the first page (and to the sizes and rates filled in);
- the consumer-group list API's first page (`GET .../consumer-groups?page=1
  &page_size=50&sort=consumer_group_id`) and the console's group list (`/console/groups`)
  when this tree has it (else the API alone, said so in the output).

Each is the median of `--runs` (after one warm-up). On demand, not in CI:

    PYTHONPATH=. .venv/bin/python benchmarks/console_scale.py

Needs chromium and chromium-driver (scripts/test installs them) and etcd. A
broker keeps 3 descriptors per partition it holds and refuses partitions beyond
what its open-files limit admits: under a hard limit of 20,000 one broker holds
about 6,000, so by default the partitions are spread over a cluster of two
brokers (`--brokers 2`, replication factor 1) and everything is asked of broker 1,
which answers the topic list from the cluster's whole metadata as one broker
would. With a hard limit of 40,000 or more, `--brokers 1`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.cluster_harness import running_cluster
from compat_tests.console_browser import console_browser
from compat_tests.harness import WeirProcess

CREATE_BATCH = 20
GROUP_THREADS = 16
GROUP_SETTINGS = "group_initial_rebalance_delay_ms = 0\n"
ADMIN_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 180.0
TARGET_S = 1.0
# Resolves with performance.now() (ms since navigation start) once `css` matches
# at least one element, checked every 5 ms in the page itself.
WAIT_FOR_SCRIPT = """
const [css, done] = arguments;
const tick = () => document.querySelector(css) ? done(performance.now()) : setTimeout(tick, 5);
tick();
"""


def create_topics(admin: AdminClient, topics: list[NewTopic], batch_size: int) -> None:
    for start in range(0, len(topics), batch_size):
        batch = topics[start : start + batch_size]
        futures = admin.create_topics(batch, operation_timeout=240, request_timeout=280)
        for future in futures.values():
            future.result(timeout=ADMIN_TIMEOUT_S)


def join_and_commit(bootstrap: str, topic: str, index: int) -> None:
    """One consumer group: a consumer joins (a group that only had offsets committed
    for it is not listed by Weir, unlike Kafka), commits an offset and leaves."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"group-{index:05d}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline_s = time.monotonic() + ADMIN_TIMEOUT_S
        while not consumer.assignment():
            consumer.poll(0.05)
            if time.monotonic() > deadline_s:
                raise TimeoutError(f"group-{index:05d} got no assignment")
        offsets = [TopicPartition(topic, p.partition, index) for p in consumer.assignment()]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def make_groups(bootstrap: str, topic: str, groups: int) -> None:
    with ThreadPoolExecutor(GROUP_THREADS) as pool:
        for done in [pool.submit(join_and_commit, bootstrap, topic, i) for i in range(groups)]:
            done.result()


def median_s(runs: int, action: Callable[[], object]) -> float:
    action()  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def api_page(client: httpx.Client, path: str, **params: object) -> Callable[[], object]:
    def fetch() -> object:
        answer = client.get(path, params=params)
        answer.raise_for_status()
        return answer.json()

    return fetch


def report(what: str, seconds: float) -> None:
    verdict = "ok" if seconds < TARGET_S else "OVER TARGET"
    print(f"{what:<72} {seconds * 1000:8.0f} ms  {verdict}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small-topics", type=int, default=995)
    parser.add_argument("--small-partitions", type=int, default=5)
    parser.add_argument("--wide-topics", type=int, default=5)
    parser.add_argument("--wide-partitions", type=int, default=1_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--brokers", type=int, default=2)
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="weir-console-scale-"))
    if args.brokers == 1:
        settings = base / "weir.toml"
        settings.write_text(GROUP_SETTINGS)
        broker = WeirProcess(base / "data", base / "logs", extra_args=("--config", str(settings)))
        broker.start()
        try:
            run(broker, broker.bootstrap, base, args)
        finally:
            broker.stop(timeout_s=STOP_TIMEOUT_S)
        return
    with running_cluster(
        base / "cluster", brokers_count=args.brokers, settings=GROUP_SETTINGS
    ) as cluster:
        try:
            run(cluster.brokers[1], cluster.bootstrap, base, args)
        finally:  # closing 5,000 logs each takes longer than the harness waits
            for member in cluster.brokers.values():
                member.stop(timeout_s=STOP_TIMEOUT_S)


def run(broker: WeirProcess, bootstrap: str, base: Path, args: argparse.Namespace) -> None:
    print(f"{args.brokers} broker(s); everything asked of {broker.http_url}", flush=True)
    # A batch of topics (or a 1,000-partition one) takes longer than librdkafka's
    # default 60 s socket timeout.
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    started = time.monotonic()
    topics = [
        NewTopic(f"events-{i:04d}", args.small_partitions, 1) for i in range(args.small_topics)
    ]
    create_topics(admin, topics, CREATE_BATCH)
    wide = [NewTopic(f"wide-{i}", args.wide_partitions, 1) for i in range(args.wide_topics)]
    create_topics(admin, wide, 1)
    topics += wide
    partitions = args.small_topics * args.small_partitions + args.wide_topics * args.wide_partitions
    print(
        f"created {len(topics)} topics, {partitions} partitions "
        f"in {time.monotonic() - started:.0f} s",
        flush=True,
    )
    started = time.monotonic()
    make_groups(bootstrap, "events-0000", args.groups)
    print(
        f"made {args.groups} groups (joined, committed, left) in {time.monotonic() - started:.0f} s"
    )

    with httpx.Client(base_url=broker.http_url, timeout=60) as client:
        cluster_id = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
        cluster = f"/v3/clusters/{cluster_id}"
        topics_path = f"{cluster}/topics"
        for sort, order in (("topic_name", "asc"), ("partitions_count", "desc")):
            seconds = median_s(
                args.runs,
                api_page(client, topics_path, page=1, page_size=50, sort=sort, order=order),
            )
            report(f"API: topics page 1 of 50, sort={sort} {order}", seconds)
        seconds = median_s(args.runs, api_page(client, topics_path, q="events-09", page_size=50))
        report("API: topics searched (q=events-09)", seconds)
        seconds = median_s(args.runs, api_page(client, topics_path))
        report("API: every topic, unpaged (for comparison)", seconds)
        page = client.get(topics_path, params={"page_size": 50}).json()
        names = ",".join(t["topic_name"] for t in page["data"])
        seconds = median_s(args.runs, api_page(client, f"{cluster}/brokers/1/stats", topics=names))
        report("API: broker 1's stats for a page's 50 topics", seconds)
        if args.brokers > 1:
            seconds = median_s(
                args.runs, api_page(client, f"{cluster}/brokers/2/stats", topics=names)
            )
            report("API: broker 2's stats for the same, asked of broker 1", seconds)

        seconds = median_s(args.runs, api_page(client, f"{cluster}/health"))
        report("API: cluster health (every partition's leader and ISR)", seconds)

        groups_path = f"{cluster}/consumer-groups"
        paged_groups = client.get(groups_path, params={"page": 1, "page_size": 50})
        groups_paged = "total" in paged_groups.json().get("metadata", {})
        listed = len(client.get(groups_path).json()["data"])
        print(f"the group list holds {listed} groups", flush=True)
        if groups_paged:
            seconds = median_s(
                args.runs,
                api_page(client, groups_path, page=1, page_size=50, sort="consumer_group_id"),
            )
            report("API: consumer groups page 1 of 50, sort=consumer_group_id", seconds)
        else:
            seconds = median_s(args.runs, api_page(client, groups_path))
            report("API: consumer groups, whole list (this tree does not page it)", seconds)
        groups_page = client.get("/console/groups").status_code == 200

    with console_browser(broker.http_url, base / "chromium") as browser:
        browser.open("/console/overview")  # the browser's own start-up, not measured
        browser.wait_for("#brokers tr[data-broker]")
        timings: dict[str, list[float]] = {"table": [], "stats": []}
        for _ in range(args.runs + 1):
            browser.open("/console/topics")
            table_ms = browser.driver.execute_async_script(
                WAIT_FOR_SCRIPT, "#topics[data-loaded='true'] tbody tr[data-topic]"
            )
            stats_ms = browser.driver.execute_async_script(
                WAIT_FOR_SCRIPT, "#topics[data-stats-loaded='true']"
            )
            timings["table"].append(table_ms / 1000)
            timings["stats"].append(stats_ms / 1000)
        report("Chromium: /console/topics, navigation to the table filled",
               statistics.median(timings["table"][1:]))  # fmt: skip
        report("Chromium: /console/topics, to sizes and rates filled",
               statistics.median(timings["stats"][1:]))  # fmt: skip
        overview = []
        for _ in range(args.runs + 1):
            browser.open("/console/overview")
            overview.append(
                browser.driver.execute_async_script(
                    WAIT_FOR_SCRIPT, "#brokers tr[data-broker] td.partitions-led:not(:empty)"
                )
                / 1000
            )
        report("Chromium: /console/overview, navigation to the brokers filled",
               statistics.median(overview[1:]))  # fmt: skip
        if groups_page:
            table = []
            for _ in range(args.runs + 1):
                browser.open("/console/groups")
                table.append(
                    browser.driver.execute_async_script(WAIT_FOR_SCRIPT, "table tbody tr") / 1000
                )
            report("Chromium: /console/groups, navigation to the table filled",
                   statistics.median(table[1:]))  # fmt: skip
        else:
            print("Chromium: /console/groups is not in this tree: not timed", flush=True)


if __name__ == "__main__":
    main()
