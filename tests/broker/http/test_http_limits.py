"""weir/broker/http/listener.py: the request size checks."""

from __future__ import annotations

from weir.broker.http.listener import _body_too_large, _head_bytes


def scope(headers: list[tuple[bytes, bytes]], path: bytes = b"/metrics") -> dict[str, object]:
    return {"raw_path": path, "query_string": b"", "method": "GET", "headers": headers}


def test_bodies_announced_over_the_limit_are_too_large() -> None:
    assert not _body_too_large(scope([]), 10)
    assert not _body_too_large(scope([(b"content-length", b"10")]), 10)
    assert _body_too_large(scope([(b"content-length", b"11")]), 10)
    assert _body_too_large(scope([(b"content-length", b"-1")]), 10)


def test_head_bytes_grow_with_the_headers() -> None:
    small = _head_bytes(scope([(b"host", b"weir")]))
    assert _head_bytes(scope([(b"host", b"weir"), (b"x-big", b"a" * 1000)])) > small + 1000
