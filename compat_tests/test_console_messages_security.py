"""The console's messages view with security on, in headless Chromium against a real
`weir`: the page reads, follows and produces as the logged-in user. Following live
uses fetch() with the user's Authorization header (an EventSource could not send it),
so a reader sees a record appear on a secured broker; a user without WRITE on the
topic is refused producing from the browser, as a Kafka client of that user would be.

One broker for the module: SASL_PLAINTEXT Kafka listener, ACLs on, `admin` super
user; `reader` may READ and DESCRIBE the topic, `writer` may WRITE and DESCRIBE it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, ResourceType

from compat_tests.console_browser import ConsoleBrowser
from compat_tests.harness import unique_topic_name
from compat_tests.secured_http_broker import CLIENT_WAIT_S, SecuredHttpBroker

pytestmark = pytest.mark.timeout(90)

PASSWORDS = {"reader": "reader-secret", "writer": "writer-secret"}
GRANTS = {
    "reader": (AclOperation.READ, AclOperation.DESCRIBE),
    "writer": (AclOperation.WRITE, AclOperation.DESCRIBE),
}


class Secured(SecuredHttpBroker):
    topic = unique_topic_name("payments")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with Secured.running(tmp_path_factory.mktemp("console-messages-acl")) as broker:
        broker.create_users(PASSWORDS)
        for name, operations in GRANTS.items():
            broker.grant(f"User:{name}", (ResourceType.TOPIC, broker.topic), operations)
        broker.create_topics(broker.topic)
        produce(broker, b"payment 1 settled")
        yield broker


def produce(broker: Secured, value: bytes) -> None:
    producer = Producer({**broker.kafka_config(), "linger.ms": 0})
    producer.produce(broker.topic, value=value, key=b"acct-7")
    assert producer.flush(CLIENT_WAIT_S) == 0


@pytest.fixture
def browser(chromium: ConsoleBrowser, secured: Secured) -> Iterator[ConsoleBrowser]:
    chromium.use_broker(secured.process.http_url)
    chromium.open("/console/login")
    chromium.logout()
    yield chromium


def open_as(browser: ConsoleBrowser, secured: Secured, user: str) -> None:
    browser.login(user, PASSWORDS[user])
    browser.open(f"/console/messages?topic={secured.topic}&from=beginning")
    browser.wait_text("#records td.value pre", "payment 1 settled")


def test_a_reader_follows_a_secured_topic_live_as_the_logged_in_user(
    browser: ConsoleBrowser, secured: Secured
) -> None:
    open_as(browser, secured, "reader")
    browser.click("#follow")
    browser.wait_for("#follow-state[data-state='live']")
    produce(secured, b"payment 2 settled live")
    browser.wait_text("#records tr.live td.value pre", "payment 2 settled live")
    assert not browser.find("#messages-error").is_displayed()
    browser.assert_no_script_errors()


def test_a_user_without_write_is_refused_producing_from_the_browser(
    browser: ConsoleBrowser, secured: Secured
) -> None:
    open_as(browser, secured, "reader")
    browser.select("#produce-value-type", value="STRING")
    browser.type_into("#produce-value", "not allowed")
    browser.click("#produce-submit")
    browser.wait_text("#produce-error", "Not authorized")


def test_without_a_login_the_messages_view_sends_the_browser_to_the_login_page(
    browser: ConsoleBrowser, secured: Secured
) -> None:
    browser.open(f"/console/messages?topic={secured.topic}")
    browser.wait_until(lambda: "/console/login" in browser.driver.current_url, "the login page")
