"""The console's messages view (/console/messages?topic=...) in headless Chromium
against a real `weir`, with confluent-kafka on the other side: browse a topic from
the beginning, an offset, a time and the end; render keys and values as JSON, text
and hex; filter by key, header and value substring (on the server); follow live and
see a record produced by Kafka appear; produce from the browser and read it back
with Kafka; download a range of a partition as a file."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from selenium.webdriver.common.keys import Keys

from compat_tests.console_browser import PHONE_SIZE, ConsoleBrowser
from compat_tests.harness import WeirProcess, create_topic, unique_topic_name

pytestmark = pytest.mark.timeout(120)

CLIENT_WAIT_S = 15.0
ORDERS = 30  # on partition 0
HOUR_MS = 3_600_000
CUSTOMERS = ("acme", "globex", "initech")
BINARY_VALUE = b"\x00\x01\xfe\xff\x10"


@dataclass(frozen=True)
class Topic:
    name: str
    base_ms: int  # the time of partition 0's first record; one a minute after


def order(i: int) -> dict[str, Any]:
    return {
        "order_id": 1000 + i,
        "customer": CUSTOMERS[i % 3],
        "items": [{"sku": f"SKU-{i % 7}", "qty": 1 + i % 4}],
        "total": round(12.5 * (1 + i % 5), 2),
        "status": "paid" if i % 4 else "refunded",
    }


def produce(broker: WeirProcess, topic: str, records: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for record in records:
        producer.produce(topic, **record)
    assert producer.flush(CLIENT_WAIT_S) == 0


@pytest.fixture(scope="module")
def orders(_module_broker: WeirProcess) -> Topic:
    """Partition 0: JSON orders keyed by customer with headers; partition 1: text,
    one binary value, one null value."""
    name = unique_topic_name("orders")
    create_topic(_module_broker.bootstrap, name, partitions=2)
    base_ms = int(time.time() * 1000) - 2 * HOUR_MS
    produce(
        _module_broker, name,
        [{"partition": 0, "key": f"customer-{CUSTOMERS[i % 3]}".encode(),
          "value": json.dumps(order(i)).encode(), "timestamp": base_ms + i * 60_000,
          "headers": [("source", b"web" if i % 2 else b"mobile"),
                      ("trace-id", f"tr-{i:04d}".encode())]}
         for i in range(ORDERS)]
        + [{"partition": 1, "key": b"shipment-1", "value": b"shipped order 1003 via DHL",
            "timestamp": base_ms + 5_000},
           {"partition": 1, "key": b"blob", "value": BINARY_VALUE, "timestamp": base_ms + 6_000,
            "headers": [("content-type", b"application/octet-stream")]},
           {"partition": 1, "key": b"gone", "value": None, "timestamp": base_ms + 7_000}],
    )  # fmt: skip
    return Topic(name, base_ms)


def open_messages(console: ConsoleBrowser, topic: Topic, **params: str) -> None:
    query = "&".join(f"{k}={v}" for k, v in {"topic": topic.name, **params}.items())
    console.open(f"/console/messages?{query}")


def row(partition: int, offset: int) -> str:
    return f"#records tr[data-partition='{partition}'][data-offset='{offset}']"


def shown_offsets(console: ConsoleBrowser, partition: int = 0) -> list[int]:
    return [
        int(e.get_attribute("data-offset") or -1)
        for e in console.find_all(f"#records tbody tr[data-partition='{partition}']")
    ]


def test_browsing_every_partition_from_the_end_shows_keys_values_headers_and_times(
    console: ConsoleBrowser, orders: Topic
) -> None:
    open_messages(console, orders)
    first = console.wait_for(row(0, ORDERS - 1))
    assert "customer-" in first.find_element("css selector", "td.key").text
    value = first.find_element("css selector", "td.value pre")
    assert value.get_attribute("data-kind") == "json"
    assert '"order_id": 1029' in value.text  # pretty-printed
    headers = first.find_element("css selector", "td.headers").text
    assert "source: web" in headers and "trace-id: tr-0029" in headers
    shipped = console.wait_for(row(1, 0))
    assert shipped.find_element("css selector", "td.value pre").get_attribute("data-kind") == "text"
    assert console.find(row(1, 2) + " td.value pre").text == "null"
    assert "UTC" in shipped.find_element("css selector", "td.time").text
    assert console.find("#weir-nav a[aria-current='page']").text == "Topics"
    console.screenshot_for_docs("messages")
    console.assert_no_script_errors()


def test_browsing_one_partition_from_an_offset_a_time_and_the_end(
    console: ConsoleBrowser, orders: Topic
) -> None:
    open_messages(console, orders, partition="0", **{"from": "beginning"})
    console.wait_for(row(0, 0))
    console.select("#page-size", value="20")
    console.select("#start", value="offset")
    console.type_into("#start-offset", "5")
    console.click("#browse")
    console.wait_until(lambda: shown_offsets(console)[:1] == [5], "a read from offset 5")
    assert shown_offsets(console) == list(range(5, 25))

    console.select("#start", value="timestamp")
    seventh_ms = orders.base_ms + 7 * 60_000
    console.type_into("#start-timestamp", str(seventh_ms - 1))  # ms since 1970
    console.click("#browse")
    console.wait_until(lambda: shown_offsets(console)[:1] == [7], "a read from a time")
    eighth = datetime.fromtimestamp((seventh_ms + 60_000) / 1000, UTC)
    console.type_into("#start-timestamp", eighth.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3])
    console.click("#browse")
    console.wait_until(lambda: shown_offsets(console)[:1] == [8], "a read from a UTC time")

    console.select("#start", value="end")
    console.click("#browse")
    console.wait_until(
        lambda: shown_offsets(console) == list(range(ORDERS - 20, ORDERS)), "the newest 20"
    )
    console.wait_text("#scan-status", "at the end")  # nothing more to load, and it says so
    console.wait_gone("#more")
    assert shown_offsets(console) == list(range(ORDERS - 20, ORDERS))
    console.assert_no_script_errors()


def test_keys_and_values_render_as_json_text_or_hex(console: ConsoleBrowser, orders: Topic) -> None:
    open_messages(console, orders, partition="1", **{"from": "beginning"})
    blob = console.wait_for(row(1, 1) + " td.value pre")
    assert blob.get_attribute("data-kind") == "hex"
    assert blob.text == "00 01 fe ff 10"
    console.select("#render", value="hex")
    console.wait_text(row(1, 0) + " td.key pre", "73 68 69 70")  # "ship"
    console.select("#render", value="text")
    console.wait_text(row(1, 0) + " td.value pre", "shipped order 1003 via DHL")
    console.select("#render", value="json")
    # Text that is not JSON is shown as its bytes.
    console.wait_until(
        lambda: console.find(row(1, 0) + " td.value pre").get_attribute("data-kind") == "hex",
        "text as hex under JSON",
    )
    open_messages(console, orders, partition="0", **{"from": "beginning"})
    console.wait_for(row(0, 0))
    console.select("#render", value="text")
    console.wait_text(row(0, 0) + " td.value pre", '{"order_id": 1000, "customer": "acme"')
    console.select("#render", value="json")
    console.wait_text(row(0, 0) + " td.value pre", '"order_id": 1000,\n  "customer": "acme"')
    console.assert_no_script_errors()


def erase(console: ConsoleBrowser, css: str) -> None:
    """Empties an input as a user does (Selenium's clear() fires no input event)."""
    console.find(css).send_keys(Keys.CONTROL, "a")
    console.find(css).send_keys(Keys.DELETE)


def apply_filter(console: ConsoleBrowser, **fields: str) -> None:
    for field in ("filter-key", "filter-header-name", "filter-header-value", "filter-value"):
        erase(console, "#" + field)
    for field, text in fields.items():
        console.type_into("#filter-" + field.replace("_", "-"), text)
    console.click("#filter-apply")


def test_filters_by_key_header_and_value_substring_run_on_the_server(
    console: ConsoleBrowser, orders: Topic
) -> None:
    open_messages(console, orders, partition="0", **{"from": "beginning"})
    console.wait_for(row(0, 0))
    apply_filter(console, key="customer-globex")
    expected = [i for i in range(ORDERS) if i % 3 == 1]
    console.wait_until(lambda: shown_offsets(console) == expected, "records of one key")
    console.wait_text("#scan-status", f"{len(expected)} matching of {ORDERS} records scanned")

    apply_filter(console, header_name="source", header_value="web")
    expected = [i for i in range(ORDERS) if i % 2]
    console.wait_until(lambda: shown_offsets(console) == expected, "records with a header")

    apply_filter(console, value="refunded")
    expected = [i for i in range(ORDERS) if i % 4 == 0]
    console.wait_until(lambda: shown_offsets(console) == expected, "values with a substring")

    apply_filter(console, header_name="trace-id", header_value="tr-0017")
    console.wait_until(lambda: shown_offsets(console) == [17], "one trace id")
    console.click("#filter-clear")
    console.wait_until(lambda: len(shown_offsets(console)) == ORDERS, "the filter cleared")
    console.assert_no_script_errors()


def test_following_live_shows_a_record_produced_by_kafka(
    console: ConsoleBrowser, orders: Topic, module_broker: WeirProcess
) -> None:
    open_messages(console, orders)
    console.wait_for(row(0, ORDERS - 1))
    console.click("#follow")
    console.wait_for("#follow-state[data-state='live']")
    produce(
        module_broker, orders.name,
        [{"partition": 1, "key": b"live-key", "value": b'{"event": "followed live"}',
          "headers": [("source", b"kafka")]}],
    )  # fmt: skip
    live = console.wait_text("#records tr.live td.value pre", '"event": "followed live"')
    assert live.get_attribute("data-kind") == "json"
    console.wait_text("#records tr.live td.headers", "source: kafka")
    console.click("#follow")
    console.wait_for("#follow-state[data-state='paused']")
    console.assert_no_script_errors()


def test_a_message_produced_in_the_browser_is_read_back_by_kafka(
    console: ConsoleBrowser, orders: Topic, module_broker: WeirProcess
) -> None:
    open_messages(console, orders)
    console.wait_for(row(0, ORDERS - 1))
    console.select("#produce-partition", value="1")
    console.type_into("#produce-key", "customer-acme")
    console.select("#produce-value-type", value="JSON")
    console.type_into("#produce-value", '{"order_id": 2001, "note": "from the console"}')
    console.type_into("#produce-headers", "source: console\ntrace-id: tr-9001")
    console.click("#produce-submit")
    result = console.wait_text("#produce-result", "Written to partition 1 at offset")
    offset = int(result.text.rsplit(" ", 1)[1].rstrip("."))

    consumer = Consumer(
        {"bootstrap.servers": module_broker.bootstrap, "group.id": unique_topic_name("g"),
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign([TopicPartition(orders.name, 1, offset)])
    try:
        deadline = time.monotonic() + CLIENT_WAIT_S
        message = None
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(0.5)
            if polled is not None and polled.error() is None:
                message = polled
    finally:
        consumer.close()
    assert message is not None, "Kafka read nothing back"
    assert message.key() == b"customer-acme"
    assert json.loads(message.value()) == {"order_id": 2001, "note": "from the console"}
    assert message.headers() == [("source", b"console"), ("trace-id", b"tr-9001")]

    console.select("#produce-value-type", value="HEX")
    console.type_into("#produce-value", "de ad be ef")
    erase(console, "#produce-headers")
    console.click("#produce-submit")
    console.wait_text("#produce-result", f"at offset {offset + 1}")
    console.type_into("#produce-value", "not hex!")
    console.click("#produce-submit")
    console.wait_text("#produce-error", "not hex")
    console.assert_no_script_errors()


def wait_for_file(folder: Path, name: str) -> Path:
    path = folder / name
    deadline = time.monotonic() + CLIENT_WAIT_S
    while not path.exists() or path.stat().st_size == 0:
        assert time.monotonic() < deadline, f"no {name} in {sorted(folder.iterdir())}"
        time.sleep(0.1)
    return path


def test_a_range_of_a_partition_downloads_as_json_lines_and_as_json(
    console: ConsoleBrowser, orders: Topic
) -> None:
    open_messages(console, orders)
    console.wait_for(row(0, ORDERS - 1))
    console.select("#download-partition", value="0")
    console.type_into("#download-from", "2")
    console.type_into("#download-to", "6")
    console.click("#download-submit")
    console.wait_text("#download-status", "5 records")
    lines = wait_for_file(console.download_dir, f"{orders.name}-0-2-6.jsonl").read_text()
    records = [json.loads(line) for line in lines.splitlines()]
    assert [r["offset"] for r in records] == [2, 3, 4, 5, 6]
    assert records[0]["value"] == {"type": "JSON", "data": order(2)}
    assert records[0]["key"] == {"type": "STRING", "data": "customer-initech"}

    console.select("#download-format", value="json")
    console.type_into("#download-to", "1000")  # past the end: what there is
    console.click("#download-submit")
    console.wait_text("#download-status", f"{ORDERS - 2} records")
    document = json.loads(
        wait_for_file(console.download_dir, f"{orders.name}-0-2-1000.json").read_text()
    )
    assert [r["offset"] for r in document] == list(range(2, ORDERS))
    console.type_into("#download-to", "200000")
    console.click("#download-submit")
    console.wait_text("#download-status", "at most 100,000 records")
    console.assert_no_script_errors()


@pytest.fixture(autouse=True)
def _fresh_downloads(console: ConsoleBrowser) -> Iterator[None]:
    for path in console.download_dir.glob("*"):
        path.unlink()
    yield


def test_the_messages_view_is_readable_at_phone_width(
    console: ConsoleBrowser, orders: Topic
) -> None:
    with console.window_size(*PHONE_SIZE):
        open_messages(console, orders)
        console.wait_for(row(0, ORDERS - 1))
        width = console.driver.execute_script("return document.documentElement.scrollWidth")
        viewport = console.driver.execute_script("return window.innerWidth")
        assert width <= viewport, (width, viewport)
