"""The per-session turn lease: exclusivity, races, waiting, expiry, renewal, idempotent retries."""

from __future__ import annotations

import asyncio
import time

import grpc

from covel.store.v1 import store_pb2
from tests.store.helpers import acquire, commit, expect_error, new_session, play_turn, turn_for, violated_fields


async def test_lease_is_exclusive_and_names_the_session_and_expiry(stub):
    session = await new_session(stub)
    first = await acquire(stub, session.id, holder="scheduler-a", ttl_ms=30_000)
    lease = first.lease
    assert lease.session_id == session.id and lease.logical_turn == 1 and lease.holder == "scheduler-a"
    assert len(lease.lease_id) == 36 and len(lease.turn_id) == 36
    assert lease.deadline.ToMilliseconds() - lease.acquired_at.ToMilliseconds() == 30_000
    assert first.session.id == session.id

    error = await expect_error(grpc.StatusCode.ABORTED, acquire(stub, session.id, holder="scheduler-b"))
    assert session.id in error.details()
    assert "lease until" in error.details() and lease.turn_id in error.details()
    # Players see this message through the scheduler: no lease id, no holder (a scheduler's host name).
    assert lease.lease_id not in error.details() and "scheduler-a" not in error.details()

    # Another session is not affected.
    other = await new_session(stub)
    assert (await acquire(stub, other.id)).HasField("lease")


async def test_default_ttl_is_sixty_seconds(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    assert lease.deadline.ToMilliseconds() - lease.acquired_at.ToMilliseconds() == 60_000


async def test_concurrent_acquirers_exactly_one_wins(stub):
    sessions = [await new_session(stub) for _ in range(4)]
    for session in sessions:
        replies = await asyncio.gather(*(acquire(stub, session.id, holder=f"h{n}") for n in range(4)), return_exceptions=True)
        leases = [reply for reply in replies if isinstance(reply, store_pb2.AcquireTurnLeaseResponse)]
        errors = [reply for reply in replies if isinstance(reply, grpc.aio.AioRpcError)]
        assert len(leases) == 1, replies
        assert len(errors) == 3 and all(error.code() == grpc.StatusCode.ABORTED for error in errors)


async def test_concurrent_takeover_of_an_expired_lease_one_wins(stub):
    session = await new_session(stub)
    await acquire(stub, session.id, ttl_ms=50)
    await asyncio.sleep(0.1)
    replies = await asyncio.gather(*(acquire(stub, session.id) for _ in range(4)), return_exceptions=True)
    assert sum(isinstance(reply, store_pb2.AcquireTurnLeaseResponse) for reply in replies) == 1, replies


async def test_waiting_acquirer_gets_the_lease_after_release(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    started = time.monotonic()
    waiter = asyncio.create_task(acquire(stub, session.id, wait_ms=5_000))
    await asyncio.sleep(0.3)
    assert not waiter.done()
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id))
    second = await waiter
    assert second.HasField("lease") and second.lease.lease_id != lease.lease_id
    assert 0.3 <= time.monotonic() - started < 2.0


async def test_waiting_gives_up_after_wait_ms(stub):
    session = await new_session(stub)
    await acquire(stub, session.id)
    started = time.monotonic()
    await expect_error(grpc.StatusCode.ABORTED, acquire(stub, session.id, wait_ms=300))
    assert 0.3 <= time.monotonic() - started < 1.5


async def test_expired_lease_is_taken_over_and_the_old_holder_loses_it(stub):
    session = await new_session(stub)
    old = (await acquire(stub, session.id, holder="crashed", ttl_ms=100)).lease
    await asyncio.sleep(0.2)
    new = (await acquire(stub, session.id, holder="fresh")).lease
    assert new.lease_id != old.lease_id and new.turn_id != old.turn_id
    error = await expect_error(
        grpc.StatusCode.ABORTED,
        stub.RenewTurnLease(store_pb2.RenewTurnLeaseRequest(session_id=session.id, lease_id=old.lease_id)),
    )
    assert "lost" in error.details() and new.turn_id in error.details()
    assert "fresh" not in error.details() and new.lease_id not in error.details()  # not the new holder, nor its lease id


async def test_renew_extends_the_deadline(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id, ttl_ms=300)).lease
    for _ in range(3):
        await asyncio.sleep(0.15)
        renewed = (
            await stub.RenewTurnLease(store_pb2.RenewTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id, ttl_ms=300))
        ).lease
        assert renewed.lease_id == lease.lease_id
    # Alive past its first deadline because it was renewed.
    await expect_error(grpc.StatusCode.ABORTED, acquire(stub, session.id))
    assert renewed.deadline.ToMilliseconds() > lease.deadline.ToMilliseconds()


async def test_release_is_idempotent_and_frees_the_session(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    request = store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id)
    await stub.ReleaseTurnLease(request)
    await stub.ReleaseTurnLease(request)
    assert (await acquire(stub, session.id)).HasField("lease")
    # Releasing a stale lease does not free someone else's.
    await stub.ReleaseTurnLease(request)
    await expect_error(grpc.StatusCode.ABORTED, acquire(stub, session.id))


async def test_logical_turn_counts_committed_player_turns(stub):
    session = await new_session(stub)
    await play_turn(stub, session.id, "one")
    await play_turn(stub, session.id, "two")
    lease = (await acquire(stub, session.id)).lease
    assert lease.logical_turn == 3


async def test_retry_with_the_same_idempotency_key_returns_the_first_turn(stub):
    session = await new_session(stub)
    first = (await play_turn(stub, session.id, "The door creaks.", idempotency_key="submit-1")).turn
    retried = await acquire(stub, session.id, idempotency_key="submit-1")
    assert retried.WhichOneof("result") == "existing_turn"
    assert retried.existing_turn == first
    assert [message.text for message in retried.existing_turn.messages] == ["I look around.", "The door creaks."]
    assert retried.session.completed_player_turns == 1
    # A different key runs a new turn.
    assert (await acquire(stub, session.id, idempotency_key="submit-2")).HasField("lease")


async def test_same_key_still_running_is_aborted_then_returned_once_finished(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id, idempotency_key="k-running")).lease
    error = await expect_error(grpc.StatusCode.ABORTED, acquire(stub, session.id, idempotency_key="k-running"))
    assert "a turn with idempotency key 'k-running' is still running" in error.details()
    waiter = asyncio.create_task(acquire(stub, session.id, idempotency_key="k-running", wait_ms=5_000))
    await asyncio.sleep(0.1)
    committed = (await commit(stub, lease, turn_for(lease, idempotency_key="k-running"))).turn
    assert (await waiter).existing_turn.id == committed.id


async def test_lease_requests_are_validated(stub):
    session = await new_session(stub)
    cases = [
        (store_pb2.AcquireTurnLeaseRequest(), "session_id"),
        (store_pb2.AcquireTurnLeaseRequest(session_id=session.id, ttl_ms=-1), "ttl_ms"),
        (store_pb2.AcquireTurnLeaseRequest(session_id=session.id, wait_ms=-5), "wait_ms"),
        (store_pb2.AcquireTurnLeaseRequest(session_id=session.id, idempotency_key="k" * 200), "idempotency_key"),
    ]
    for request, field in cases:
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.AcquireTurnLease(request))
        assert violated_fields(error) == [field]
    error = await expect_error(
        grpc.StatusCode.INVALID_ARGUMENT, stub.RenewTurnLease(store_pb2.RenewTurnLeaseRequest(session_id=session.id))
    )
    assert violated_fields(error) == ["lease_id"]


async def test_an_expired_lease_nobody_took_still_works_for_its_holder(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id, ttl_ms=50)).lease
    await asyncio.sleep(0.15)
    renewed = (await stub.RenewTurnLease(store_pb2.RenewTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id))).lease
    assert renewed.deadline.ToMilliseconds() > lease.deadline.ToMilliseconds()
    await asyncio.sleep(0.1)
    reply = await commit(stub, lease, turn_for(lease))
    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED


async def test_a_continuation_shares_the_logical_turn_of_the_input_it_follows(stub):
    from tests.store.helpers import new_session, play_turn

    session = await new_session(stub)
    first = await stub.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(session_id=session.id, holder="t", ttl_ms=1000, origin="continuation"))
    assert first.lease.logical_turn == 1, "before any player turn, logical turn 1"
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=first.lease.lease_id))
    await play_turn(stub, session.id, "The bell rings.")
    after = await stub.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(session_id=session.id, holder="t", ttl_ms=1000, origin="continuation"))
    assert after.lease.logical_turn == 1
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=after.lease.lease_id))
    player = await stub.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(session_id=session.id, holder="t", ttl_ms=1000))
    assert player.lease.logical_turn == 2
