"""The OpenAPI document at `GET /v3/openapi.json` (weir/broker/http/openapi.py),
checked against what a real `weir serve` accepts: every documented operation
routes to a handler (an answer in the API's JSON shape, never the router's own
404 or a 405), and every required parameter is required (left out, the answer is
a 4xx naming it). That every route under /v3 is documented is
tests/broker/http/test_openapi.py's (it walks the app's routes)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from compat_tests.harness import WeirProcess

pytestmark = pytest.mark.timeout(120)

PROBE = "doc-probe"
# Path parameters that are numbers.
NUMERIC_PARAMETERS = {"partition_id", "broker_id"}
METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    proc = WeirProcess.configured(tmp_path_factory.mktemp("rest-openapi"), "")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def http(broker: WeirProcess) -> Iterator[httpx.Client]:
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(base_url=broker.http_url, timeout=30, limits=limits) as client:
        yield client


@pytest.fixture(scope="module")
def document(http: httpx.Client) -> dict[str, Any]:
    response = http.get("/v3/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    return dict(response.json())


@pytest.fixture(scope="module")
def cluster_id(http: httpx.Client) -> str:
    return str(http.get("/v3/clusters").json()["data"][0]["cluster_id"])


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def concrete_path(path: str, cluster_id: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "cluster_id":
            return cluster_id
        return "0" if name in NUMERIC_PARAMETERS else PROBE

    return re.sub(r"{([a-z_]+)}", value, path)


def example(schema: dict[str, Any]) -> Any:
    """A value of `schema` (its first enum value, a probe name, the minimum...)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        return {name: example(sub) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [example(schema["items"])]
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return PROBE


def query_of(operation: dict[str, Any], leave_out: str | None = None) -> dict[str, str]:
    return {
        p["name"]: "ANY" if p["name"] == "resource_type" else PROBE
        for p in operation["parameters"]
        if p["in"] == "query" and p["required"] and p["name"] != leave_out
    }


def body_schema(operation: dict[str, Any]) -> dict[str, Any] | None:
    body = operation.get("requestBody")
    return None if body is None else dict(body["content"]["application/json"]["schema"])


def send(
    http: httpx.Client,
    method: str,
    path: str,
    query: dict[str, str],
    body: dict[str, Any] | None,
) -> httpx.Response:
    return http.request(method.upper(), path, params=query, json=body)


def is_api_answer(response: httpx.Response) -> bool:
    """An answer of the API (JSON, or 204), not the router's text 404 or its 405."""
    if response.status_code == 405:
        return False
    if response.status_code == 204:
        return True
    return response.headers.get("content-type", "").startswith("application/json")


def test_the_document_is_openapi_3_1_and_covers_the_admin_resources(
    document: dict[str, Any],
) -> None:
    assert document["openapi"].startswith("3.1")
    paths = document["paths"]
    for wanted in (
        "/v3/clusters",
        "/v3/clusters/{cluster_id}/topics",
        "/v3/clusters/{cluster_id}/topics/{topic_name}/configs:alter",
        "/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas",
        "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags",
        "/v3/clusters/{cluster_id}/share-groups/{share_group_id}/purge",
        "/v3/clusters/{cluster_id}/acls",
        "/v3/clusters/{cluster_id}/transactions",
        "/v3/openapi.json",
    ):
        assert wanted in paths, wanted
    operation_ids = [op["operationId"] for _, _, op in operations(document)]
    assert len(operation_ids) == len(set(operation_ids)), "an operationId is used twice"
    for path, method, operation in operations(document):
        declared = {p["name"] for p in operation["parameters"] if p["in"] == "path"}
        assert declared == set(re.findall(r"{([a-z_]+)}", path)), f"{method} {path}"
        assert operation["responses"], f"{method} {path} has no responses"


def test_every_documented_operation_routes_to_a_handler(
    http: httpx.Client, document: dict[str, Any], cluster_id: str
) -> None:
    for path, method, operation in operations(document):
        schema = body_schema(operation)
        response = send(
            http,
            method,
            concrete_path(path, cluster_id),
            query_of(operation),
            None if schema is None else example(schema),
        )
        assert is_api_answer(response), (
            f"{method.upper()} {path}: {response.status_code} {response.text}"
        )


def test_the_router_answers_undocumented_paths_and_methods_otherwise(
    http: httpx.Client, cluster_id: str
) -> None:
    """The test above would catch a missing route: its answers are not the API's."""
    assert not is_api_answer(http.get(f"/v3/clusters/{cluster_id}/no-such-resource"))
    assert not is_api_answer(http.patch(f"/v3/clusters/{cluster_id}/topics"))


def test_every_required_parameter_is_required(
    http: httpx.Client, document: dict[str, Any], cluster_id: str
) -> None:
    checked = 0
    for path, method, operation in operations(document):
        concrete = concrete_path(path, cluster_id)
        schema = body_schema(operation)
        full_body = None if schema is None else example(schema)
        for parameter in operation["parameters"]:
            if parameter["in"] != "query" or not parameter["required"]:
                continue
            name = parameter["name"]
            response = send(http, method, concrete, query_of(operation, name), full_body)
            assert 400 <= response.status_code < 500, f"{method} {path} without {name}"
            assert name in response.json()["message"], response.text
            checked += 1
        if schema is None:
            continue
        if operation["requestBody"]["required"]:
            response = http.request(method.upper(), concrete, params=query_of(operation))
            assert 400 <= response.status_code < 500, f"{method} {path} without a body"
            checked += 1
        for name in schema.get("required", []):
            body = {k: v for k, v in example(schema).items() if k != name}
            response = send(http, method, concrete, query_of(operation), body)
            assert 400 <= response.status_code < 500, f"{method} {path} without {name}"
            assert name in response.json()["message"], response.text
            checked += 1
    assert checked >= 10, "too few required parameters were found: is the document empty?"


def links(document: Any) -> Iterator[str]:
    """Every `related` link and `metadata.self` in a response."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key in ("related", "self") and isinstance(value, str):
                yield value
            else:
                yield from links(value)
    elif isinstance(document, list):
        for item in document:
            yield from links(item)


def test_every_link_in_the_resources_leads_to_a_resource(
    broker: WeirProcess, http: httpx.Client, cluster_id: str
) -> None:
    """From /v3/clusters, every `related` and `self` link answers 200 (internal
    topics' links left out: there are many and they are the same routes; the ACLs
    answer 400 SECURITY_DISABLED on this broker without an authorizer)."""
    topic = f"links-{cluster_id[:6].lower()}"
    body = {"topic_name": topic, "partitions_count": 2}
    assert http.post(f"/v3/clusters/{cluster_id}/topics", json=body).status_code == 201
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-group"})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    seen: set[str] = set()
    waiting = [f"{broker.http_url}/v3/clusters"]
    while waiting:
        url = waiting.pop()
        if url in seen or "/topics/__" in url:
            continue
        seen.add(url)
        assert len(seen) < 500, "the links do not end"
        response = http.get(url)
        if url.endswith("/acls") and "SECURITY_DISABLED" in response.text:
            continue  # no authorizer on this broker: ACLs are test_rest_admin_security.py's
        assert response.status_code == 200, f"{url}: {response.status_code} {response.text}"
        waiting += links(response.json())
    assert any(url.endswith("/lag-summary") for url in seen)
    assert any(f"/topics/{topic}/partitions/1/replicas/1" in url for url in seen)
