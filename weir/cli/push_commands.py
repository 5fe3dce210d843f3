"""`weir push`: push subscriptions, through a broker's HTTP API (`/v1/subscriptions`,
docs/http-push.md).

    weir push create NAME --topic T --url URL [--filter NAME[=VALUE[,VALUE...]]] ...
    weir push list
    weir push describe NAME [--http URL ...]   (each broker shows the partitions it leads)
    weir push pause NAME | resume NAME | delete NAME

`--http URL` (env WEIR_HTTP, default http://127.0.0.1:8090) is the broker's HTTP
address; `--http-auth USER:PASSWORD` (env WEIR_HTTP_AUTH) sends HTTP Basic
credentials when the broker's security is on. `create` prints the subscription's
secret: it is shown this once.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from weir.cli.errors import CliError
from weir.cli.formatting import JSON, render_json, render_table

HTTP_ENV = "WEIR_HTTP"
HTTP_AUTH_ENV = "WEIR_HTTP_AUTH"
HTTP_DEFAULT = "http://127.0.0.1:8090"
HTTP_TIMEOUT_S = 10.0
RESPONSE_BYTES_MAX = 8 * 1024 * 1024


def add_push_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    push = commands.add_parser(
        "push", help="push subscriptions: POST a topic's records to an HTTP(S) URL"
    )
    actions = push.add_subparsers(dest="push_command", metavar="ACTION", required=True)
    http = argparse.ArgumentParser(add_help=False)
    http.add_argument(
        "--http",
        action="append",
        metavar="URL",
        help=f"a broker's HTTP address (env {HTTP_ENV}; default {HTTP_DEFAULT}); describe "
        "takes it once per broker, to show every partition's delivery status",
    )
    http.add_argument(
        "--http-auth", metavar="USER:PASSWORD", help=f"HTTP Basic credentials (env {HTTP_AUTH_ENV})"
    )
    parents = [common, http]
    create = actions.add_parser("create", parents=parents, help="create a subscription")
    create.add_argument("name", help="the subscription's name (its share group: weir-push-NAME)")
    create.add_argument("--topic", required=True, help="the topic whose records are pushed")
    create.add_argument("--url", required=True, help="where records are POSTed (http or https)")
    create.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="HEADER[=V1,V2]",
        help="deliver only records with this header (one of these values); repeatable: all match",
    )
    create.add_argument("--batch-size", type=int, help="records per POST (default 1)")
    create.add_argument("--concurrency", type=int, help="deliveries in flight per partition")
    create.add_argument(
        "--timeout-ms", type=int, help="a POST unanswered this long failed (default 10000)"
    )
    create.add_argument(
        "--min-backoff-ms", type=int, help="wait after the first failure (default 1000)"
    )
    create.add_argument(
        "--max-backoff-ms", type=int, help="the longest wait between attempts (default 60000)"
    )
    create.add_argument(
        "--max-attempts", type=int, help="deliveries before a record is dead-lettered (default 5)"
    )
    create.add_argument(
        "--dead-letter-topic", help="where records go after max attempts (dlq.* by default)"
    )
    create.add_argument(
        "--ordered-by-key", action="store_true", help="one delivery per key at a time, in order"
    )
    create.add_argument("--paused", action="store_true", help="create it paused")
    create.add_argument(
        "--start", choices=["latest", "earliest"], help="where a new subscription starts"
    )
    actions.add_parser("list", parents=parents, help="list the subscriptions")
    for action, text in (
        ("describe", "a subscription and its delivery status per partition"),
        ("pause", "stop delivering (records wait)"),
        ("resume", "deliver again"),
        ("delete", "delete a subscription"),
    ):
        parser = actions.add_parser(action, parents=parents, help=text)
        parser.add_argument("name", help="the subscription's name")


def run_push_command(args: argparse.Namespace, stdout: TextIO) -> int:
    urls = args.http or [os.environ.get(HTTP_ENV) or HTTP_DEFAULT]
    client = _Http(urls, args.http_auth or os.environ.get(HTTP_AUTH_ENV))
    action = args.push_command
    render: Callable[[dict[str, Any]], str]
    name = getattr(args, "name", "")
    quoted = urllib.parse.quote(name, safe="")
    if action == "create":
        document = client.request("POST", "/v1/subscriptions", create_request(args))
        render = _render_created
    elif action == "list":
        document = client.request("GET", "/v1/subscriptions")
        render = _render_list
    elif action == "describe":
        document = describe(client, quoted)
        render = _render_describe
    elif action in ("pause", "resume"):
        document = client.request("POST", f"/v1/subscriptions/{quoted}/{action}")
        render = _render_one
    elif action == "delete":
        document = client.request("DELETE", f"/v1/subscriptions/{quoted}")
        render = _render_deleted
    else:
        raise AssertionError(f"unknown push action {action!r}")
    stdout.write(render_json(document) if args.output_format == JSON else render(document))
    return 0


def create_request(args: argparse.Namespace) -> dict[str, Any]:
    """The POST body from `weir push create`'s options (the broker checks it)."""
    body: dict[str, Any] = {"name": args.name, "topic": args.topic, "url": args.url}
    filters = []
    for text in args.filter:
        header, separator, values = text.partition("=")
        filters.append({"name": header, "values": values.split(",") if separator else []})
    if filters:
        body["header_filters"] = filters
    for option in ("batch_size", "concurrency", "timeout_ms", "dead_letter_topic", "start"):
        value = getattr(args, option)
        if value is not None:
            body[option] = value
    retry = {
        field: getattr(args, field)
        for field in ("min_backoff_ms", "max_backoff_ms", "max_attempts")
        if getattr(args, field) is not None
    }
    if retry:
        body["retry"] = retry
    if args.ordered_by_key:
        body["ordered_by_key"] = True
    if args.paused:
        body["paused"] = True
    return body


def describe(client: _Http, quoted: str) -> dict[str, Any]:
    """The subscription, with the partitions' status from every broker asked (each
    shows the partitions it leads)."""
    documents = client.request_each("GET", f"/v1/subscriptions/{quoted}")
    merged = dict(documents[0])
    partitions: dict[int, dict[str, Any]] = {}
    for document in documents:
        for row in document.get("partitions", []):
            seen = partitions.get(row["partition"])
            if seen is None or (row.get("leader") and not seen.get("leader")):
                partitions[row["partition"]] = {**row, "broker": document.get("broker")}
    merged["partitions"] = [partitions[p] for p in sorted(partitions)]
    merged.pop("broker", None)
    return merged


class _Http:
    def __init__(self, urls: Sequence[str], auth: str | None) -> None:
        self.urls = [url if "://" in url else f"http://{url}" for url in urls]
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.headers = {"Content-Type": "application/json"}
        if auth:
            token = base64.b64encode(auth.encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"

    def request(self, method: str, path: str, body: object = None) -> dict[str, Any]:
        return self._one(self.urls[0], method, path, body)

    def request_each(self, method: str, path: str) -> list[dict[str, Any]]:
        return [self._one(url, method, path, None) for url in self.urls]

    def _one(self, base: str, method: str, path: str, body: object) -> dict[str, Any]:
        url = base.rstrip("/") + path
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method, headers=self.headers)
        try:
            with self.opener.open(request, timeout=HTTP_TIMEOUT_S) as response:
                raw = response.read(RESPONSE_BYTES_MAX)
        except urllib.error.HTTPError as exc:
            raise CliError(f"{method} {url}: {exc.code}: {_error_text(exc)}") from None
        except OSError as exc:
            raise CliError(f"{method} {url}: {exc}") from None
        try:
            document = json.loads(raw)
        except ValueError:
            raise CliError(f"{method} {url}: the answer is not JSON") from None
        if not isinstance(document, dict):
            raise CliError(f"{method} {url}: the answer is not a JSON object")
        return document


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read(65536)).get("message", exc.reason))
    except (ValueError, AttributeError, OSError):
        return str(exc.reason)


def _render_created(document: dict[str, Any]) -> str:
    return (
        _render_one(document)
        + f"secret: {document['secret']}\n"
        + "(the secret is shown this once: receivers verify Weir-Signature with it)\n"
    )


def _render_deleted(document: dict[str, Any]) -> str:
    return f"deleted {document['deleted']}\n"


def _render_one(document: dict[str, Any]) -> str:
    state = "paused" if document.get("paused") else "active"
    return f"{document['name']}: {state}, {document['topic']} -> {document['url']}\n"


def _render_list(document: dict[str, Any]) -> str:
    rows = [
        [s["name"], s["topic"], s["url"], "paused" if s["paused"] else "active", s["group"]]
        for s in document["subscriptions"]
    ]
    return render_table(["name", "topic", "url", "state", "group"], rows)


def _render_describe(document: dict[str, Any]) -> str:
    retry = document["retry"]
    lines = [
        _render_one(document).rstrip("\n"),
        f"group: {document['group']}  batch size: {document['batch_size']}  "
        f"concurrency: {document['concurrency']}  timeout: {document['timeout_ms']} ms",
        f"retry: {retry['min_backoff_ms']}..{retry['max_backoff_ms']} ms, "
        f"{retry['max_attempts']} attempts; dead letters: {document['dead_letter_topic'] or '-'}; "
        f"ordered by key: {'yes' if document['ordered_by_key'] else 'no'}",
        "",
    ]
    rows = [
        [
            p["partition"], p.get("broker", ""), p["delivered"], p["filtered"], p["failed"],
            p["dead_lettered"], p["in_flight"],
            p["last_errors"][-1]["error"] if p["last_errors"] else "",
        ]
        for p in document["partitions"]
    ]  # fmt: skip
    headers = ["partition", "broker", "delivered", "filtered", "failed", "dead_lettered",
               "in_flight", "last_error"]  # fmt: skip
    return "\n".join(lines) + render_table(headers, rows)
