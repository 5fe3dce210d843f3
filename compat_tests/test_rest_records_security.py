"""The records API with security on, against a real `weir serve`: an HTTP caller may
do what the Kafka API would let the same user do, and no more. WRITE on a topic to
produce to it, READ to read or follow it, DESCRIBE to find it at all (a user without
it gets 403 whether the topic exists or not, as Kafka answers), and no credentials
is 401.

One broker for the module: a SASL_PLAINTEXT Kafka listener (users and ACLs are set
up over it), ACLs on with `admin` as super user; `writer` may WRITE and DESCRIBE the
topic, `reader` may READ and DESCRIBE it, `stranger` may do nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from confluent_kafka.admin import AclOperation, ResourceType

from compat_tests.harness import unique_topic_name
from compat_tests.secured_http_broker import SecuredHttpBroker

pytestmark = pytest.mark.timeout(60)

PASSWORDS = {"writer": "writer-secret", "reader": "reader-secret", "stranger": "stranger-secret"}
GRANTS = {
    "writer": (AclOperation.WRITE, AclOperation.DESCRIBE),
    "reader": (AclOperation.READ, AclOperation.DESCRIBE),
    "stranger": (),
}


class SecuredBroker(SecuredHttpBroker):
    topic = unique_topic_name("rest-acl")

    @property
    def base(self) -> str:
        return f"{self.cluster_path}/topics"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    base = tmp_path_factory.mktemp("rest-records-security")
    with SecuredBroker.running(base / "broker") as secured:
        secured.create_users(PASSWORDS)
        for name, operations in GRANTS.items():
            secured.grant(f"User:{name}", (ResourceType.TOPIC, secured.topic), operations)
        secured.create_topics(secured.topic)
        yield secured


def produce(broker: SecuredBroker, user: str | None, topic: str | None = None) -> httpx.Response:
    with broker.client(user) as http:
        return http.post(
            f"{broker.base}/{topic or broker.topic}/records",
            json={"value": {"type": "STRING", "data": f"from {user}"}},
        )


def read(broker: SecuredBroker, user: str, path: str = "/partitions/0/records") -> httpx.Response:
    with broker.client(user) as http:
        return http.get(f"{broker.base}/{broker.topic}{path}", params={"from": "beginning"})


def test_without_credentials_the_records_api_is_401(broker: SecuredBroker) -> None:
    assert produce(broker, None).status_code == 401
    with broker.client(None) as http:
        assert http.get(f"{broker.base}/{broker.topic}/partitions/0/records").status_code == 401


def test_write_on_the_topic_lets_a_user_produce_and_nothing_else_does(
    broker: SecuredBroker,
) -> None:
    written = produce(broker, "writer")
    assert written.status_code == 200, written.text
    assert written.json()["error_code"] == 200
    for user in ("reader", "stranger"):
        refused = produce(broker, user)
        assert (refused.status_code, refused.json()["error_code"]) == (403, 40301), user


def test_read_on_the_topic_lets_a_user_read_and_follow_it_and_nothing_else_does(
    broker: SecuredBroker,
) -> None:
    assert produce(broker, "writer").status_code == 200
    answer = read(broker, "reader")
    assert answer.status_code == 200, answer.text
    assert "from writer" in [r["value"]["data"] for r in answer.json()["records"]]
    with (
        broker.client("reader") as http,
        http.stream("GET", f"{broker.base}/{broker.topic}/records/stream",
                    params={"from": "beginning"}) as stream,
    ):  # fmt: skip
        assert stream.status_code == 200
        data = next(line for line in stream.iter_lines() if line.startswith("data: "))
        assert json.loads(data[6:])["value"]["data"] == "from writer"
    for user in ("writer", "stranger"):
        for path in ("/partitions/0/records", "/records/stream"):
            refused = read(broker, user, path)
            assert (refused.status_code, refused.json()["error_code"]) == (403, 40301), (user, path)


def test_a_user_without_describe_cannot_tell_a_missing_topic_from_a_hidden_one(
    broker: SecuredBroker,
) -> None:
    hidden = produce(broker, "stranger")
    missing = produce(broker, "stranger", topic=unique_topic_name("missing"))
    assert hidden.status_code == missing.status_code == 403
    assert hidden.json()["error_code"] == missing.json()["error_code"] == 40301
