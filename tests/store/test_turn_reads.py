"""What a turn reads with its lease (store.proto TurnReads): the world, and a window of the log."""

from __future__ import annotations

import grpc

from covel.store.v1 import store_pb2
from shared.structs import from_struct
from tests.store.helpers import (
    acquire,
    commit,
    commit_turn,
    expect_error,
    new_session,
    play_turn,
    proposal,
    story_proposal,
    story_result,
    turn_for,
    violated_fields,
)


def window(turns: int) -> store_pb2.TurnReads:
    return store_pb2.TurnReads(history=store_pb2.HistoryWindow(player_turns=turns))


async def lease_with(stub, session_id: str, reads: store_pb2.TurnReads) -> store_pb2.AcquireTurnLeaseResponse:
    return await acquire(stub, session_id, reads=reads, ttl_ms=30_000)


async def release(stub, reply: store_pb2.AcquireTurnLeaseResponse) -> None:
    await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=reply.lease.session_id, lease_id=reply.lease.lease_id))


async def read_window(stub, session_id: str, turns: int) -> list[tuple[str, str]]:
    reply = await lease_with(stub, session_id, window(turns))
    await release(stub, reply)
    return [(message.role, message.text) for message in reply.history]


async def play(stub, session_id: str, count: int, start: int = 1) -> None:
    for index in range(start, start + count):
        await play_turn(stub, session_id, f"story {index}", player_message=f"player {index}")


async def test_no_reads_asked_none_answered(stub):
    session = await new_session(stub)
    await play(stub, session.id, 2)
    reply = await acquire(stub, session.id)
    assert reply.HasField("lease") and not reply.history and not reply.HasField("world")
    await release(stub, reply)


async def test_window_holds_the_last_player_turns_and_what_followed(stub):
    session = await new_session(stub)
    await play(stub, session.id, 5)
    assert await read_window(stub, session.id, 2) == [
        ("player", "player 4"), ("story", "story 4"), ("player", "player 5"), ("story", "story 5")]
    # Fewer turns than the window: the whole log; 0: the whole log.
    everything = [entry for index in range(1, 6) for entry in (("player", f"player {index}"), ("story", f"story {index}"))]
    assert await read_window(stub, session.id, 50) == everything
    assert await read_window(stub, session.id, 0) == everything


async def test_window_starts_at_the_latest_summary(stub):
    session = await new_session(stub)
    await play(stub, session.id, 4)
    log = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages
    through = log[3].seq  # player 1 .. story 2 are folded
    await commit_turn(stub, session.id, [proposal("history.summary", {"text": "Earlier: two turns.", "throughSeq": through,
                                                                        "messageCount": 4}, plugin_id="history-compaction")],
                      story="story 5")
    entries = await read_window(stub, session.id, 0)
    assert entries[0] == ("player", "player 3") and ("summary", "Earlier: two turns.") in entries
    assert all(text not in {"player 1", "story 1", "player 2", "story 2"} for _, text in entries)
    # A window narrower than the log since the summary carries it where it was logged (with its turn) ...
    narrow = await read_window(stub, session.id, 1)
    assert narrow == [("player", "I open the door."), ("story", "story 5"), ("summary", "Earlier: two turns.")]
    # ... and first once it lies before the window's first player turn.
    await play(stub, session.id, 2, start=6)
    assert await read_window(stub, session.id, 1) == [("summary", "Earlier: two turns."), ("player", "player 7"), ("story", "story 7")]


async def test_window_of_a_new_session_is_empty(stub):
    session = await new_session(stub)
    assert await read_window(stub, session.id, 20) == []


async def test_world_is_read_with_the_lease(stub):
    session = await new_session(stub)
    await commit_turn(stub, session.id, [
        proposal("character.schema.set", {"types": ["npc"], "attributes": {"mood": {"type": "string"}}}, plugin_id="cast"),
        proposal("character.upsert", {"characterId": "mira", "expectedVersion": 0, "character": {"type": "npc", "name": "Mira"}},
                 plugin_id="cast"),
    ])
    reply = await lease_with(stub, session.id, store_pb2.TurnReads(world=True))
    await release(stub, reply)
    direct = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    assert reply.world == direct
    assert [character.id for character in reply.world.characters] == ["mira"] and reply.world.character_schema_version == 1


async def test_a_retried_submit_gets_its_turn_and_no_reads(stub):
    session = await new_session(stub)
    lease = (await acquire(stub, session.id, idempotency_key="k1")).lease
    await commit(stub, lease, turn_for(lease, idempotency_key="k1", runtime_results=[story_result()]), [story_proposal("once")])
    reply = await acquire(stub, session.id, idempotency_key="k1", reads=store_pb2.TurnReads(world=True, history=store_pb2.HistoryWindow()))
    assert reply.WhichOneof("result") == "existing_turn" and not reply.history and not reply.HasField("world")


async def test_a_negative_window_is_refused_naming_the_field(stub):
    session = await new_session(stub)
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, lease_with(stub, session.id, window(-1)))
    assert violated_fields(error) == ["reads.history.player_turns"]
    # Refused before any lease was taken.
    assert (await acquire(stub, session.id)).HasField("lease")


async def test_without_metadata_leaves_out_what_prompts_do_not_read(stub):
    session = await new_session(stub)
    await play(stub, session.id, 2)
    log = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages
    lease = (await acquire(stub, session.id)).lease
    summary = proposal("history.summary", {"text": "Earlier.", "throughSeq": log[1].seq, "messageCount": 2}, plugin_id="history-compaction")
    story = story_proposal("story 3", segments=[{"kind": "narration", "text": "story 3"}])
    await commit(stub, lease, turn_for(lease, runtime_results=[story_result()]), [story, summary])
    reads = store_pb2.TurnReads(history=store_pb2.HistoryWindow(without_metadata=True))
    reply = await lease_with(stub, session.id, reads)
    await release(stub, reply)
    by_role = {message.role: message for message in reply.history}
    assert not by_role["story"].HasField("metadata") and by_role["story"].text == "story 3"
    assert from_struct(by_role["summary"].metadata)["throughSeq"] == log[1].seq
    full = await lease_with(stub, session.id, window(0))
    await release(stub, full)
    assert [(m.role, m.text) for m in full.history] == [(m.role, m.text) for m in reply.history]
    assert from_struct([m for m in full.history if m.role == "story"][-1].metadata)["segments"][0]["text"] == "story 3"


async def test_plugin_data_is_read_with_the_lease_by_scope(stub):
    session = await new_session(stub)
    writes = [proposal("plugin.data", {"namespace": "clock", "key": "now", "value": {"minutes": 20}}, plugin_id="world-time"),
              proposal("plugin.data", {"namespace": "notes", "key": "b", "value": 2}, plugin_id="world-time"),
              proposal("plugin.data", {"namespace": "notes", "key": "a", "value": 1}, plugin_id="world-time"),
              proposal("plugin.data", {"namespace": "clock", "key": "now", "value": "other"}, plugin_id="inventory")]
    await commit_turn(stub, session.id, writes)
    scopes = [store_pb2.PluginDataScope(plugin_id="world-time", namespace="notes"), store_pb2.PluginDataScope(plugin_id="world-time"),
              store_pb2.PluginDataScope(plugin_id="nobody")]
    reply = await lease_with(stub, session.id, store_pb2.TurnReads(plugin_data=scopes))
    await release(stub, reply)
    read = [[(e.plugin_id, e.namespace, e.key) for e in scope.entries] for scope in reply.plugin_data]
    assert [scope.scope for scope in reply.plugin_data] == scopes
    assert read == [[("world-time", "notes", "a"), ("world-time", "notes", "b")],
                    [("world-time", "clock", "now"), ("world-time", "notes", "a"), ("world-time", "notes", "b")], []]


async def test_plugin_data_scopes_read_together_keep_each_plugins_namespaces_apart(stub):
    """The scopes are read with two statements for all of them: world-time's notes and inventory's clock asked,
    inventory's notes and world-time's clock (the same names, crossed) are in no scope; a scope asked twice is
    answered twice."""
    session = await new_session(stub)
    writes = [proposal("plugin.data", {"namespace": namespace, "key": "k", "value": f"{plugin}/{namespace}"}, plugin_id=plugin)
              for plugin in ("world-time", "inventory") for namespace in ("clock", "notes")]
    await commit_turn(stub, session.id, writes)
    scopes = [store_pb2.PluginDataScope(plugin_id="world-time", namespace="notes"),
              store_pb2.PluginDataScope(plugin_id="inventory", namespace="clock"),
              store_pb2.PluginDataScope(plugin_id="inventory"),
              store_pb2.PluginDataScope(plugin_id="world-time", namespace="notes")]
    reply = await lease_with(stub, session.id, store_pb2.TurnReads(plugin_data=scopes))
    await release(stub, reply)
    assert [[(e.plugin_id, e.namespace) for e in scope.entries] for scope in reply.plugin_data] == [
        [("world-time", "notes")], [("inventory", "clock")], [("inventory", "clock"), ("inventory", "notes")], [("world-time", "notes")]]


async def test_bad_plugin_data_scopes_are_refused_naming_the_field(stub):
    session = await new_session(stub)
    empty = store_pb2.TurnReads(plugin_data=[store_pb2.PluginDataScope(namespace="x")])
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, lease_with(stub, session.id, empty))
    assert violated_fields(error) == ["reads.plugin_data[0]"]
    many = store_pb2.TurnReads(plugin_data=[store_pb2.PluginDataScope(plugin_id=f"p{i}") for i in range(65)])
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, lease_with(stub, session.id, many))
    assert violated_fields(error) == ["reads.plugin_data"]
