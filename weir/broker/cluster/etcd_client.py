"""An etcd v3 client over etcd's JSON gateway (grpc-gateway: `POST /v3/kv/range`
and friends; keys and values base64, int64s as strings), on Trio through httpx.

Why this and not a gRPC client: see ARCHITECTURE.md, Dependencies. Every call is
bounded in time (`request_timeout_s`) and in the bytes it reads
(`response_bytes_max`). Endpoints are tried from the last one that answered; a
connection that could not be made moves on to the next, but a write whose request
may have reached etcd is never resent elsewhere (EtcdUnavailable: the caller reads
again and decides).
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import trio

RESPONSE_BYTES_MAX = 64 * 1024 * 1024
# TCP keepalive on every connection to etcd, so that a watch stream whose peer is
# gone (a machine lost, a network cut) ends within about 5 + 2 * 3 = 11 s. A watch
# may be silent for as long as nothing changes: etcd sends progress notifications
# only every 10 minutes unless started with a shorter
# --experimental-watch-progress-notify-interval, so silence is never taken as a
# broken stream; the cluster member audits its watch instead (cluster_member.py).
TCP_KEEPALIVE_IDLE_S = 5
TCP_KEEPALIVE_INTERVAL_S = 2
TCP_KEEPALIVE_PROBES = 3


class EtcdError(Exception):
    """etcd answered with an error, or something unreadable."""


class EtcdUnavailable(EtcdError):  # noqa: N818 - named as etcd's gRPC status
    """No endpoint answered within the timeout, or a write's outcome is unknown."""


class WatchCompacted(EtcdError):  # noqa: N818 - named as etcd's watch response field
    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"watch start revision was compacted (now {compact_revision})")
        self.compact_revision = compact_revision


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease_id: int


@dataclass(frozen=True, slots=True)
class Compare:
    key: bytes
    target: str  # VERSION, CREATE, MOD, VALUE
    result: str  # EQUAL, ...
    operand: int | bytes

    @classmethod
    def mod_revision_is(cls, key: bytes, revision: int) -> Compare:
        return cls(key, "MOD", "EQUAL", revision)

    @classmethod
    def absent(cls, key: bytes) -> Compare:
        return cls(key, "CREATE", "EQUAL", 0)

    @classmethod
    def value_is(cls, key: bytes, value: bytes) -> Compare:
        return cls(key, "VALUE", "EQUAL", value)

    @classmethod
    def create_revision_is(cls, key: bytes, revision: int) -> Compare:
        return cls(key, "CREATE", "EQUAL", revision)

    def to_json(self) -> dict[str, Any]:
        field_name = {
            "MOD": "mod_revision",
            "CREATE": "create_revision",
            "VERSION": "version",
            "VALUE": "value",
        }[self.target]
        operand = _b64(self.operand) if isinstance(self.operand, bytes) else str(self.operand)
        return {
            "key": _b64(self.key),
            "target": self.target,
            "result": self.result,
            field_name: operand,
        }


@dataclass(frozen=True, slots=True)
class Put:
    key: bytes
    value: bytes
    lease_id: int = 0


@dataclass(frozen=True, slots=True)
class DeleteRange:
    key: bytes
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Range:
    key: bytes
    prefix: bool = False
    # Keys and revisions only, no values (cheap to ask often).
    keys_only: bool = False
    # Only keys last put at or after this revision (0: any).
    min_mod_revision: int = 0


Operation = Put | DeleteRange | Range


@dataclass(frozen=True, slots=True)
class TxnResult:
    succeeded: bool
    revision: int
    ranges: list[list[KeyValue]]


@dataclass(frozen=True, slots=True)
class WatchEvent:
    kind: Literal["put", "delete"]
    kv: KeyValue


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: object) -> bytes:
    if not isinstance(text, str):
        return b""
    return base64.b64decode(text)


def _int(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, (int, str)):
        return int(value)
    raise EtcdError(f"expected an integer, got {value!r}")


def prefix_end(prefix: bytes) -> bytes:
    """The range end that covers every key starting with `prefix` (etcd's rule)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\x00"


def _key_value(doc: dict[str, Any]) -> KeyValue:
    return KeyValue(
        key=_unb64(doc.get("key")),
        value=_unb64(doc.get("value")),
        create_revision=_int(doc.get("create_revision")),
        mod_revision=_int(doc.get("mod_revision")),
        version=_int(doc.get("version")),
        lease_id=_int(doc.get("lease")),
    )


def _range_json(key: bytes, prefix: bool) -> dict[str, str]:
    doc = {"key": _b64(key)}
    if prefix:
        doc["range_end"] = _b64(prefix_end(key))
    return doc


def _operation_json(operation: Operation) -> dict[str, Any]:
    if isinstance(operation, Put):
        put: dict[str, Any] = {"key": _b64(operation.key), "value": _b64(operation.value)}
        if operation.lease_id:
            put["lease"] = str(operation.lease_id)
        return {"request_put": put}
    if isinstance(operation, DeleteRange):
        return {"request_delete_range": _range_json(operation.key, operation.prefix)}
    request: dict[str, Any] = _range_json(operation.key, operation.prefix)
    if operation.keys_only:
        request["keys_only"] = True
    if operation.min_mod_revision:
        request["min_mod_revision"] = str(operation.min_mod_revision)
    return {"request_range": request}


def _keepalive_socket_options() -> list[tuple[int, int, int]]:
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux; elsewhere the system's defaults
        options += [
            (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, TCP_KEEPALIVE_IDLE_S),
            (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, TCP_KEEPALIVE_INTERVAL_S),
            (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, TCP_KEEPALIVE_PROBES),
        ]
    return options


def _check_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an etcd client URL (http://host:port)")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{url!r}: {exc}") from None
    if port is None:
        raise ValueError(f"{url!r} has no port (etcd's client port is usually 2379)")
    return f"{parts.scheme}://{parts.hostname}:{port}"


@dataclass(frozen=True)
class EtcdTls:
    """etcd over TLS (`https://` endpoints): the CA etcd's certificate chains to, and
    the client certificate and key etcd's `--client-cert-auth` asks for."""

    cafile: str
    certfile: str = ""
    keyfile: str = ""

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.cafile or None)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.certfile:
            context.load_cert_chain(self.certfile, self.keyfile or None)
        return context


class EtcdClient:
    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        request_timeout_s: float = 5.0,
        response_bytes_max: int = RESPONSE_BYTES_MAX,
        tls: EtcdTls | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoint")
        self.endpoints = [_check_url(e) for e in endpoints]
        self.request_timeout_s = request_timeout_s
        self.response_bytes_max = response_bytes_max
        self._preferred = 0
        transport = httpx.AsyncHTTPTransport(
            socket_options=_keepalive_socket_options(),
            verify=tls.context() if tls is not None else True,
        )
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(request_timeout_s), transport=transport
        )

    @classmethod
    def from_urls(cls, urls: str, **settings: Any) -> EtcdClient:
        endpoints = [u for u in urls.split(",") if u.strip()]
        return cls(endpoints, **settings)

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- requests --------------------------------------------------------------------

    def _order(self) -> list[int]:
        count = len(self.endpoints)
        return [(self._preferred + i) % count for i in range(count)]

    async def _call(self, path: str, body: dict[str, Any], *, idempotent: bool) -> dict[str, Any]:
        failures = []
        for index in self._order():
            url = self.endpoints[index] + path
            try:
                with trio.fail_after(self.request_timeout_s):
                    async with self._http.stream("POST", url, json=body) as response:
                        payload = await self._read_bounded(response)
            except httpx.ConnectError as exc:
                failures.append(f"{self.endpoints[index]}: {exc}")
                continue
            except (httpx.HTTPError, trio.TooSlowError) as exc:
                if not idempotent:
                    raise EtcdUnavailable(
                        f"{self.endpoints[index]}: {exc!r} (the request may have been applied)"
                    ) from exc
                failures.append(f"{self.endpoints[index]}: {exc!r}")
                continue
            self._preferred = index
            return self._decode(payload, response.status_code)
        raise EtcdUnavailable("no etcd endpoint answered: " + "; ".join(failures))

    async def _read_bounded(self, response: httpx.Response) -> bytes:
        chunks = bytearray()
        async for chunk in response.aiter_bytes():
            chunks += chunk
            if len(chunks) > self.response_bytes_max:
                raise EtcdError(f"etcd response larger than {self.response_bytes_max} bytes")
        return bytes(chunks)

    @staticmethod
    def _decode(payload: bytes, status_code: int) -> dict[str, Any]:
        try:
            doc = json.loads(payload)
        except ValueError as exc:
            raise EtcdError(f"unreadable etcd answer (HTTP {status_code})") from exc
        if not isinstance(doc, dict):
            raise EtcdError(f"unexpected etcd answer (HTTP {status_code})")
        if status_code != 200 or "error" in doc:
            message = doc.get("message") or doc.get("error") or f"HTTP {status_code}"
            raise EtcdError(f"etcd: {message}")
        return doc

    async def get(self, key: bytes) -> KeyValue | None:
        doc = await self._call("/v3/kv/range", {"key": _b64(key)}, idempotent=True)
        kvs = doc.get("kvs") or []
        return _key_value(kvs[0]) if kvs else None

    async def get_prefix(self, prefix: bytes) -> tuple[list[KeyValue], int]:
        doc = await self._call("/v3/kv/range", _range_json(prefix, True), idempotent=True)
        kvs = sorted((_key_value(kv) for kv in doc.get("kvs") or []), key=lambda kv: kv.key)
        return kvs, _int(doc.get("header", {}).get("revision"))

    async def put(self, key: bytes, value: bytes, *, lease_id: int = 0) -> int:
        body: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease_id:
            body["lease"] = str(lease_id)
        doc = await self._call("/v3/kv/put", body, idempotent=False)
        return _int(doc.get("header", {}).get("revision"))

    async def delete(self, key: bytes, *, prefix: bool = False) -> int:
        doc = await self._call("/v3/kv/deleterange", _range_json(key, prefix), idempotent=False)
        return _int(doc.get("deleted"))

    async def txn(
        self,
        compares: Sequence[Compare],
        success: Sequence[Operation],
        failure: Sequence[Operation] = (),
    ) -> TxnResult:
        body = {
            "compare": [c.to_json() for c in compares],
            "success": [_operation_json(o) for o in success],
            "failure": [_operation_json(o) for o in failure],
        }
        doc = await self._call("/v3/kv/txn", body, idempotent=False)
        ranges = [
            [_key_value(kv) for kv in r["response_range"].get("kvs") or []]
            for r in doc.get("responses") or []
            if "response_range" in r
        ]
        return TxnResult(
            succeeded=bool(doc.get("succeeded", False)),
            revision=_int(doc.get("header", {}).get("revision")),
            ranges=ranges,
        )

    async def lease_grant(self, ttl_s: int) -> int:
        doc = await self._call("/v3/lease/grant", {"TTL": str(ttl_s)}, idempotent=False)
        return _int(doc.get("ID"))

    async def lease_keepalive(self, lease_id: int) -> int:
        doc = await self._call("/v3/lease/keepalive", {"ID": str(lease_id)}, idempotent=True)
        result = doc.get("result") or {}
        return _int(result.get("TTL"))

    async def lease_revoke(self, lease_id: int) -> None:
        try:
            await self._call("/v3/lease/revoke", {"ID": str(lease_id)}, idempotent=True)
        except EtcdUnavailable:
            raise
        except EtcdError as exc:
            if "not found" not in str(exc):
                raise

    async def member_list(self) -> list[str]:
        doc = await self._call("/v3/cluster/member/list", {}, idempotent=True)
        urls: list[str] = []
        for member in doc.get("members") or []:
            urls.extend(str(u) for u in member.get("clientURLs") or [])
        return urls

    # -- watches -----------------------------------------------------------------------

    def watch_prefix(
        self, prefix: bytes, start_revision: int
    ) -> AbstractAsyncContextManager[AsyncIterator[list[WatchEvent]]]:
        return self._watch(prefix, start_revision)

    @asynccontextmanager
    async def _watch(
        self, prefix: bytes, start_revision: int
    ) -> AsyncIterator[AsyncIterator[list[WatchEvent]]]:
        body = {
            "create_request": {
                **_range_json(prefix, True),
                "start_revision": str(start_revision),
                "progress_notify": True,
            }
        }
        last_error = "no endpoint"
        for index in self._order():
            url = self.endpoints[index] + "/v3/watch"
            timeout = httpx.Timeout(self.request_timeout_s, read=None)
            try:
                async with self._http.stream("POST", url, json=body, timeout=timeout) as response:
                    if response.status_code != 200:
                        raise EtcdError(f"watch refused: HTTP {response.status_code}")
                    self._preferred = index
                    yield self._events(response)
                    return
            except httpx.ConnectError as exc:
                last_error = f"{self.endpoints[index]}: {exc}"
                continue
            except httpx.HTTPError as exc:
                raise EtcdUnavailable(f"watch stream broke: {exc!r}") from exc
        raise EtcdUnavailable(f"no etcd endpoint to watch: {last_error}")

    async def _events(self, response: httpx.Response) -> AsyncIterator[list[WatchEvent]]:
        buffer = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                buffer += chunk
                if len(buffer) > self.response_bytes_max:
                    raise EtcdError("watch message larger than the response limit")
                while True:
                    newline = buffer.find(b"\n")
                    if newline < 0:
                        break
                    line = bytes(buffer[:newline])
                    del buffer[: newline + 1]
                    if line.strip():
                        events = self._watch_message(line)
                        if events:
                            yield events
        except httpx.HTTPError as exc:
            raise EtcdUnavailable(f"watch stream broke: {exc!r}") from exc
        raise EtcdUnavailable("watch stream ended")

    @staticmethod
    def _watch_message(line: bytes) -> list[WatchEvent]:
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise EtcdError("unreadable watch message") from exc
        if "error" in doc:
            raise EtcdUnavailable(f"watch: {doc['error'].get('message', doc['error'])}")
        result = doc.get("result") or {}
        compact_revision = _int(result.get("compact_revision"))
        if compact_revision:
            raise WatchCompacted(compact_revision)
        if result.get("canceled"):
            raise EtcdUnavailable(f"watch canceled: {result.get('cancel_reason', '')}")
        return [
            WatchEvent(
                kind="delete" if e.get("type") == "DELETE" else "put", kv=_key_value(e["kv"])
            )
            for e in result.get("events") or []
        ]
