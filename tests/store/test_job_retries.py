"""Passing failures of detached jobs (retried with a backoff, then parked, then requeued by an operator),
the queue's limits on new turns, the operator's view of the queue, and retryable failed turns."""

from __future__ import annotations

import asyncio

import grpc

from covel.store.v1 import store_pb2
from shared.errors import error_info, retry_after_ms
from tests.store.helpers import acquire, commit, commit_turn, expect_error, new_session, story_result, turn_for
from tests.store.test_detached_jobs import claim, jobs_of, spec

STORE_SETTINGS = {"store_detached_max_attempts": 2, "store_detached_retry_base_ms": 150, "store_detached_retry_max_ms": 150,
                  "store_detached_max_per_session": 3, "store_detached_max_total": 1_000}


async def retry(stub, job: store_pb2.DetachedJob, why: str) -> store_pb2.DetachedJob:
    return (await stub.CompleteDetachedJob(store_pb2.CompleteDetachedJobRequest(
        job_id=job.id, lease_id=job.lease_id, status="retry", error=why))).job


async def test_a_passing_failure_is_retried_after_a_backoff_then_parked_then_requeued(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, detached_jobs=[spec("extract")])
    first = await claim(stub, session.id)
    again = await retry(stub, first, "UNAVAILABLE: the gateway restarts")
    assert again.status == "queued" and again.attempts == 1 and "attempt 1 of 2 failed: UNAVAILABLE" in again.error
    # Not before its backoff.
    assert await claim(stub, session.id) is None
    await asyncio.sleep(0.2)
    second = await claim(stub, session.id)
    assert second.id == first.id and second.attempts == 2
    parked = await retry(stub, second, "UNAVAILABLE: still down")
    assert parked.status == "parked" and parked.error.startswith("parked after 2 attempts: UNAVAILABLE: still down")
    await asyncio.sleep(0.2)
    assert await claim(stub, session.id) is None
    listed = await stub.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(statuses=["parked"], page_size=500))
    assert first.id in {job.id for job in listed.jobs}

    requeued = (await stub.RequeueDetachedJob(store_pb2.RequeueDetachedJobRequest(job_id=first.id))).job
    assert (requeued.status, requeued.attempts) == ("queued", 0) and "queued again by an operator" in requeued.error
    third = await claim(stub, session.id)
    assert third.id == first.id and third.attempts == 1
    done = (await stub.CompleteDetachedJob(store_pb2.CompleteDetachedJobRequest(job_id=third.id, lease_id=third.lease_id,
                                                                                status="succeeded"))).job
    assert done.status == "succeeded"
    refused = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, stub.RequeueDetachedJob(
        store_pb2.RequeueDetachedJobRequest(job_id=first.id)))
    assert "is succeeded; only a job parked, failed, timed-out" in refused.details()


async def test_a_runtimes_later_job_waits_while_its_earlier_one_backs_off(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, detached_jobs=[spec("ordered")])
    await commit_turn(stub, session.id, detached_jobs=[spec("ordered")])
    earlier = await claim(stub, session.id)
    await retry(stub, earlier, "DEADLINE_EXCEEDED")
    assert await claim(stub, session.id) is None, "the later job would overtake the earlier one"
    await asyncio.sleep(0.2)
    assert (await claim(stub, session.id)).id == earlier.id


async def test_a_full_session_queue_holds_new_turns_back_with_retry_info(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, detached_jobs=[spec(f"job-{n}") for n in range(3)])
    refused = await expect_error(grpc.StatusCode.RESOURCE_EXHAUSTED, acquire(stub, session.id))
    assert "has 3 detached jobs queued or running (at most 3)" in refused.details()
    assert error_info(refused).reason == "DETACHED_QUEUE_FULL" and retry_after_ms(refused) == 2_000
    # The jobs' own executions and other sessions go on.
    assert (await acquire(stub, session.id, origin="background", ttl_ms=100)).HasField("lease")
    other = await new_session(stub)
    assert (await acquire(stub, other.id)).HasField("lease")
    # A waiting turn starts as soon as a job finishes.
    job = await claim(stub, session.id)
    waiting = asyncio.create_task(acquire(stub, session.id, wait_ms=5_000))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await stub.CompleteDetachedJob(store_pb2.CompleteDetachedJobRequest(job_id=job.id, lease_id=job.lease_id, status="succeeded"))
    assert (await asyncio.wait_for(waiting, 5)).HasField("lease")


async def test_a_busy_session_says_when_to_try_again(stub):
    session = await new_session(stub)
    await acquire(stub, session.id)
    busy = await expect_error(grpc.StatusCode.ABORTED, acquire(stub, session.id))
    assert error_info(busy).reason == "SESSION_BUSY" and retry_after_ms(busy) == 500


async def test_a_retryable_failed_turn_runs_again_under_its_key_and_a_domain_failure_answers_its_record(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id, idempotency_key="k-outage")).lease
    failed = turn_for(lease, status=store_pb2.TURN_STATUS_FAILED, abort_reason="story runtime narrator failed: model call failed: UNAVAILABLE",
                      runtime_results=[story_result()], retryable=True, idempotency_key="k-outage")
    recorded = (await commit(stub, lease, failed, [])).turn
    assert recorded.retryable and recorded.idempotency_key == "k-outage"
    again = await acquire(stub, session.id, idempotency_key="k-outage")
    assert again.HasField("lease"), "a retryable failure does not answer the retry"
    retried = (await commit(stub, again.lease, turn_for(again.lease, runtime_results=[story_result()], idempotency_key="k-outage"), [])).turn
    assert retried.idempotency_key == "k-outage" and retried.id != recorded.id
    kept = (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session.id, turn_id=recorded.id))).turn
    assert kept.status == store_pb2.TURN_STATUS_FAILED and kept.retryable and kept.idempotency_key == ""
    assert (await acquire(stub, session.id, idempotency_key="k-outage")).existing_turn.id == retried.id

    lease = (await acquire(stub, session.id, idempotency_key="k-domain")).lease
    domain = turn_for(lease, status=store_pb2.TURN_STATUS_FAILED, abort_reason="story runtime narrator failed: output-schema-invalid",
                      runtime_results=[story_result()], idempotency_key="k-domain")
    recorded = (await commit(stub, lease, domain, [])).turn
    assert not recorded.retryable
    assert (await acquire(stub, session.id, idempotency_key="k-domain")).existing_turn.id == recorded.id
    # A committed turn may be retryable too (a detached job's whose runtime failed after an outage): it runs again.
    lease = (await acquire(stub, session.id, idempotency_key="k-job")).lease
    job_turn = turn_for(lease, runtime_results=[story_result()], retryable=True, idempotency_key="k-job", origin="background")
    assert (await commit(stub, lease, job_turn, [])).turn.retryable
    assert (await acquire(stub, session.id, idempotency_key="k-job", origin="background")).HasField("lease")


async def test_the_queue_pages_across_sessions_by_status(stub):
    sessions = [await new_session(stub) for _ in range(3)]
    for session in sessions:
        await commit_turn(stub, session.id, detached_jobs=[spec("paged")])
    ids: list[str] = []
    token = ""
    while True:
        page = await stub.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(statuses=["queued"], page_size=1, page_token=token))
        ids.extend(job.id for job in page.jobs)
        token = page.next_page_token
        if not token:
            break
    mine = {job.id for session in sessions for job in await jobs_of(stub, session.id)}
    assert mine <= set(ids) and len(ids) == len(set(ids))
    bad = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(page_token="nope")))
    assert "page_token" in bad.details()
    bad = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(page_size=501)))
    assert "page_size" in bad.details()


async def test_a_coalescing_runtimes_new_job_supersedes_its_queued_ones_not_a_running_one(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, detached_jobs=[spec("latest", coalesce=True)])
    running = await claim(stub, session.id)
    await commit_turn(stub, session.id, detached_jobs=[spec("latest", coalesce=True)])
    third = await commit_turn(stub, session.id, detached_jobs=[spec("latest", coalesce=True), spec("every")])
    newest = next(job for job in third.enqueued_jobs if job.runtime_id == "latest")
    jobs = await jobs_of(stub, session.id)
    latest = [(job.status, job.id) for job in jobs if job.runtime_id == "latest"]
    assert [status for status, _ in latest] == ["running", "superseded", "queued"]
    assert (latest[0][1], latest[2][1]) == (running.id, newest.id)
    superseded = next(job for job in jobs if job.status == "superseded")
    assert f"superseded by job {newest.id}" in superseded.error
    assert [job.status for job in jobs if job.runtime_id == "every"] == ["queued"], "a runtime without coalesce is untouched"
