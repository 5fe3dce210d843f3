"""Weir's etcd client (weir/broker/cluster/etcd_client.py) against a real etcd: CAS, leases,
watches across a member's loss, and its answers when etcd is gone or misbehaves."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from compat_tests.etcd_harness import EtcdCluster
from weir.broker.cluster.etcd_client import (
    Compare,
    DeleteRange,
    EtcdClient,
    EtcdError,
    EtcdUnavailable,
    Put,
    Range,
    WatchEvent,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster.start(tmp_path / "etcd", 1)
    try:
        yield cluster
    finally:
        cluster.stop()


async def test_compare_and_swap_succeeds_once_on_a_revision(etcd: EtcdCluster) -> None:
    client = EtcdClient.from_urls(etcd.client_urls)
    try:
        created = await client.txn([Compare.absent(b"/t/k")], [Put(b"/t/k", b"1")])
        again = await client.txn([Compare.absent(b"/t/k")], [Put(b"/t/k", b"2")])
        assert created.succeeded and not again.succeeded
        kv = await client.get(b"/t/k")
        assert kv is not None and kv.value == b"1"
        swapped = await client.txn(
            [Compare.mod_revision_is(b"/t/k", kv.mod_revision)], [Put(b"/t/k", b"3")]
        )
        stale = await client.txn(
            [Compare.mod_revision_is(b"/t/k", kv.mod_revision)],
            [Put(b"/t/k", b"4")],
            [Range(b"/t/k")],
        )
        assert swapped.succeeded and not stale.succeeded
        assert [kv.value for kv in stale.ranges[0]] == [b"3"]
        await client.txn([Compare.value_is(b"/t/k", b"3")], [DeleteRange(b"/t/", prefix=True)])
        assert (await client.get_prefix(b"/t/"))[0] == []
    finally:
        await client.aclose()


async def test_a_key_under_a_lease_goes_when_the_lease_is_not_renewed(etcd: EtcdCluster) -> None:
    client = EtcdClient.from_urls(etcd.client_urls)
    try:
        kept, dropped = await client.lease_grant(2), await client.lease_grant(2)
        await client.put(b"/l/kept", b"x", lease_id=kept)
        await client.put(b"/l/dropped", b"x", lease_id=dropped)
        for _ in range(4):
            await trio.sleep(1)
            assert await client.lease_keepalive(kept) > 0
        assert await client.get(b"/l/kept") is not None
        assert await client.get(b"/l/dropped") is None
        assert await client.lease_keepalive(dropped) == 0
        await client.lease_revoke(kept)
        assert await client.get(b"/l/kept") is None
        await client.lease_revoke(kept)  # already gone: no error
    finally:
        await client.aclose()


async def _wait_for_a_leader(client: EtcdClient, timeout_s: float = 20.0) -> None:
    """A linearizable read succeeds only through a leader: retried until one does."""
    with trio.fail_after(timeout_s):
        while True:
            try:
                await client.get_prefix(b"/w/")
                return
            except EtcdError:
                await trio.sleep(0.2)


async def test_a_watch_resumes_on_another_member_from_its_last_revision(tmp_path: Path) -> None:
    cluster = EtcdCluster.start(tmp_path / "etcd3", 3)
    client = EtcdClient.from_urls(cluster.client_urls, request_timeout_s=2.0)
    seen: list[WatchEvent] = []
    try:
        _, revision = await client.get_prefix(b"/w/")
        await client.put(b"/w/a", b"1")
        async with client.watch_prefix(b"/w/", revision + 1) as batches:
            async for events in batches:
                seen.extend(events)
                break
        # The member the client used dies; the writes go on and the next watch,
        # from the revision after the last event seen, gets them from another.
        used = next(m for m in cluster.members if m.client_url in client.endpoints[:1])
        used.kill()
        await _wait_for_a_leader(client)  # a write while the rest elect one may time out
        await client.put(b"/w/b", b"2")
        await client.delete(b"/w/a")
        with trio.fail_after(20):
            async with client.watch_prefix(b"/w/", seen[-1].kv.mod_revision + 1) as batches:
                async for events in batches:
                    seen.extend(events)
                    if len(seen) >= 3:
                        break
    finally:
        await client.aclose()
        cluster.stop()
    assert [(e.kind, e.kv.key) for e in seen] == [
        ("put", b"/w/a"), ("put", b"/w/b"), ("delete", b"/w/a"),
    ]  # fmt: skip


async def test_no_member_answering_is_etcd_unavailable_within_the_timeout(
    etcd: EtcdCluster,
) -> None:
    etcd.stop()
    client = EtcdClient.from_urls(etcd.client_urls, request_timeout_s=1.0)
    started = time.monotonic()
    try:
        with pytest.raises(EtcdUnavailable):
            await client.get(b"/x")
    finally:
        await client.aclose()
    assert time.monotonic() - started < 5


async def test_an_answer_larger_than_the_limit_is_refused(etcd: EtcdCluster) -> None:
    client = EtcdClient.from_urls(etcd.client_urls, response_bytes_max=4096)
    try:
        await client.put(b"/big", b"x" * 8192)
        with pytest.raises(EtcdError, match="larger than"):
            await client.get(b"/big")
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "urls", ["", "etcd:2379", "http://", "http://host", "ftp://h:1", "http://h:99999"]
)
def test_a_bad_etcd_url_is_refused(urls: str) -> None:
    with pytest.raises(ValueError):
        EtcdClient.from_urls(urls)
