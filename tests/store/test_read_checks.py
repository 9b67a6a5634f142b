"""A detached job off the session's lease (issue 39): its snapshot without the lease, the lease taken for its commit
only (for the turn it ran), the commit's read checks (READ_CONFLICT when a player's commit changed what it read), and
the idle worker's claim that waits in the store until a commit queues a job."""

from __future__ import annotations

import asyncio

import grpc

from covel.store.v1 import store_pb2
from services.store import job_claims
from shared.errors import error_info
from shared.ids import new_id
from tests.store.helpers import (
    acquire,
    commit_turn,
    data_proposal,
    expect_error,
    new_session,
    plugin_data,
    proposal,
    turn_for,
    violated_fields,
)

READS = store_pb2.TurnReads(world=True, plugin_data=[store_pb2.PluginDataScope(plugin_id="memory", namespace="facts")])


async def snapshot(stub, session_id: str, key: str = "") -> store_pb2.AcquireTurnLeaseResponse:
    return await acquire(stub, session_id, origin="background", without_lease=True, reads=READS, idempotency_key=key)


def checks_of(read: store_pb2.AcquireTurnLeaseResponse) -> store_pb2.ReadChecks:
    return store_pb2.ReadChecks(world_revision=read.world.revision, plugin_data=[
        store_pb2.PluginDataRevision(scope=scoped.scope, revision=scoped.revision) for scoped in read.plugin_data])


async def job_commit(stub, session_id: str, checks: store_pb2.ReadChecks, key: str = "",
                     taken: list[store_pb2.TurnLease] | None = None) -> store_pb2.CommitTurnResponse:
    """The job's commit: the lease for the turn it ran (added to `taken`), then CommitTurn with what it read."""
    turn_id = new_id()
    lease = (await acquire(stub, session_id, origin="background", turn_id=turn_id, idempotency_key=key)).lease
    if taken is not None:
        taken.append(lease)
    assert lease.turn_id == turn_id, "the lease runs the turn the job ran"
    turn = turn_for(lease, origin="background", player_message="", actions=[], idempotency_key=key)
    return await stub.CommitTurn(store_pb2.CommitTurnRequest(
        session_id=session_id, lease_id=lease.lease_id, turn=turn, proposals=[data_proposal("notes", "seen", True, runtime_id="extract")],
        release_lease=True, read_checks=checks))


async def test_a_snapshot_takes_no_lease_and_its_revisions_match_the_reads(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, [data_proposal("facts", "sky", "blue")])
    read = await snapshot(stub, session.id)
    assert read.WhichOneof("result") is None and read.session.id == session.id
    assert read.world.revision and read.plugin_data[0].revision
    listed = await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id="memory", namespace="facts"))
    assert listed.revision == read.plugin_data[0].revision, "a scope read either way has one revision"
    assert (await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))).revision == read.world.revision
    # No lease was taken: a player's turn takes it at once.
    player = await acquire(stub, session.id, wait_ms=0)
    assert player.HasField("lease")
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=player.lease.lease_id))


async def test_a_job_commits_when_what_it_read_is_unchanged(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, [data_proposal("facts", "sky", "blue")])
    read = await snapshot(stub, session.id, key="job-1")
    # A player's turn that writes elsewhere does not conflict.
    await commit_turn(stub, session.id, [data_proposal("other", "x", 1)])
    committed = await job_commit(stub, session.id, checks_of(read), key="job-1")
    assert committed.turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert committed.turn.logical_turn == 2, "the job's logical turn is its commit's"
    assert (await plugin_data(stub, session.id, "memory", "notes")) == {("notes", "seen"): True}
    again = await snapshot(stub, session.id, key="job-1")
    assert again.existing_turn.id == committed.turn.id, "a job run again after its commit answers with its turn"


async def test_a_player_commit_to_what_a_job_read_refuses_the_job_commit(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, [data_proposal("facts", "sky", "blue")])
    read = await snapshot(stub, session.id)
    await commit_turn(stub, session.id, [data_proposal("facts", "sky", "grey")])
    taken: list[store_pb2.TurnLease] = []
    error = await expect_error(grpc.StatusCode.ABORTED, job_commit(stub, session.id, checks_of(read), taken=taken))
    assert error_info(error).reason == "READ_CONFLICT" and "plugin data memory/facts" in error.details()
    assert (await plugin_data(stub, session.id, "memory", "notes")) == {}, "nothing of the job was written"
    turns = (await stub.ListTurns(store_pb2.ListTurnsRequest(session_id=session.id))).turns
    assert [turn.origin for turn in turns] == ["player", "player"]
    # Its lease is still the job's (the worker releases it and runs the job again on the new state).
    assert (await stub.GetRunningTurn(store_pb2.GetRunningTurnRequest(session_id=session.id))).turn_id == taken[0].turn_id
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=taken[0].lease_id))
    rerun = await snapshot(stub, session.id)
    assert (await job_commit(stub, session.id, checks_of(rerun))).turn.status == store_pb2.TURN_STATUS_COMMITTED


async def test_a_deleted_entry_and_a_changed_character_are_conflicts_too(stub):
    session = await new_session(stub)
    cast = proposal("character.upsert", {"characterId": "aya", "expectedVersion": 0, "character": {"type": "npc", "name": "Aya"}},
                    plugin_id="cast", runtime_id="cast")
    await commit_turn(stub, session.id, [cast, data_proposal("facts", "sky", "blue")])
    read = await snapshot(stub, session.id)
    renamed = proposal("character.upsert", {"characterId": "aya", "expectedVersion": 1, "character": {"type": "npc", "name": "Aya II"}},
                       plugin_id="cast", runtime_id="cast")
    await commit_turn(stub, session.id, [renamed])
    taken: list[store_pb2.TurnLease] = []
    world_only = store_pb2.ReadChecks(world_revision=read.world.revision)
    error = await expect_error(grpc.StatusCode.ABORTED, job_commit(stub, session.id, world_only, taken=taken))
    assert error_info(error).reason == "READ_CONFLICT" and "characters" in error.details()
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=taken[0].lease_id))

    read = await snapshot(stub, session.id)
    await commit_turn(stub, session.id, [proposal("plugin.data.delete", {"namespace": "facts", "key": "sky"})])
    scope_only = store_pb2.ReadChecks(plugin_data=checks_of(read).plugin_data)
    error = await expect_error(grpc.StatusCode.ABORTED, job_commit(stub, session.id, scope_only))
    assert error_info(error).reason == "READ_CONFLICT"


async def test_off_lease_requests_say_what_is_wrong(stub):
    session = await new_session(stub)
    for fields, field in (({"without_lease": True}, "without_lease"), ({"turn_id": new_id()}, "turn_id")):
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, acquire(stub, session.id, origin="player", **fields))
        assert violated_fields(error) == [field]
    lease = (await acquire(stub, session.id, origin="background")).lease
    bad = store_pb2.ReadChecks(plugin_data=[store_pb2.PluginDataRevision(scope=store_pb2.PluginDataScope(plugin_id="memory"))])
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.CommitTurn(store_pb2.CommitTurnRequest(
        session_id=session.id, lease_id=lease.lease_id, turn=turn_for(lease, origin="background"), read_checks=bad)))
    assert violated_fields(error) == ["read_checks.plugin_data[0].revision"]
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(wait_ms=60_000)))
    assert violated_fields(error) == ["wait_ms"]
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id))


async def test_an_idle_claim_waits_in_the_store_until_a_commit_queues_a_job(stub, monkeypatch):
    # Its own looks so far apart that only the commit's wakeup can answer it within the wait.
    monkeypatch.setattr(job_claims, "CLAIM_LOOK_S", 120.0)
    session = await new_session(stub)
    claim = asyncio.ensure_future(stub.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(holder="w", session_id=session.id, wait_ms=20_000)))
    await asyncio.sleep(0.2)
    assert not claim.done(), "nothing is queued: the claim waits"
    queued = (await commit_turn(stub, session.id, detached_jobs=[store_pb2.DetachedJobSpec(plugin_id="memory", runtime_id="extract")])).enqueued_jobs
    reply = await asyncio.wait_for(claim, 15)
    assert reply.job.id == queued[0].id and reply.job.status == "running"
    empty = await stub.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(holder="w", session_id=session.id, wait_ms=50))
    assert not empty.HasField("job"), "a wait with nothing queued answers empty at its end"
