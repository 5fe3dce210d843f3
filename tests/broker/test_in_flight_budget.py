"""InFlightBudget: one pool for every connection, a minimum each outside it, a
share each; waits in arrival order; nothing leaks when a connection ends."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from weir.broker.in_flight_budget import InFlightBudget

KIB = 1024


def budget(pool: int = 100 * KIB, share: int = 40 * KIB, minimum: int = 4 * KIB) -> InFlightBudget:
    return InFlightBudget(pool, share, minimum)


def test_charges_are_counted_and_released() -> None:
    shared = budget()
    account = shared.open_account()
    account.take(10 * KIB)
    assert (account.held_bytes, shared.held_bytes, shared.pooled_bytes) == (
        10 * KIB,
        10 * KIB,
        6 * KIB,
    )
    account.release(10 * KIB)
    assert (account.held_bytes, shared.held_bytes, shared.pooled_bytes) == (0, 0, 0)


async def test_a_charge_beyond_the_pool_waits_until_others_release() -> None:
    shared = budget()
    holder, waiter = shared.open_account(), shared.open_account()
    holder.take(90 * KIB)  # 86 KiB of the 100 KiB pool
    admitted = trio.Event()

    async def charge() -> None:
        await waiter.charge(30 * KIB)  # 26 KiB from the pool: 14 left
        admitted.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(charge)
        await trio.testing.wait_all_tasks_blocked()
        assert not admitted.is_set()
        assert shared.waits_total == 1
        holder.release(20 * KIB)
        await trio.testing.wait_all_tasks_blocked()
        assert admitted.is_set()
    assert shared.pooled_bytes == 66 * KIB + 26 * KIB


def test_each_connection_may_hold_its_minimum_while_the_pool_is_exhausted() -> None:
    shared = budget()
    shared.open_account().take(200 * KIB)  # a response already built: over the pool
    newcomer = shared.open_account()
    assert newcomer.fits(4 * KIB)
    assert not newcomer.fits(4 * KIB + 1)
    assert newcomer.available_bytes() == 4 * KIB


async def test_waiting_charges_are_admitted_in_arrival_order() -> None:
    shared = budget()
    holder = shared.open_account()
    holder.take(100 * KIB)
    order: list[str] = []

    async def charge(name: str, byte_count: int) -> None:
        await shared.open_account().charge(byte_count)
        order.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(charge, "big", 60 * KIB)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(charge, "small", 10 * KIB)
        await trio.testing.wait_all_tasks_blocked()
        holder.release(30 * KIB)  # room for "small" alone, but "big" came first
        await trio.testing.wait_all_tasks_blocked()
        assert order == []
        holder.release(25 * KIB)  # room for "big" only
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["big"]
        holder.release(45 * KIB)
    assert order == ["big", "small"]


async def test_a_cancelled_wait_leaves_the_queue_and_lets_the_next_in() -> None:
    shared = budget()
    holder = shared.open_account()
    holder.take(100 * KIB)
    first_scope = trio.CancelScope()
    admitted = trio.Event()

    async def first() -> None:
        with first_scope:
            await shared.open_account().charge(80 * KIB)

    async def second() -> None:
        await shared.open_account().charge(10 * KIB)
        admitted.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        holder.release(20 * KIB)  # room for the second, which waits behind the first
        await trio.testing.wait_all_tasks_blocked()
        assert not admitted.is_set()
        first_scope.cancel()  # its connection died
        await trio.testing.wait_all_tasks_blocked()
        assert admitted.is_set()
    assert not shared._waiters


def test_available_bytes_is_bounded_by_the_share_and_by_the_pool() -> None:
    shared = budget()
    account = shared.open_account()
    assert account.available_bytes() == 40 * KIB  # the share
    account.take(30 * KIB)
    assert account.available_bytes() == 10 * KIB
    shared.open_account().take(80 * KIB)  # pool: 26 + 76 KiB used of 100
    assert account.available_bytes() == 0


async def test_wait_within_share_returns_once_the_connection_is_back_under_it() -> None:
    account = budget().open_account()
    account.take(50 * KIB)
    done = trio.Event()

    async def wait() -> None:
        await account.wait_within_share()
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        account.release(5 * KIB)
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()
        account.release(5 * KIB)
    assert done.is_set()


def test_closing_an_account_releases_everything_and_ignores_later_releases() -> None:
    shared = budget()
    account = shared.open_account()
    account.take(70 * KIB)
    account.close()
    assert (shared.held_bytes, shared.pooled_bytes) == (0, 0)
    account.release(10 * KIB)  # the writer's release after the connection died
    account.take(10 * KIB)
    assert (shared.held_bytes, shared.pooled_bytes) == (0, 0)


@pytest.mark.parametrize("minimum,share,pool", [(5, 4, 10), (1, 11, 10)])
def test_limits_must_nest(minimum: int, share: int, pool: int) -> None:
    with pytest.raises(AssertionError):
        InFlightBudget(pool, share, minimum)
