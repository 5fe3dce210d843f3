"""The web console with security on, in a real browser (headless Chromium) against a
real `weir serve` with SASL and ACLs: an anonymous browser is sent to the login page,
a wrong password is refused, an admin creates a user and its ACLs in the security
view, that user logs in and sees what its ACLs allow and a clear "not authorized"
for the rest (the actions it may not take are not offered), logging out forgets the
login; the transactions view lists a transaction confluent-kafka holds open and
aborts it, after which read_committed readers pass it.

One broker for the module: a SASL_PLAINTEXT Kafka listener, ACLs on, `admin` the
super user (its password also logs in to the console: HTTP Basic)."""

from __future__ import annotations

import urllib.parse
import uuid
from collections.abc import Iterator

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.console_browser import PHONE_SIZE, ConsoleBrowser
from compat_tests.harness import run_cli
from compat_tests.secured_http_broker import ADMIN_PASSWORD, CLIENT_WAIT_S, SecuredHttpBroker

pytestmark = pytest.mark.timeout(120)

SUFFIX = uuid.uuid4().hex[:6]
USER = f"carol-{SUFFIX}"
USER_PASSWORD = f"carol-pw-{SUFFIX}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredHttpBroker]:
    base = tmp_path_factory.mktemp("console-security")
    mechanisms = ("SCRAM-SHA-512", "SCRAM-SHA-256")
    with SecuredHttpBroker.running(base / "broker", mechanisms=mechanisms) as broker:
        yield broker


@pytest.fixture
def browser(chromium: ConsoleBrowser, secured: SecuredHttpBroker) -> Iterator[ConsoleBrowser]:
    """The module's Chromium on the secured broker, logged out."""
    chromium.use_broker(secured.process.http_url)
    chromium.open("/console/login")
    chromium.logout()
    yield chromium
    chromium.assert_no_script_errors()


def on_login_page(browser: ConsoleBrowser) -> bool:
    return urllib.parse.urlparse(browser.driver.current_url).path == "/console/login"


def test_an_anonymous_browser_is_sent_to_the_login_page(browser: ConsoleBrowser) -> None:
    browser.open("/console/security")
    browser.wait_until(lambda: on_login_page(browser), "the login page")
    query = urllib.parse.parse_qs(urllib.parse.urlparse(browser.driver.current_url).query)
    assert query["next"] == ["/console/security"]
    browser.wait_for("#login-form")
    browser.type_into("#login-user", "admin")
    browser.screenshot_for_docs("login")


def test_a_wrong_password_is_refused(browser: ConsoleBrowser) -> None:
    browser.open("/console/login")
    browser.type_into("#login-user", "admin")
    browser.type_into("#login-password", "not-the-password")
    browser.click("#login-submit")
    browser.wait_text("#login-error", "Wrong user or password")
    assert on_login_page(browser)
    assert browser.driver.execute_script("return Weir.authorization()") is None
    browser.type_into("#login-user", "nobody-at-all")
    browser.click("#login-submit")
    browser.wait_text("#login-error", "Wrong user or password")
    assert on_login_page(browser)


def test_an_admin_creates_a_user_and_its_acls_and_logs_out(
    browser: ConsoleBrowser, secured: SecuredHttpBroker
) -> None:
    browser.open("/console/login?next=" + urllib.parse.quote("/console/security"))
    browser.type_into("#login-user", "admin")
    browser.type_into("#login-password", ADMIN_PASSWORD)
    browser.click("#login-submit")
    browser.wait_until(lambda: browser.driver.current_url.endswith("/console/security"), "next")
    browser.wait_text("#weir-user", "admin")
    browser.wait_for("#users tr[data-user='admin']")

    browser.type_into("#user-name", USER)
    browser.type_into("#user-password", USER_PASSWORD)
    browser.click("#user-create")
    browser.wait_for(f"#users tr[data-user='{USER}']")
    browser.wait_text("#security-notice", f"User {USER} created")
    assert USER_PASSWORD not in browser.driver.page_source

    # The user may describe the cluster (list users and ACLs), nothing more.
    browser.type_into("#acl-principal", f"User:{USER}")
    browser.select("#acl-operation", "DESCRIBE")
    browser.select("#acl-resource-type", "CLUSTER")
    browser.type_into("#acl-resource-name", "kafka-cluster")
    browser.click("#acl-create")
    browser.wait_for(f"#acls tr[data-principal='User:{USER}']")
    # A quota, for a realistic page.
    browser.select("#quota-entity-type", "user")
    browser.type_into("#quota-entity-name", USER)
    browser.select("#quota-key", "producer_byte_rate")
    browser.type_into("#quota-value", "1048576")
    browser.click("#quota-set")
    browser.wait_for(f"#quotas tr[data-entity='user={USER}']")
    browser.screenshot_for_docs("security")
    with browser.window_size(*PHONE_SIZE):
        width = browser.driver.execute_script("return document.documentElement.scrollWidth")
        assert width <= browser.driver.execute_script("return window.innerWidth")

    # Deleting: a user, an ACL, a quota (each confirmed first where it cannot be undone).
    browser.type_into("#user-name", f"{USER}-temp")
    browser.type_into("#user-password", "temp-password")
    browser.click("#user-create")
    temp_row = f"#users tr[data-user='{USER}-temp']"
    browser.click(f"{temp_row} button[data-action='delete-user']")
    browser.accept_confirm()
    browser.wait_gone(temp_row)
    browser.select("#acl-operation", "READ")
    browser.select("#acl-resource-type", "TOPIC")
    browser.type_into("#acl-resource-name", "scratch")
    browser.click("#acl-create")
    scratch = f"#acls tr[data-acl='User:{USER}|ALLOW|READ|TOPIC|LITERAL|scratch|*']"
    browser.click(f"{scratch} button[data-action='delete-acl']")
    browser.accept_confirm()
    browser.wait_gone(scratch)
    browser.wait_for(f"#acls tr[data-principal='User:{USER}']")  # the other one stays
    browser.click(f"#quotas tr[data-entity='user={USER}'] button[data-action='remove-quota']")
    browser.accept_confirm()
    browser.wait_gone(f"#quotas tr[data-entity='user={USER}']")

    with secured.admin_http() as http:
        acls = http.get(f"{secured.cluster_path}/acls", params={"principal": f"User:{USER}"})
        assert [(a["resource_type"], a["operation"]) for a in acls.json()["data"]] == [
            ("CLUSTER", "DESCRIBE")
        ]
    with httpx.Client(base_url=secured.process.http_url, auth=(USER, USER_PASSWORD)) as http:
        assert http.get("/v3/clusters").status_code == 200

    browser.click("#weir-logout")
    browser.wait_until(lambda: on_login_page(browser), "the login page after logging out")
    browser.open("/console/security")
    browser.wait_until(lambda: on_login_page(browser), "the login page: the login is forgotten")


def test_the_user_sees_what_its_acls_allow_and_not_authorized_for_the_rest(
    browser: ConsoleBrowser, secured: SecuredHttpBroker
) -> None:
    browser.login(USER, USER_PASSWORD)
    browser.open("/console/security")
    # DESCRIBE on the cluster: users and ACLs are listed...
    browser.wait_for(f"#users tr[data-user='{USER}']")
    browser.wait_for(f"#acls tr[data-principal='User:{USER}']")
    # ... but quotas need DESCRIBE_CONFIGS: a clear refusal, and no table.
    browser.wait_text("#quotas-error", "Not authorized")
    assert not browser.find("#quotas").is_displayed()
    # Changing users, ACLs and quotas is not offered (no ALTER, no ALTER_CONFIGS).
    browser.wait_for("#security-who")
    for form in ("#user-form", "#acl-form", "#quota-form"):
        assert not browser.find(form).is_displayed(), form
    assert not [b for b in browser.find_all("button[data-action]") if b.is_displayed()]

    # And were the page to try (a script, an old tab), the API refuses it: 403.
    status = browser.driver.execute_async_script(
        """const done = arguments[arguments.length - 1];
        Weir.clusterPath("/users").then((path) => Weir.api(path, {method: "POST",
            body: {user_name: "eve", password: "eve-secret"}}))
          .then(() => done(200), (error) => done(error.status));"""
    )
    assert status == 403

    # Transactions: aborting (CLUSTER_ACTION) is not offered.
    browser.open("/console/transactions")
    browser.wait_text("#txn-abort-note", "CLUSTER_ACTION")


def open_transaction(secured: SecuredHttpBroker, topic: str, transactional_id: str) -> Producer:
    """`topic` (one partition) with one record of a transaction left open."""
    admin = AdminClient(secured.kafka_config())
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=CLIENT_WAIT_S)
    producer = Producer({**secured.kafka_config(), "transactional.id": transactional_id})
    producer.init_transactions(CLIENT_WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, b"pending", partition=0)
    assert producer.flush(CLIENT_WAIT_S) == 0
    return producer


def last_stable_offset(secured: SecuredHttpBroker, topic: str) -> int:
    with secured.admin_http() as http:
        partition = http.get(f"{secured.cluster_path}/topics/{topic}/partitions/0").json()
    return int(partition["last_stable_offset"])


def test_the_transactions_view_lists_an_open_transaction_and_aborts_it(
    browser: ConsoleBrowser, secured: SecuredHttpBroker
) -> None:
    topic = f"payments-{SUFFIX}"
    transactional_id = f"{topic}-writer"
    producer = open_transaction(secured, topic, transactional_id)

    browser.login("admin", ADMIN_PASSWORD)
    browser.open("/console/transactions")
    row = f"#transactions tr[data-transactional-id='{transactional_id}']"
    browser.wait_text(row, "Ongoing")
    browser.click(f"{row} a")
    browser.wait_text("#txn-detail-state", "Ongoing")
    browser.wait_for(f"#txn-partitions tr[data-partition='{topic}-0']")
    # Not hanging: its coordinator still counts the partition in the transaction.
    browser.type_into("#hanging-topic", topic)
    browser.type_into("#hanging-timeout-ms", "0")
    browser.click("#hanging-find")
    browser.wait_for("#hanging-none")
    browser.screenshot_for_docs("transactions")

    browser.click(f"#txn-partitions tr[data-partition='{topic}-0'] button[data-action='abort']")
    browser.accept_confirm()
    browser.wait_text("#txn-notice", "Aborted producer")
    browser.wait_gone(f"#txn-partitions tr[data-partition='{topic}-0']")
    # The abort marker ends it: the last stable offset passes the record and the marker.
    assert last_stable_offset(secured, topic) == 2
    del producer


def test_a_hanging_transaction_is_found_and_aborted(
    browser: ConsoleBrowser, secured: SecuredHttpBroker
) -> None:
    """A transaction whose coordinator lost its state (its __transaction_state logs
    emptied while the broker was down, and `weir repair` told to accept it) is
    hanging: no marker will ever end it."""
    topic = f"ledger-{SUFFIX}"
    producer = open_transaction(secured, topic, f"{topic}-writer")
    secured.process.kill()
    for directory in secured.process.data_dir.glob("__transaction_state-*"):
        for segment_file in directory.iterdir():
            if segment_file.suffix in (".log", ".index", ".timeindex"):
                segment_file.write_bytes(b"")
            elif segment_file.name == "recovery-point-offset-checkpoint":
                segment_file.unlink()
    # The broker refuses logs shorter than what it fsynced: an operator's repair accepts it.
    repaired = run_cli("repair", "--data-dir", str(secured.process.data_dir), "--execute")
    assert repaired.returncode == 0, repaired.stderr
    secured.process.start()
    assert last_stable_offset(secured, topic) == 0

    browser.login("admin", ADMIN_PASSWORD)
    browser.open("/console/transactions")
    browser.type_into("#hanging-topic", topic)
    browser.type_into("#hanging-timeout-ms", "0")
    browser.click("#hanging-find")
    hanging = f"#hanging tr[data-partition='{topic}-0']"
    browser.wait_for(hanging)
    browser.click(f"{hanging} button[data-action='abort']")
    browser.accept_confirm()
    browser.wait_text("#txn-notice", "Aborted producer")
    browser.wait_for("#hanging-none")
    assert last_stable_offset(secured, topic) == 2
    del producer
