"""The detached queue's total bound is hard (issue 43): turns that started together, each below the bound, add their
jobs at commit only while there is room; a job past it is recorded `dropped` with why, the turn commits whole, and an
operator may queue it again. On SQLite and PostgreSQL."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from shared.structs import from_struct
from tests.store.helpers import acquire, new_session, story_proposal, turn_for
from tests.store.test_detached_jobs import jobs_of, spec

STORE_SETTINGS = {"store_detached_max_per_session": 100, "store_detached_max_total": 3}


async def test_turns_that_started_together_cannot_push_the_queue_past_its_bound(stub):
    sessions = [await new_session(stub) for _ in range(2)]
    # Both take their lease while the queue is empty, as 32 sessions playing at once do.
    leases = [(await acquire(stub, session.id)).lease for session in sessions]
    turns = []
    for session, lease in zip(sessions, leases, strict=True):
        request = store_pb2.CommitTurnRequest(session_id=session.id, lease_id=lease.lease_id, turn=turn_for(lease),
                                              proposals=[story_proposal("The tide turns.")], release_lease=True,
                                              detached_jobs=[spec("summarize"), spec("index", plugin_id="codex")])
        turns.append((await stub.CommitTurn(request)).turn)
    assert [turn.status for turn in turns] == [store_pb2.TURN_STATUS_COMMITTED] * 2, "a full queue never fails a turn"
    first, second = [await jobs_of(stub, session.id) for session in sessions]
    assert [job.status for job in first] == ["queued", "queued"]
    statuses = sorted(job.status for job in second)
    assert statuses == ["dropped", "queued"], statuses
    [dropped] = [job for job in second if job.status == "dropped"]
    assert dropped.error == "not queued: the detached queue held 3 jobs, at most 3 (COVEL_STORE_DETACHED_MAX_TOTAL)"
    listed = await stub.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(statuses=["queued"]))
    assert len(listed.jobs) == 3, "the bound holds"
    recorded = (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=sessions[1].id, turn_id=turns[1].id))).turn
    assert any(from_struct(entry).get("code") == "detached.dropped" and from_struct(entry)["jobId"] == dropped.id
               for entry in recorded.trace), recorded.trace
    # An operator's choice: queued again.
    again = await stub.RequeueDetachedJob(store_pb2.RequeueDetachedJobRequest(job_id=dropped.id))
    assert again.job.status == "queued"
