"""Detached jobs: enqueue with the turn, claim with a lease, renew, complete, time out, retry a lapsed lease."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import grpc

from covel.store.v1 import store_pb2
from shared.structs import from_struct, to_struct
from tests.store.helpers import acquire, commit, commit_turn, expect_error, new_session, story_proposal, story_result, turn_for


def spec(runtime_id: str = "summarize", plugin_id: str = "memory", **fields) -> store_pb2.DetachedJobSpec:
    fields.setdefault("input", to_struct({"turn": "snapshot"}))
    return store_pb2.DetachedJobSpec(plugin_id=plugin_id, runtime_id=runtime_id, **fields)


async def jobs_of(stub, session_id: str) -> list[store_pb2.DetachedJob]:
    return list((await stub.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session_id))).jobs)


async def claim(stub, session_id: str, ttl_ms: int = 10_000, holder: str = "worker-1") -> store_pb2.DetachedJob | None:
    reply = await stub.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(holder=holder, lease_ttl_ms=ttl_ms, session_id=session_id))
    return reply.job if reply.HasField("job") else None


async def test_enqueue_claim_renew_complete(stub):
    session = await new_session(stub)
    reply = await commit_turn(stub, session.id, detached_jobs=[spec(settle=True, max_queue_ms=60_000)])
    [queued] = reply.enqueued_jobs
    assert (queued.status, queued.turn_id, queued.settle, queued.max_queue_ms, queued.max_execution_ms) == (
        "queued", reply.turn.id, True, 60_000, 300_000)
    job = await claim(stub, session.id)
    assert job is not None and (job.id, job.status, job.holder, job.attempts) == (queued.id, "running", "worker-1", 1)
    assert from_struct(job.input) == {"turn": "snapshot"}
    assert await claim(stub, session.id) is None  # nothing else queued
    renewed = (await stub.RenewDetachedJob(store_pb2.RenewDetachedJobRequest(job_id=job.id, lease_id=job.lease_id, lease_ttl_ms=20_000))).job
    assert renewed.lease_deadline.ToDatetime() > job.lease_deadline.ToDatetime()
    done = (await stub.CompleteDetachedJob(store_pb2.CompleteDetachedJobRequest(
        job_id=job.id, lease_id=job.lease_id, status="succeeded", result=to_struct({"summary": "ok"})))).job
    assert done.status == "succeeded" and from_struct(done.result) == {"summary": "ok"} and done.HasField("finished_at")
    await expect_error(grpc.StatusCode.ABORTED, stub.CompleteDetachedJob(
        store_pb2.CompleteDetachedJobRequest(job_id=job.id, lease_id=job.lease_id, status="succeeded")))
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.RenewDetachedJob(
        store_pb2.RenewDetachedJobRequest(job_id="00000000-0000-0000-0000-000000000000", lease_id="x")))
    await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.CompleteDetachedJob(
        store_pb2.CompleteDetachedJobRequest(job_id=job.id, lease_id=job.lease_id, status="maybe")))


async def test_a_turn_that_does_not_commit_enqueues_nothing(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    bad_story = story_proposal("")  # rejected: the story unit fails the turn
    request = store_pb2.CommitTurnRequest(
        session_id=session.id, lease_id=lease.lease_id, turn=turn_for(lease, runtime_results=[story_result()]),
        proposals=[bad_story], release_lease=True, detached_jobs=[spec()],
    )
    reply = await stub.CommitTurn(request)
    assert reply.turn.status == store_pb2.TURN_STATUS_FAILED and not reply.enqueued_jobs
    lease = (await acquire(stub, session.id)).lease
    aborted_turn = await commit(stub, lease, turn_for(lease, status=store_pb2.TURN_STATUS_ABORTED, abort_reason="blocked"))
    assert not aborted_turn.enqueued_jobs and await jobs_of(stub, session.id) == []


async def test_every_turns_job_runs_one_at_a_time_per_runtime(stub):
    session = await new_session(stub)
    first = (await commit_turn(stub, session.id, detached_jobs=[spec(), spec("audit")])).enqueued_jobs
    second = (await commit_turn(stub, session.id, detached_jobs=[spec()])).enqueued_jobs
    statuses = {(job.runtime_id, job.id): job.status for job in await jobs_of(stub, session.id)}
    assert statuses[("summarize", first[0].id)] == "queued" and statuses[("summarize", second[0].id)] == "queued"
    # The first claims take the oldest summarize job and the audit job; the second summarize job
    # waits while the first runs.
    claimed = [await claim(stub, session.id), await claim(stub, session.id)]
    assert {(job.runtime_id, job.id) for job in claimed} == {("summarize", first[0].id), ("audit", first[1].id)}
    assert await claim(stub, session.id) is None
    running = next(job for job in claimed if job.runtime_id == "summarize")
    await stub.CompleteDetachedJob(store_pb2.CompleteDetachedJobRequest(job_id=running.id, lease_id=running.lease_id, status="succeeded"))
    assert (await claim(stub, session.id)).id == second[0].id


async def test_queue_and_execution_timeouts_and_orphans(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, detached_jobs=[spec("late", max_queue_ms=20)])
    await asyncio.sleep(0.05)
    assert await claim(stub, session.id) is None
    [late] = await jobs_of(stub, session.id)
    assert late.status == "timed-out" and "maxQueueMs" in late.error

    await commit_turn(stub, session.id, detached_jobs=[spec("orphan")])
    orphan = await claim(stub, session.id, ttl_ms=30)
    await commit_turn(stub, session.id, detached_jobs=[spec("slow", max_execution_ms=50)])
    slow = await claim(stub, session.id, ttl_ms=10_000)
    assert (orphan.runtime_id, slow.runtime_id) == ("orphan", "slow")
    # The lease never outlives the execution deadline.
    assert slow.lease_deadline.ToDatetime() <= slow.claimed_at.ToDatetime() + timedelta(milliseconds=50)
    await asyncio.sleep(0.08)
    # Its worker stopped renewing (died): the job is queued again after a backoff, not lost (by the renewal
    # that came too late, or already by the sweep of the claim before it).
    error = await expect_error(grpc.StatusCode.ABORTED, stub.RenewDetachedJob(
        store_pb2.RenewDetachedJobRequest(job_id=orphan.id, lease_id=orphan.lease_id)))
    assert "queued" in error.details() and orphan.id in error.details()
    error = await expect_error(grpc.StatusCode.ABORTED, stub.CompleteDetachedJob(
        store_pb2.CompleteDetachedJobRequest(job_id=slow.id, lease_id=slow.lease_id, status="succeeded")))
    assert "maxExecutionMs" in error.details()
    jobs = {job.runtime_id: job for job in await jobs_of(stub, session.id)}
    assert {runtime: job.status for runtime, job in jobs.items()} == {"late": "timed-out", "orphan": "queued", "slow": "timed-out"}
    assert jobs["orphan"].HasField("not_before") and jobs["orphan"].attempts == 1
    assert jobs["orphan"].error.startswith("attempt 1 of 5 failed:") and "lease" in jobs["orphan"].error
    # The slow runtime is free again: a new job can be enqueued.
    assert len((await commit_turn(stub, session.id, detached_jobs=[spec("slow")])).enqueued_jobs) == 1


async def test_concurrent_workers_never_claim_the_same_job(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, detached_jobs=[spec(f"job-{number}") for number in range(6)])
    claimed = await asyncio.gather(*(claim(stub, session.id, holder=f"w{number}") for number in range(8)))
    ids = [job.id for job in claimed if job is not None]
    assert len(ids) == 6 and len(set(ids)) == 6


async def test_a_player_waiting_for_the_lease_goes_before_the_sessions_queued_jobs(stub):
    """After a kill a replica may find a backlog of a session's detached work: a player's turn waiting for the lease
    goes first; the session's jobs are not claimed, nor take the lease, while it waits."""
    session = await new_session(stub)
    await commit_turn(stub, session.id, detached_jobs=[spec("first"), spec("second")])
    holding = (await acquire(stub, session.id, origin="background", ttl_ms=30_000)).lease
    player = asyncio.create_task(acquire(stub, session.id, origin="player", wait_ms=20_000, ttl_ms=30_000))
    await asyncio.sleep(1.0)  # its first try (at once) found the lease held and marked the session
    assert await claim(stub, session.id) is None, "no job of the session is claimed while its player waits"
    assert not player.done()
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=holding.lease_id))
    lease = (await asyncio.wait_for(player, 30)).lease
    assert lease.lease_id, "the player's turn took the lease"
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id))
    job = await claim(stub, session.id)
    assert job is not None and job.runtime_id in ("first", "second"), "once the player's turn is done, its jobs run again"
