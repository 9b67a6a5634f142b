"""CommitTurn: one transaction per turn, per status, with leases and idempotency."""

from __future__ import annotations

import asyncio

import grpc

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from shared.structs import from_struct, from_value
from tests.store.helpers import (
    acquire,
    commit,
    data_proposal,
    expect_error,
    new_session,
    play_turn,
    story_proposal,
    story_result,
    turn_for,
    violated_fields,
)

COMMITTED = store_pb2.PROPOSAL_STATUS_COMMITTED
REJECTED = store_pb2.PROPOSAL_STATUS_REJECTED
DISCARDED = store_pb2.PROPOSAL_STATUS_DISCARDED


async def messages_of(stub, session_id: str) -> list[common_pb2.Message]:
    return list((await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session_id))).messages)


async def test_commit_appends_player_and_story_messages_with_contiguous_seq(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    segments = [{"kind": "narration", "text": "Rain."}, {"kind": "dialogue", "speaker": "Mara", "text": "Come in."}]
    proposal = story_proposal("Rain.\n\nCome in.", segments=segments, cues=["rain"], **{"yield": "player"})
    turn = turn_for(
        lease,
        player_message="I knock.",
        runtime_results=[story_result()],
        hook_trace=[common_pb2.HookTraceEntry(event="TurnStart", handler_plugin_id="framework", status="ok", duration_us=12)],
        idempotency_key="knock-1",
    )
    turn.started_at.GetCurrentTime()
    reply = await commit(stub, lease, turn, [proposal])

    recorded = reply.turn
    assert recorded.status == store_pb2.TURN_STATUS_COMMITTED
    assert recorded.logical_turn == 1 and recorded.origin == "player" and recorded.idempotency_key == "knock-1"
    assert recorded.narrative == "Rain.\n\nCome in."
    assert [(m.seq, m.role, m.text) for m in recorded.messages] == [(1, "player", "I knock."), (2, "story", "Rain.\n\nCome in.")]
    story = recorded.messages[1]
    assert (story.plugin_id, story.runtime_id, story.turn_id) == ("story-plugin", "narrator", recorded.id)
    assert from_struct(story.metadata) == {"segments": segments, "cues": ["rain"], "yield": "player"}
    assert [(o.proposal_id, o.status) for o in recorded.proposal_outcomes] == [(proposal.id, COMMITTED)]
    assert recorded.hook_trace[0].duration_us == 12 and recorded.actions[0].text == "I knock."
    assert recorded.started_at == turn.started_at and recorded.finished_at.seconds > 0
    assert reply.session.completed_player_turns == 1 and reply.session.player_messages == 1

    # The lease was released; the next turn continues the numbering.
    second = (await play_turn(stub, session.id, "The hall is dark.")).turn
    assert [m.seq for m in second.messages] == [3, 4] and second.logical_turn == 2
    assert [m.seq for m in await messages_of(stub, session.id)] == [1, 2, 3, 4]
    assert (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session.id, turn_id=recorded.id))).turn == recorded
    turns = (await stub.ListTurns(store_pb2.ListTurnsRequest(session_id=session.id))).turns
    assert [t.id for t in turns] == [recorded.id, second.id] and turns[0] == recorded


async def test_aborted_turn_records_only_the_turn(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    proposal = story_proposal("never told")
    turn = turn_for(lease, status=store_pb2.TURN_STATUS_ABORTED, abort_reason="TurnStart guard: no swearing")
    reply = await commit(stub, lease, turn, [proposal])
    assert reply.turn.status == store_pb2.TURN_STATUS_ABORTED and reply.turn.abort_reason == "TurnStart guard: no swearing"
    assert list(reply.turn.messages) == [] and await messages_of(stub, session.id) == []
    assert [(o.status, o.reason) for o in reply.turn.proposal_outcomes] == [(DISCARDED, "the turn was aborted")]
    assert reply.session.completed_player_turns == 0
    # The lease is free and the logical turn did not advance.
    assert (await acquire(stub, session.id)).lease.logical_turn == 1


async def test_failed_turn_records_only_the_turn(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    turn = turn_for(lease, status=store_pb2.TURN_STATUS_FAILED, abort_reason="story runtime narrator failed")
    reply = await commit(stub, lease, turn, [data_proposal("notes", "k", 1)])
    assert reply.turn.status == store_pb2.TURN_STATUS_FAILED and list(reply.turn.messages) == []
    assert reply.turn.proposal_outcomes[0].status == DISCARDED
    entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries
    assert list(entries) == []


async def test_lost_lease_is_aborted_and_writes_nothing(stub):
    session = await new_session(stub)
    old = (await acquire(stub, session.id, holder="slow", ttl_ms=100)).lease
    await asyncio.sleep(0.2)
    new = (await acquire(stub, session.id, holder="fresh")).lease
    error = await expect_error(
        grpc.StatusCode.ABORTED,
        commit(stub, old, turn_for(old, runtime_results=[story_result()]), [story_proposal("late"), data_proposal("n", "k", 1)]),
    )
    assert "turn lease lost" in error.details() and "nothing was written" in error.details()
    assert await messages_of(stub, session.id) == []
    assert list((await stub.ListTurns(store_pb2.ListTurnsRequest(session_id=session.id))).turns) == []
    assert list((await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries) == []
    # The new holder is unaffected and commits normally.
    reply = await commit(stub, new, turn_for(new, runtime_results=[story_result()]), [story_proposal("on time")])
    assert [m.seq for m in reply.turn.messages] == [1, 2]


async def test_released_lease_cannot_commit(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id))
    error = await expect_error(grpc.StatusCode.ABORTED, commit(stub, lease, turn_for(lease)))
    assert "released" in error.details()


async def test_rejected_story_proposal_fails_the_turn_and_rolls_back_everything(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    memory = data_proposal("notes", "seen", True)
    good = story_proposal("The first half.")
    bad = story_proposal("", plugin_id="story-plugin")  # empty story: rejected
    bad.type = "narrative.explode"
    turn = turn_for(lease, runtime_results=[story_result(), store_pb2.RuntimeResult(runtime_id="recorder", status="success")])
    reply = await commit(stub, lease, turn, [memory, good, bad])

    assert reply.turn.status == store_pb2.TURN_STATUS_FAILED
    assert "narrator" in reply.turn.abort_reason and "narrative.explode" in reply.turn.abort_reason
    assert list(reply.turn.messages) == [] and await messages_of(stub, session.id) == []
    outcomes = {o.proposal_id: o for o in reply.turn.proposal_outcomes}
    assert outcomes[bad.id].status == REJECTED and "unknown proposal type 'narrative.explode'" in outcomes[bad.id].reason
    assert outcomes[good.id].status == DISCARDED and outcomes[memory.id].status == DISCARDED
    assert list((await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries) == []
    assert reply.session.completed_player_turns == 0
    # Numbering continues from where the log really is.
    assert [m.seq for m in (await play_turn(stub, session.id, "again")).turn.messages] == [1, 2]


async def test_rejected_non_story_proposal_discards_only_its_unit(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    kept = data_proposal("notes", "mood", "calm", plugin_id="memory", runtime_id="recorder")
    doomed = data_proposal("notes", "mood2", "tense", plugin_id="tracker", runtime_id="tracker")
    hidden = data_proposal("_kernel", "x", 1, plugin_id="tracker", runtime_id="tracker")
    story = story_proposal("All is calm.")
    turn = turn_for(lease, runtime_results=[story_result()])
    reply = await commit(stub, lease, turn, [kept, doomed, hidden, story])

    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert [m.text for m in reply.turn.messages] == ["I open the door.", "All is calm."]
    outcomes = {o.proposal_id: o for o in reply.turn.proposal_outcomes}
    assert [o.proposal_id for o in reply.turn.proposal_outcomes] == [kept.id, doomed.id, hidden.id, story.id]
    assert outcomes[kept.id].status == COMMITTED and outcomes[story.id].status == COMMITTED
    assert outcomes[hidden.id].status == REJECTED and "reserved" in outcomes[hidden.id].reason
    assert outcomes[doomed.id].status == DISCARDED and "tracker" in outcomes[doomed.id].reason
    entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries
    assert [(e.plugin_id, e.key, from_value(e.value)) for e in entries] == [("memory", "mood", "calm")]


async def test_a_veto_decided_before_the_store_rejects_its_whole_unit(stub):
    """A proposal sent with a REJECTED outcome (a PreStateCommit abort) is rejected like a write the
    store refused: its unit rolls back, whatever read it is discarded, the other units commit."""
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    first = data_proposal("notes", "a", 1, plugin_id="tracker", runtime_id="tracker")
    vetoed = data_proposal("notes", "b", 2, plugin_id="tracker", runtime_id="tracker")
    reader = data_proposal("seen", "a", 1, plugin_id="tracker", runtime_id="reader")
    kept = data_proposal("notes", "mood", "calm", plugin_id="memory", runtime_id="recorder")
    story = story_proposal("All is calm.")
    turn = turn_for(lease, runtime_results=[story_result()], proposal_outcomes=[store_pb2.ProposalOutcome(
        proposal_id=vetoed.id, status=REJECTED, reason="PreStateCommit hook of judge aborted it: no", code="hook-aborted")])
    reply = await stub.CommitTurn(store_pb2.CommitTurnRequest(
        session_id=lease.session_id, lease_id=lease.lease_id, turn=turn, proposals=[first, vetoed, reader, kept, story],
        release_lease=True, dependencies=[store_pb2.UnitDependencies(unit_runtime_id="reader", read_from=["tracker"])]))

    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED
    outcomes = {o.proposal_id: o for o in reply.turn.proposal_outcomes}
    assert len(reply.turn.proposal_outcomes) == 5, "one outcome per proposal: the veto is not listed twice"
    assert (outcomes[vetoed.id].status, outcomes[vetoed.id].code) == (REJECTED, "hook-aborted")
    assert outcomes[vetoed.id].reason == "PreStateCommit hook of judge aborted it: no"
    assert (outcomes[first.id].status, outcomes[first.id].code) == (DISCARDED, "unit-rolled-back")
    assert (outcomes[reader.id].status, outcomes[reader.id].reason) == (DISCARDED, "read data of tracker that did not commit")
    assert outcomes[kept.id].status == COMMITTED and outcomes[story.id].status == COMMITTED
    entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries
    assert [(e.plugin_id, e.key) for e in entries] == [("memory", "mood")]


async def test_a_veto_of_a_story_write_rolls_the_turn_back(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    memory = data_proposal("notes", "seen", True)
    story = story_proposal("All is calm.")
    turn = turn_for(lease, runtime_results=[story_result()], proposal_outcomes=[store_pb2.ProposalOutcome(
        proposal_id=story.id, status=REJECTED, reason="PreStateCommit hook of judge aborted it: no", code="hook-aborted")])
    reply = await commit(stub, lease, turn, [memory, story])

    assert reply.turn.status == store_pb2.TURN_STATUS_FAILED
    assert reply.turn.abort_reason == (
        f"story runtime narrator: proposal {story.id} (narrative.append) was rejected: PreStateCommit hook of judge aborted it: no")
    outcomes = {o.proposal_id: o for o in reply.turn.proposal_outcomes}
    assert outcomes[story.id].status == REJECTED and outcomes[memory.id].code == "turn-rolled-back"
    assert await messages_of(stub, session.id) == []
    assert list((await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries) == []


async def test_plugin_data_upserts_per_plugin_namespace_and_key(stub):
    session = await new_session(stub)
    first = (await acquire(stub, session.id)).lease
    await commit(
        stub,
        first,
        turn_for(first),
        [
            data_proposal("notes", "count", 1),
            data_proposal("notes", "profile", {"name": "Mara", "tags": ["guard"]}),
            data_proposal("notes", "count", 1, plugin_id="other"),
        ],
    )
    second = (await acquire(stub, session.id)).lease
    reply = await commit(stub, second, turn_for(second), [data_proposal("notes", "count", 2)])
    assert reply.turn.proposal_outcomes[0].status == COMMITTED

    listed = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries
    assert [(e.plugin_id, e.namespace, e.key, from_value(e.value)) for e in listed] == [
        ("memory", "notes", "count", 2),
        ("memory", "notes", "profile", {"name": "Mara", "tags": ["guard"]}),
        ("other", "notes", "count", 1),
    ]
    count = listed[0]
    assert count.turn_id == second.turn_id and count.updated_at.ToNanoseconds() >= count.created_at.ToNanoseconds()
    narrowed = await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id="other"))
    assert [e.plugin_id for e in narrowed.entries] == ["other"]


async def test_commit_retried_returns_the_recorded_turn(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id, idempotency_key="once")).lease
    turn = turn_for(lease, idempotency_key="once", runtime_results=[story_result()])
    proposal = story_proposal("Told once.")
    first = await commit(stub, lease, turn, [proposal])
    again = await commit(stub, lease, turn, [proposal])
    assert again.turn == first.turn
    assert len(await messages_of(stub, session.id)) == 2
    assert again.session.completed_player_turns == 1


async def test_duplicate_idempotency_key_returns_the_existing_turn(stub):
    session = await new_session(stub)
    first = (await play_turn(stub, session.id, "First.", idempotency_key="dup")).turn
    lease = (await acquire(stub, session.id)).lease
    reply = await commit(stub, lease, turn_for(lease, idempotency_key="dup"), [story_proposal("Second.")])
    assert reply.turn == first
    assert [m.text for m in await messages_of(stub, session.id)] == ["I look around.", "First."]
    # The lease was released as asked.
    assert (await acquire(stub, session.id)).HasField("lease")


async def test_non_player_turns_do_not_count(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    reply = await commit(
        stub, lease, turn_for(lease, origin="continuation", player_message=""), [story_proposal("Time passes.")]
    )
    assert [m.role for m in reply.turn.messages] == ["story"]
    assert reply.session.completed_player_turns == 0


async def test_commit_without_release_keeps_the_lease(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease
    await commit(stub, lease, turn_for(lease), release=False)
    await expect_error(grpc.StatusCode.ABORTED, acquire(stub, session.id))
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id))


async def test_commit_requests_are_validated(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id)).lease

    def request(**changes) -> store_pb2.CommitTurnRequest:
        message = store_pb2.CommitTurnRequest(session_id=session.id, lease_id=lease.lease_id, turn=turn_for(lease))
        for name, value in changes.items():
            if name == "proposals":
                message.proposals.extend(value)
            elif name.startswith("turn_"):
                setattr(message.turn, name.removeprefix("turn_"), value)
            else:
                setattr(message, name, value)
        return message

    unnamed = story_proposal("x")
    unnamed.id = ""
    twice = story_proposal("x")
    cases = [
        (request(lease_id=""), "lease_id"),
        (request(turn_id=""), "turn.id"),
        (request(turn_status=store_pb2.TURN_STATUS_UNSPECIFIED), "turn.status"),
        (request(turn_origin="cron"), "turn.origin"),
        (request(turn_session_id="elsewhere"), "turn.session_id"),
        (request(turn_id="not-the-lease-turn"), "turn.id"),
        (request(proposals=[unnamed]), "proposals[0].id"),
        (request(proposals=[twice, twice]), "proposals[1].id"),
    ]
    for message, field in cases:
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.CommitTurn(message))
        assert violated_fields(error) == [field], error.details()
    missing = store_pb2.CommitTurnRequest(session_id=session.id, lease_id=lease.lease_id)
    assert violated_fields(await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.CommitTurn(missing))) == ["turn"]
    # Nothing was written by any of them; the lease still works.
    assert (await commit(stub, lease, turn_for(lease))).turn.status == store_pb2.TURN_STATUS_COMMITTED
