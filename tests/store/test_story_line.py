"""The story's moves in the store (services/store/story_line.py): checkpoints, rewind, versions, retry, branch."""

from __future__ import annotations

import grpc

from covel.store.v1 import store_pb2
from shared.structs import from_struct, to_value
from tests.store.helpers import (
    acquire,
    commit,
    data_proposal,
    expect_error,
    new_session,
    proposal,
    story_proposal,
    story_result,
    turn_for,
)


async def _turn(stub, session_id: str, story: str, mood: str, **lease_fields) -> store_pb2.Turn:
    """A committed player turn whose story says `story` and whose plugin data sets mood/now = `mood`."""
    version_of = lease_fields.pop("version_of", "")
    lease = (await acquire(stub, session_id, **lease_fields)).lease
    turn = turn_for(lease, player_message=f"say {story}", runtime_results=[story_result(), story_result("recorder", "memory")],
                    version_of=version_of, source_turn_id=lease_fields.get("retry_turn_id", ""))
    reply = await commit(stub, lease, turn, [story_proposal(story), data_proposal("mood", "now", mood)])
    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED, reply.turn.abort_reason
    return reply.turn


async def _mood(stub, session_id: str) -> str:
    reply = await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="memory"))
    return [entry for entry in reply.entries if entry.key == "now"][0].value.string_value


async def _log(stub, session_id: str) -> list[str]:
    reply = await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session_id))
    return [message.text for message in reply.messages if message.role == "story"]


async def _history(stub, session_id: str) -> list[str]:
    """The log a turn reads with its lease (turn_reads.py), then the lease let go."""
    reply = await acquire(stub, session_id, reads=store_pb2.TurnReads(history=store_pb2.HistoryWindow()))
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session_id, lease_id=reply.lease.lease_id))
    return [message.text for message in reply.history if message.role == "story"]


async def test_a_rewind_restores_the_turns_state_and_keeps_the_later_turns_as_history(stub):
    session = await new_session(stub)
    first = await _turn(stub, session.id, "One.", "calm")
    second = await _turn(stub, session.id, "Two.", "tense")
    await _turn(stub, session.id, "Three.", "furious")
    assert await _mood(stub, session.id) == "furious"

    moved = (await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(move="rewind", session_id=session.id, turn_id=first.id, request_id="r1"))).session
    assert moved.head_turn_id == first.id
    assert moved.completed_player_turns == 1
    assert await _mood(stub, session.id) == "calm"
    assert await _log(stub, session.id) == ["One."]
    assert await _history(stub, session.id) == ["One."]
    turns = (await stub.ListTurns(store_pb2.ListTurnsRequest(session_id=session.id))).turns
    assert [(turn.narrative, turn.off_line) for turn in turns] == [("One.", False), ("Two.", True), ("Three.", True)]

    # The next turn follows the rewound head: its parent, its logical turn and the state it reads.
    fourth = await _turn(stub, session.id, "Four.", "curious")
    assert (fourth.parent_turn_id, fourth.logical_turn) == (first.id, 2)
    assert await _log(stub, session.id) == ["One.", "Four."]

    # A resent move changes nothing again; a turn off the line is no rewind's target; a turn of the line is.
    again = (await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(move="rewind", session_id=session.id, turn_id=first.id, request_id="r1"))).session
    assert again.head_turn_id == fourth.id
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, stub.SetSessionHead(
        store_pb2.SetSessionHeadRequest(move="rewind", session_id=session.id, turn_id=second.id, request_id="r2")))
    assert "off the story's line" in error.details()
    await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(move="rewind", session_id=session.id, turn_id=first.id, request_id="r3"))
    assert await _mood(stub, session.id) == "calm"
    assert await _log(stub, session.id) == ["One."]


async def test_a_retry_runs_on_the_state_before_the_turn_and_its_versions_are_selectable(stub):
    session = await new_session(stub)
    first = await _turn(stub, session.id, "One.", "calm")
    second = await _turn(stub, session.id, "Two.", "tense")
    retried = await _turn(stub, session.id, "Two, again.", "hopeful", retry_turn_id=second.id, version_of=second.id)
    assert retried.logical_turn == second.logical_turn
    assert (retried.version_of, retried.source_turn_id) == (second.id, second.id)
    assert await _log(stub, session.id) == ["One.", "Two, again."]
    assert await _mood(stub, session.id) == "hopeful"

    # Choose the first version: its state and its story come back. The first turn is no version of the last.
    await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(session_id=session.id, turn_id=second.id, move="version"))
    assert await _mood(stub, session.id) == "tense"
    assert await _history(stub, session.id) == ["One.", "Two."]
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, stub.SetSessionHead(
        store_pb2.SetSessionHeadRequest(session_id=session.id, turn_id=first.id, move="version")))
    assert "not a version of the last turn" in error.details()
    # And back to the retry's version.
    await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(session_id=session.id, turn_id=retried.id, move="version"))
    assert await _mood(stub, session.id) == "hopeful"


async def test_a_retry_that_does_not_commit_puts_the_head_back(stub):
    session = await new_session(stub)
    await _turn(stub, session.id, "One.", "calm")
    second = await _turn(stub, session.id, "Two.", "tense")
    lease = (await acquire(stub, session.id, retry_turn_id=second.id)).lease
    assert await _mood(stub, session.id) == "calm"
    failed = turn_for(lease, status=store_pb2.TURN_STATUS_FAILED, abort_reason="the model failed", version_of=second.id,
                      source_turn_id=second.id)
    reply = await commit(stub, lease, failed)
    assert reply.session.head_turn_id == second.id
    assert await _mood(stub, session.id) == "tense"
    assert await _log(stub, session.id) == ["One.", "Two."]


async def test_only_the_last_turn_is_retried_and_only_committed_turns_are_rewound_to(stub):
    session = await new_session(stub)
    first = await _turn(stub, session.id, "One.", "calm")
    await _turn(stub, session.id, "Two.", "tense")
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, acquire(stub, session.id, retry_turn_id=first.id))
    assert "not the last player's turn" in error.details()
    lease = (await acquire(stub, session.id)).lease
    await commit(stub, lease, turn_for(lease, status=store_pb2.TURN_STATUS_ABORTED, abort_reason="a hook said no"))
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION,
                               stub.SetSessionHead(store_pb2.SetSessionHeadRequest(move="rewind", session_id=session.id, turn_id=lease.turn_id)))
    assert "no checkpoint" in error.details()
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.SetSessionHead(store_pb2.SetSessionHeadRequest(move="rewind", session_id=session.id, turn_id="nope")))


async def test_a_move_waits_for_a_running_turn(stub):
    session = await new_session(stub)
    first = await _turn(stub, session.id, "One.", "calm")
    lease = (await acquire(stub, session.id)).lease
    error = await expect_error(grpc.StatusCode.ABORTED, stub.SetSessionHead(store_pb2.SetSessionHeadRequest(move="rewind", session_id=session.id, turn_id=first.id)))
    assert "has a turn running" in error.details()
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id))


async def test_a_branch_copies_the_line_up_to_the_turn_with_its_state(stub):
    session = await new_session(stub, title="Coast")
    first = await _turn(stub, session.id, "One.", "calm")
    await _turn(stub, session.id, "Two.", "tense")
    request = store_pb2.BranchSessionRequest(session_id=session.id, turn_id=first.id, request_id="b1", owner="alice")
    branch = (await stub.BranchSession(request)).session
    assert branch.id != session.id and branch.owner == "alice" and branch.title == "Coast"
    assert (branch.completed_player_turns, branch.recorded_turns) == (1, 1)
    assert await _mood(stub, branch.id) == "calm"
    assert await _log(stub, branch.id) == ["One."]
    copied = (await stub.ListTurns(store_pb2.ListTurnsRequest(session_id=branch.id))).turns
    assert [(turn.narrative, turn.player_message, turn.id != first.id) for turn in copied] == [("One.", "say One.", True)]
    # The source goes on as it was; the branch plays on from turn 1 and can rewind to its own copy of it.
    assert await _mood(stub, session.id) == "tense"
    assert (await stub.BranchSession(request)).session.id == branch.id
    await _turn(stub, branch.id, "Two in the branch.", "bold")
    assert await _log(stub, branch.id) == ["One.", "Two in the branch."]
    await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(move="rewind", session_id=branch.id, turn_id=branch.head_turn_id))
    assert await _mood(stub, branch.id) == "calm"


async def test_a_detached_job_of_a_rewound_turn_is_superseded(stub):
    session = await new_session(stub)
    first = await _turn(stub, session.id, "One.", "calm")
    lease = (await acquire(stub, session.id)).lease
    turn = turn_for(lease, runtime_results=[story_result()])
    job = store_pb2.DetachedJobSpec(plugin_id="memory", runtime_id="memory/extract", max_queue_ms=60_000, max_execution_ms=60_000)
    reply = await stub.CommitTurn(store_pb2.CommitTurnRequest(session_id=session.id, lease_id=lease.lease_id, turn=turn,
                                                              proposals=[story_proposal("Two.")], release_lease=True, detached_jobs=[job]))
    assert len(reply.enqueued_jobs) == 1
    await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(move="rewind", session_id=session.id, turn_id=first.id))
    jobs = (await stub.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session.id))).jobs
    assert [job.status for job in jobs] == ["superseded"]


async def test_the_first_turn_is_retried_on_the_state_the_session_started_with(stub):
    session = await new_session(stub)
    first = await _turn(stub, session.id, "One.", "calm")
    retried = await _turn(stub, session.id, "One, again.", "bold", retry_turn_id=first.id, version_of=first.id)
    assert (retried.parent_turn_id, retried.logical_turn) == ("", 1)
    assert await _log(stub, session.id) == ["One, again."]
    await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(session_id=session.id, turn_id=first.id, move="version"))
    assert await _mood(stub, session.id) == "calm"
    assert await _log(stub, session.id) == ["One."]


async def test_a_rewind_restores_the_world_the_lorebook_and_the_hook_state(stub, hooks):
    session = await new_session(stub)

    async def turn(name: str, version: int) -> store_pb2.Turn:
        lease = (await acquire(stub, session.id)).lease
        upsert = proposal("character.upsert", {"characterId": "aya", "expectedVersion": version, "character": {"type": "npc", "name": name}},
                          plugin_id="cast", runtime_id="cast")
        reply = await commit(stub, lease, turn_for(lease, runtime_results=[story_result(), story_result("cast", "cast")]),
                             [story_proposal(f"{name} waves."), upsert])
        assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED, reply.turn.abort_reason
        return reply.turn

    async def counter(op: str = "get", value: int = 0) -> float:
        request = store_pb2.AccessHookStateRequest(session_id=session.id, plugin_id="hooky", op=op, key="seen", value=to_value(value))
        return (await hooks.AccessHookState(request)).value.number_value

    await counter("set", 1)
    first = await turn("Aya", 0)
    await counter("set", 2)
    entry = store_pb2.LorebookEntry(owner="player", id="late", title="Late", keys=["late"], content="Written after turn one.")
    await stub.PutLorebookEntry(store_pb2.PutLorebookEntryRequest(session_id=session.id, entry=entry))
    second = await turn("Aya II", 1)

    await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(session_id=session.id, turn_id=first.id, move="rewind"))
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    assert [(c.id, c.version, from_struct(c.data)["name"]) for c in world.characters] == [("aya", 1, "Aya")]
    assert [e.id for e in world.lorebook if e.owner == "player"] == []
    assert await counter() == 1

    # A follow-up of the rewound turn (a detached job's background turn) commits nothing.
    lease = (await acquire(stub, session.id, origin="background")).lease
    late = turn_for(lease, origin="background", source_turn_id=second.id, actions=[], runtime_results=[story_result("cast", "cast")])
    upsert = proposal("character.upsert", {"characterId": "aya", "expectedVersion": 1, "character": {"name": "Ghost"}},
                      plugin_id="cast", runtime_id="cast")
    reply = await commit(stub, lease, late, [upsert])
    assert reply.turn.status == store_pb2.TURN_STATUS_ABORTED and "off the story's line" in reply.turn.abort_reason
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    assert [from_struct(c.data)["name"] for c in world.characters] == ["Aya"]


async def test_a_retry_takes_the_follow_ups_of_the_last_players_turn_off_the_line_with_it(stub):
    """A detached job's background turn after the last player's turn is its follow-up: the player's turn is still the one
    a retry runs again, and its versions are what a player chooses among."""
    session = await new_session(stub)
    await _turn(stub, session.id, "One.", "calm")
    second = await _turn(stub, session.id, "Two.", "tense")
    lease = (await acquire(stub, session.id, origin="background")).lease
    job = turn_for(lease, origin="background", source_turn_id=second.id, actions=[], runtime_results=[story_result("recorder", "memory")])
    background = (await commit(stub, lease, job, [data_proposal("mood", "now", "remembered")])).turn
    assert background.status == store_pb2.TURN_STATUS_COMMITTED and await _mood(stub, session.id) == "remembered"

    retried = await _turn(stub, session.id, "Two, again.", "hopeful", retry_turn_id=second.id, version_of=second.id)
    turns = {turn.id: turn for turn in (await stub.ListTurns(store_pb2.ListTurnsRequest(session_id=session.id))).turns}
    assert turns[background.id].off_line and turns[second.id].off_line and not turns[retried.id].off_line
    await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(session_id=session.id, turn_id=second.id, move="version"))
    assert await _mood(stub, session.id) == "tense", "the version's own state, without its follow-up's"


async def test_plugin_data_comes_back_from_the_turn_that_wrote_it(stub):
    """A checkpoint keeps the plugin data its turn wrote and every key's writer: a key the world wrote, one an early turn
    wrote and a later one left alone, and one a later turn deleted all come back as the rewound-to turn left them."""
    world = store_pb2.SessionWorld(writer="world:w", plugin_data=[store_pb2.PluginDataEntry(plugin_id="memory", namespace="lore", key="bells",
                                                                          value=to_value({"text": "The bells ring."}))])
    session = (await stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(world_id="w", title="t"), world=world))).session

    async def turn(*proposals) -> store_pb2.Turn:
        lease = (await acquire(stub, session.id)).lease
        reply = await commit(stub, lease, turn_for(lease, runtime_results=[story_result(), story_result("recorder", "memory")]),
                             [story_proposal("On."), *proposals])
        assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED, reply.turn.abort_reason
        return reply.turn

    async def data() -> dict:
        entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id="memory"))).entries
        return {(e.namespace, e.key): (from_struct(e.value.struct_value) if e.value.HasField("struct_value") else e.value.string_value)
                for e in entries}

    first = await turn(data_proposal("notes", "door", "red"), data_proposal("mood", "now", "calm"))
    second = await turn(data_proposal("mood", "now", "tense"))
    delete = proposal("plugin.data.delete", {"namespace": "notes", "key": "door"}, plugin_id="memory", runtime_id="recorder")
    await turn(delete, data_proposal("mood", "now", "grim"))
    assert await data() == {("lore", "bells"): {"text": "The bells ring."}, ("mood", "now"): "grim"}

    await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(session_id=session.id, turn_id=second.id, move="rewind"))
    assert await data() == {("lore", "bells"): {"text": "The bells ring."}, ("notes", "door"): "red", ("mood", "now"): "tense"}
    branch = (await stub.BranchSession(store_pb2.BranchSessionRequest(session_id=session.id, turn_id=first.id))).session
    branched = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=branch.id, plugin_id="memory"))).entries
    assert sorted((e.namespace, e.key) for e in branched) == [("lore", "bells"), ("mood", "now"), ("notes", "door")]
    # The first turn again: on the state the session started with, its world's data alone.
    await stub.SetSessionHead(store_pb2.SetSessionHeadRequest(session_id=session.id, turn_id=first.id, move="rewind"))
    lease = (await acquire(stub, session.id, retry_turn_id=first.id)).lease
    assert await data() == {("lore", "bells"): {"text": "The bells ring."}}
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session.id, lease_id=lease.lease_id))
