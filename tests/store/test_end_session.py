"""Ending and deleting sessions, on both backends."""

from __future__ import annotations

import grpc

from covel.store.v1 import store_pb2
from tests.store.helpers import acquire, commit_turn, expect_error, new_session, play_turn, violated_fields


async def test_end_keeps_the_record_and_stops_turns(stub):
    session = await new_session(stub)
    await play_turn(stub, session.id, "The tide comes in.")
    ended = await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id, reason="ended"))
    assert ended.changed and ended.session.status == store_pb2.SESSION_STATUS_ENDED
    again = await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id))
    assert not again.changed
    messages = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages
    assert [m.role for m in messages] == ["player", "story"]
    await expect_error(grpc.StatusCode.FAILED_PRECONDITION, stub.AcquireTurnLease(
        store_pb2.AcquireTurnLeaseRequest(session_id=session.id, holder="t", ttl_ms=1000)))


async def test_delete_removes_everything(stub):
    session = await new_session(stub)
    await play_turn(stub, session.id, "The tide goes out.")
    deleted = await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id, reason="deleted"))
    assert deleted.changed and not deleted.HasField("session")
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.GetSession(store_pb2.GetSessionRequest(session_id=session.id)))
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id)))


async def test_a_running_turn_blocks_ending_and_bad_reasons_name_the_field(stub):
    session = await new_session(stub)
    await acquire(stub, session.id, ttl_ms=60000)
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id)))
    assert "turn running" in error.details()
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                               stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id, reason="paused")))
    assert violated_fields(error) == ["reason"]


async def test_a_detached_job_holding_the_lease_does_not_keep_the_session_open(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, detached_jobs=[
        store_pb2.DetachedJobSpec(plugin_id="memory", runtime_id="summarize"),
        store_pb2.DetachedJobSpec(plugin_id="memory", runtime_id="index")])
    claimed = (await stub.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(
        holder="worker", lease_ttl_ms=60_000, session_id=session.id))).job
    lease = (await acquire(stub, session.id, ttl_ms=60_000, idempotency_key=f"detached:{claimed.id}", origin="background")).lease
    ended = await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id))
    assert ended.changed and ended.session.status == store_pb2.SESSION_STATUS_ENDED
    jobs = (await stub.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session.id))).jobs
    assert {(job.status, job.error) for job in jobs} == {("cancelled", "the session ended")}
    # The job's execution commits nothing now: its turn lease and its job lease are gone.
    await expect_error(grpc.StatusCode.ABORTED, stub.RenewTurnLease(
        store_pb2.RenewTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id, ttl_ms=1000)))
    await expect_error(grpc.StatusCode.ABORTED, stub.RenewDetachedJob(
        store_pb2.RenewDetachedJobRequest(job_id=claimed.id, lease_id=claimed.lease_id, lease_ttl_ms=1000)))


async def test_a_client_key_that_looks_like_a_job_still_blocks_ending(stub):
    session = await new_session(stub)
    await acquire(stub, session.id, ttl_ms=60_000, idempotency_key="detached:not-a-job")
    await expect_error(grpc.StatusCode.FAILED_PRECONDITION, stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id)))
