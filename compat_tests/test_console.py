"""The web console's frame, in a real browser (headless Chromium) against the real
`weir`: the pages are served by the broker itself (no CDN: every script and style
comes from the broker), the overview shows the cluster, the console's requests are
counted in the metrics, and hostile paths get a 404."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

from compat_tests.console_browser import PHONE_SIZE, ConsoleBrowser
from compat_tests.harness import WeirProcess


def metric_value(broker: WeirProcess, sample: str) -> float:
    text = broker.http_get("/metrics")[1].decode()
    for row in text.splitlines():
        if row.startswith(sample + " "):
            return float(row.rsplit(" ", 1)[1])
    raise AssertionError(f"no {sample} in /metrics")


def test_a_browser_at_the_root_lands_on_the_overview_showing_the_cluster_and_broker(
    console: ConsoleBrowser, module_broker: WeirProcess
) -> None:
    console.open("/")
    console.wait_until(lambda: console.driver.current_url.endswith("/console/overview"), "redirect")
    cluster_id = console.wait_for("#cluster-id").text
    assert re.fullmatch(r"[A-Za-z0-9_-]{6,}", cluster_id), cluster_id
    console.wait_for("#brokers tr[data-broker='1']")
    nav = console.texts("#weir-nav .links a")
    assert nav[:3] == ["Overview", "Topics", "Consumer groups"]
    console.assert_no_script_errors()


def test_every_script_and_style_the_pages_load_comes_from_the_broker(
    console: ConsoleBrowser,
) -> None:
    console.open("/console/overview")
    console.wait_for("#brokers tr[data-broker]")
    sources = console.driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert sources, "the page loaded no resources"
    assert all(source.startswith(console.base_url + "/") for source in sources), sources


def test_the_console_pages_carry_a_content_security_policy_and_revalidate(
    module_broker: WeirProcess,
) -> None:
    with urllib.request.urlopen(module_broker.http_url + "/console/overview") as response:
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]
        assert response.headers["Cache-Control"] == "no-cache"
        etag = response.headers["ETag"]
    request = urllib.request.Request(
        module_broker.http_url + "/console/overview", headers={"If-None-Match": etag}
    )
    try:
        urllib.request.urlopen(request)
        raise AssertionError("a matching ETag was answered with the whole page")
    except urllib.error.HTTPError as answer:
        assert answer.code == 304


def test_unknown_pages_and_paths_out_of_the_console_folder_are_not_found(
    module_broker: WeirProcess,
) -> None:
    for path in (
        "/console/no-such-page",
        "/console/static/no-such.js",
        "/console/static/../routes.py",
        "/console/static/%2e%2e/routes.py",
        "/console/static/vendor/VENDORED.md",
        "/console/static/vendor/alpine-LICENSE",
        "/console/..%2f..%2fpyproject.toml",
    ):
        status, _ = module_broker.http_get(path)
        assert status == 404, path


def test_console_pages_and_their_api_calls_are_counted_in_the_metrics(
    console: ConsoleBrowser, module_broker: WeirProcess
) -> None:
    pages_before = metric_value(module_broker, 'weir_http_requests_total{surface="console_page"}')
    api_before = metric_value(module_broker, 'weir_http_requests_total{surface="console_api"}')
    console.open("/console/overview")
    console.wait_for("#brokers tr[data-broker]")
    # The page, its stylesheet and scripts; then /v3/clusters and the brokers.
    assert (
        metric_value(module_broker, 'weir_http_requests_total{surface="console_page"}')
        >= pages_before + 4
    )
    assert (
        metric_value(module_broker, 'weir_http_requests_total{surface="console_api"}')
        >= api_before + 2
    )
    assert metric_value(module_broker, 'weir_http_request_seconds_total{surface="console_api"}') > 0


def test_the_overview_is_readable_at_phone_width(console: ConsoleBrowser) -> None:
    with console.window_size(*PHONE_SIZE):
        console.open("/console/overview")
        console.wait_for("#brokers tr[data-broker]")
        width = console.driver.execute_script("return document.documentElement.scrollWidth")
        viewport = console.driver.execute_script("return window.innerWidth")
        assert width <= viewport, (width, viewport)


def test_every_page_fits_a_phone_width_and_logs_no_script_error(
    console: ConsoleBrowser,
) -> None:
    pages = [
        "overview",
        "topics",
        "topic?name=__consumer_offsets",
        "messages?topic=__consumer_offsets",
        "groups",
        "group?id=no-such-group",
        "queues",
        "queue?id=no-such-queue",
        "transactions",
        "security",
        "login",
    ]
    with console.window_size(*PHONE_SIZE):
        for page in pages:
            console.open("/console/" + page)
            console.wait_until(
                lambda: console.driver.execute_script("return !!window.Alpine"), "Alpine"
            )
            console.wait_for("main")
            width = console.driver.execute_script("return document.documentElement.scrollWidth")
            viewport = console.driver.execute_script("return window.innerWidth")
            assert width <= viewport, (page, width, viewport)
    console.assert_no_script_errors()
