"""A turn waiting for a session's lease is woken when the store lets the session go (services/store/lease_wakeups.py),
not at its next poll: with the polls pushed past the test's end, only the wakeup can hand it the lease."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from covel.store.v1 import store_pb2
from services.store import leases
from services.store.lease_wakeups import LeaseWakeups
from tests.store.helpers import acquire, commit, new_session, story_proposal, story_result, turn_for

# Longer than any wait below: a waiter that gets the lease in time was woken, not polled.
NO_POLL_S = 120.0
IN_TIME_S = 30.0


@pytest.fixture
def no_polls(monkeypatch):
    monkeypatch.setattr(leases, "POLL_FIRST_S", NO_POLL_S)
    monkeypatch.setattr(leases, "POLL_MAX_S", NO_POLL_S)


async def _waiting(stub, session_id: str, origin: str) -> asyncio.Task:
    waiter = asyncio.create_task(acquire(stub, session_id, origin=origin, wait_ms=int(NO_POLL_S * 1000)))
    # Its first ask (the session busy) before the session is let go; were it later, it would simply find it free.
    await asyncio.sleep(0.5)
    assert not waiter.done()
    return waiter


async def test_a_detached_job_waiting_for_the_lease_is_woken_by_the_sessions_background_commit(stub, no_polls):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id, origin="background")).lease
    waiter = await _waiting(stub, session.id, "background")
    await commit(stub, lease, turn_for(lease, origin="background", runtime_results=[story_result()]), [story_proposal("Noted.")])
    second = await asyncio.wait_for(waiter, IN_TIME_S)
    assert second.HasField("lease") and second.lease.lease_id != lease.lease_id


async def test_after_a_players_turn_the_player_goes_first_and_a_waiting_job_is_not_woken(stub, no_polls):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    job = await _waiting(stub, session.id, "background")
    await commit(stub, lease, turn_for(lease, runtime_results=[story_result()]), [story_proposal("The door opens.")])
    # The player acts again at once: the session is theirs, the job (its polls past the test) still waits.
    following = (await acquire(stub, session.id)).lease
    assert following.logical_turn == 2 and not job.done()
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=following.lease_id))
    await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id))
    # The session ended: the job is woken and told so.
    error = await asyncio.wait_for(asyncio.gather(job, return_exceptions=True), IN_TIME_S)
    assert isinstance(error[0], grpc.aio.AioRpcError) and error[0].code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_a_player_waiting_for_the_lease_is_woken_by_the_commit(stub, no_polls):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    waiter = await _waiting(stub, session.id, "player")
    await commit(stub, lease, turn_for(lease, runtime_results=[story_result()]), [story_proposal("The door opens.")])
    second = await asyncio.wait_for(waiter, IN_TIME_S)
    assert second.HasField("lease") and second.lease.logical_turn == 2


async def test_a_commit_that_keeps_the_lease_leaves_the_waiter_waiting(stub, no_polls):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    waiter = await _waiting(stub, session.id, "player")
    await commit(stub, lease, turn_for(lease, runtime_results=[story_result()]), [story_proposal("Still here.")], release=False)
    # Woken, it asked again and found the session still held: it waits on (its polls are past the test).
    await asyncio.sleep(0.5)
    assert not waiter.done()
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id))
    assert (await asyncio.wait_for(waiter, IN_TIME_S)).HasField("lease")


async def test_players_waiting_for_a_session_take_it_in_the_order_they_came(stub, monkeypatch):
    """Two players at one table (docs/api.md "Seats"): the one who submitted first goes first, however often the later
    one asks (its polls are fast here; without the line it would win about half the time, each of three rounds)."""
    monkeypatch.setattr(leases, "POLL_FIRST_S", 0.01)
    monkeypatch.setattr(leases, "POLL_MAX_S", 0.02)
    session = await new_session(stub)
    held = (await acquire(stub, session.id, idempotency_key="held")).lease
    for round_ in range(3):
        first = asyncio.create_task(acquire(stub, session.id, idempotency_key=f"first-{round_}", wait_ms=60_000))
        await asyncio.sleep(0.3)
        second = asyncio.create_task(acquire(stub, session.id, idempotency_key=f"second-{round_}", wait_ms=60_000))
        await asyncio.sleep(0.3)
        assert not first.done() and not second.done()
        await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=held.lease_id))
        taken = (await asyncio.wait_for(first, IN_TIME_S)).lease
        await asyncio.sleep(0.3)
        assert not second.done(), "the later player waits behind the first"
        await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=taken.lease_id))
        held = (await asyncio.wait_for(second, IN_TIME_S)).lease


async def test_wakeups_keep_nothing_once_nobody_waits():
    wakeups = LeaseWakeups()
    with wakeups.watching("s1"), wakeups.watching("s1"):
        first = wakeups.ticket("s1")
        assert wakeups.ticket("s1") is first
        wakeups.wake("s1")
        assert first.is_set() and await LeaseWakeups.wait(first, 0.01)
        second = wakeups.ticket("s1")
        assert second is not first and not await LeaseWakeups.wait(second, 0.01)
    wakeups.wake("s2")  # nobody waits: nothing kept
    assert not wakeups._events and not wakeups._watchers
    with wakeups.in_line("s1") as first, wakeups.in_line("s1") as second:
        assert first() and not second()
    assert not wakeups._lines
