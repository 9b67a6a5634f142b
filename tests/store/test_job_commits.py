"""A detached job's commit in one call (CommitTurnRequest.job, issue 39): the commit takes the session's lease in its
own transaction (waiting for a turn that holds it, the player first) and ends the job when its turn commits, instead
of AcquireTurnLease, CommitTurn and CompleteDetachedJob one after another."""

from __future__ import annotations

import asyncio

import grpc

from covel.store.v1 import store_pb2
from shared.errors import error_info
from shared.ids import new_id
from shared.structs import from_struct, to_struct
from tests.store.helpers import (
    acquire,
    commit_turn,
    data_proposal,
    expect_error,
    new_session,
    plugin_data,
    violated_fields,
)
from tests.store.test_detached_jobs import claim, jobs_of, spec


def job_turn(session_id: str, key: str, status: int = store_pb2.TURN_STATUS_COMMITTED) -> store_pb2.Turn:
    return store_pb2.Turn(id=new_id(), session_id=session_id, status=status, origin="background", idempotency_key=key,
                          runtime_results=[store_pb2.RuntimeResult(runtime_id="summarize", plugin_id="memory", status="success")])


def taking(job: store_pb2.DetachedJob | None = None, wait_ms: int = 0) -> store_pb2.JobCommit:
    ended = {"job_id": job.id, "job_lease_id": job.lease_id, "result": to_struct({"runtimeStatus": "success"})} if job else {}
    return store_pb2.JobCommit(take_lease=True, holder="scheduler-1", wait_ms=wait_ms, **ended)


def job_request(session_id: str, turn: store_pb2.Turn, job: store_pb2.JobCommit, **fields) -> store_pb2.CommitTurnRequest:
    return store_pb2.CommitTurnRequest(session_id=session_id, turn=turn, job=job,
                                       proposals=[data_proposal("notes", "seen", True, runtime_id="summarize")], **fields)


async def queued_job(stub) -> tuple[store_pb2.Session, store_pb2.DetachedJob]:
    session = await new_session(stub)
    await commit_turn(stub, session.id, detached_jobs=[spec()])
    job = await claim(stub, session.id)
    assert job is not None
    return session, job


async def test_a_jobs_commit_takes_the_lease_and_ends_the_job_in_one_call(stub):
    session, job = await queued_job(stub)
    reply = await stub.CommitTurn(job_request(session.id, job_turn(session.id, "job-a"), taking(job)))
    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED and reply.turn.logical_turn == 1, "the job's logical turn is its commit's"
    assert (await plugin_data(stub, session.id, "memory", "notes")) == {("notes", "seen"): True}
    assert reply.completed_job.id == job.id and reply.completed_job.status == "succeeded"
    assert from_struct(reply.completed_job.result) == {"runtimeStatus": "success"}
    [stored] = [found for found in await jobs_of(stub, session.id) if found.id == job.id]
    assert stored.status == "succeeded" and stored.HasField("finished_at")
    # The lease went with the commit: a player's turn takes it at once; the job's claim is over.
    player = await acquire(stub, session.id, wait_ms=0)
    assert player.HasField("lease")
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=player.lease.lease_id))
    await expect_error(grpc.StatusCode.ABORTED, stub.CompleteDetachedJob(
        store_pb2.CompleteDetachedJobRequest(job_id=job.id, lease_id=job.lease_id, status="succeeded")))
    # Sent again (its answer lost): the turn recorded under its key, nothing written twice.
    again = await stub.CommitTurn(job_request(session.id, job_turn(session.id, "job-a"), taking(job)))
    assert again.turn.id == reply.turn.id and not again.HasField("completed_job")
    assert (await stub.GetSession(store_pb2.GetSessionRequest(session_id=session.id))).session.recorded_turns == 2


async def test_a_busy_session_answers_session_busy_and_nothing_is_written(stub):
    session, job = await queued_job(stub)
    holding = (await acquire(stub, session.id, ttl_ms=30_000)).lease
    error = await expect_error(grpc.StatusCode.ABORTED, stub.CommitTurn(job_request(session.id, job_turn(session.id, "job-b"), taking(job))))
    assert error_info(error).reason == "SESSION_BUSY" and "has a turn running" in (error.details() or "")
    assert await plugin_data(stub, session.id, "memory", "notes") == {}
    [stored] = [found for found in await jobs_of(stub, session.id) if found.id == job.id]
    assert stored.status == "running", "the job stays the worker's until a commit ends it"
    # Waiting (job.wait_ms): it commits once the player's turn lets the session go.
    waiting = asyncio.ensure_future(stub.CommitTurn(job_request(session.id, job_turn(session.id, "job-b"), taking(job, wait_ms=20_000))))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=holding.lease_id))
    reply = await asyncio.wait_for(waiting, 30)
    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED and reply.completed_job.status == "succeeded"


async def test_a_player_waiting_for_the_session_goes_before_a_jobs_commit(stub):
    session, job = await queued_job(stub)
    holding = (await acquire(stub, session.id, origin="background", ttl_ms=30_000)).lease
    player = asyncio.create_task(acquire(stub, session.id, origin="player", wait_ms=20_000, ttl_ms=30_000))
    await asyncio.sleep(1.0)  # its first try found the lease held and marked the session
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=holding.lease_id))
    lease = (await asyncio.wait_for(player, 30)).lease
    error = await expect_error(grpc.StatusCode.ABORTED, stub.CommitTurn(job_request(session.id, job_turn(session.id, "job-c"), taking(job))))
    assert error_info(error).reason == "SESSION_BUSY"
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id))


async def test_the_job_is_left_to_its_worker_when_the_turn_does_not_commit_or_its_claim_lapsed(stub):
    session, job = await queued_job(stub)
    aborted = job_turn(session.id, "job-d", status=store_pb2.TURN_STATUS_ABORTED)
    aborted.abort_reason = "a hook aborted it"
    reply = await stub.CommitTurn(job_request(session.id, aborted, taking(job)))
    assert reply.turn.status == store_pb2.TURN_STATUS_ABORTED and not reply.HasField("completed_job")
    done = (await stub.CompleteDetachedJob(store_pb2.CompleteDetachedJobRequest(job_id=job.id, lease_id=job.lease_id, status="failed"))).job
    assert done.status == "failed"
    # A claim that lapsed: the turn commits, the job is not ended here (the worker's CompleteDetachedJob finds the lapse).
    await commit_turn(stub, session.id, detached_jobs=[spec("tidy")])
    short = await claim(stub, session.id, ttl_ms=200)
    assert short is not None
    await asyncio.sleep(0.5)
    reply = await stub.CommitTurn(job_request(session.id, job_turn(session.id, "job-e"), taking(short)))
    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED and not reply.HasField("completed_job")


async def test_a_jobs_commit_is_checked(stub):
    session, job = await queued_job(stub)
    turn = job_turn(session.id, "job-f")
    cases = [
        (store_pb2.CommitTurnRequest(session_id=session.id, turn=turn), "lease_id"),
        (job_request(session.id, turn, taking(), lease_id="some-lease"), "lease_id"),
        (job_request(session.id, turn, store_pb2.JobCommit(take_lease=True)), "job.holder"),
        (job_request(session.id, turn, taking(wait_ms=-1)), "job.wait_ms"),
        (job_request(session.id, turn, store_pb2.JobCommit(take_lease=True, holder="s", job_id=job.id)), "job.job_lease_id"),
    ]
    for request, field in cases:
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.CommitTurn(request))
        assert violated_fields(error) == [field], (field, error.details())
