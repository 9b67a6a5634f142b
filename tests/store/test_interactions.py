"""Interactions (store.proto Interaction, InteractionRecord), on both backends: what a commit records
open, what an answering turn closes, a turn answering one no longer open, duplicates, replays, the
world's open interactions and ListInteractions."""

from __future__ import annotations

from typing import Any

import grpc
from sqlalchemy import func, select

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.store.database import create_store_engine
from services.store.models import InteractionRow
from shared.structs import from_struct, to_struct
from tests.store.helpers import (
    acquire,
    data_proposal,
    expect_error,
    new_session,
    outcomes_by_id,
    plugin_data,
    story_proposal,
    story_result,
    turn_for,
    violated_fields,
)

COMMITTED = store_pb2.PROPOSAL_STATUS_COMMITTED
DISCARDED = store_pb2.PROPOSAL_STATUS_DISCARDED
PLUGIN = "quiz"
ASKER = "asker"
OPTIONS = {"options": [{"id": "left", "label": "Left"}, {"id": "right", "label": "Right"}]}


def interaction(interaction_id: str, kind: str = "choice", **fields: Any) -> store_pb2.Interaction:
    fields.setdefault("spec", to_struct(OPTIONS if kind == "choice" else {}))
    fields.setdefault("title", f"Ask {interaction_id}")
    return store_pb2.Interaction(id=interaction_id, kind=kind, prompt="Which way?", **fields)


def asking(*asked: store_pb2.Interaction, runtime_id: str = ASKER, status: str = "success") -> store_pb2.RuntimeResult:
    return store_pb2.RuntimeResult(runtime_id=runtime_id, plugin_id=PLUGIN, status=status, interactions=list(asked))


def answering(interaction_id: str, **values: Any) -> common_pb2.PlayerAction:
    return common_pb2.PlayerAction(seat_id="p1", kind="say", source="player", text="",
                                   interaction=common_pb2.InteractionAnswer(id=interaction_id, values=to_struct(values)))


def request_for(lease: store_pb2.TurnLease, results=(), proposals=None, actions=None, **turn_fields: Any) -> store_pb2.CommitTurnRequest:
    """A commit of the leased turn: a story plus `results` and `proposals`; `actions` replace the player's."""
    if actions is not None:
        turn_fields["actions"] = actions
    turn = turn_for(lease, runtime_results=[story_result(), *results], **turn_fields)
    items = [story_proposal("The path forks."), *(proposals or [])]
    return store_pb2.CommitTurnRequest(session_id=lease.session_id, lease_id=lease.lease_id, turn=turn, proposals=items, release_lease=True)


async def play(stub, session_id: str, results=(), proposals=None, actions=None, **turn_fields: Any) -> store_pb2.CommitTurnResponse:
    lease = (await acquire(stub, session_id)).lease
    return await stub.CommitTurn(request_for(lease, results, proposals, actions, **turn_fields))


async def listed(stub, session_id: str, include_answered: bool = False) -> list[store_pb2.InteractionRecord]:
    request = store_pb2.ListInteractionsRequest(session_id=session_id, include_answered=include_answered)
    return list((await stub.ListInteractions(request)).interactions)


async def open_in_world(stub, session_id: str) -> list[store_pb2.InteractionRecord]:
    return list((await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session_id))).open_interactions)


def interaction_trace(turn: store_pb2.Turn) -> list[dict[str, Any]]:
    return [entry for entry in map(from_struct, turn.trace) if str(entry.get("code", "")).startswith("interaction.")]


def asked_ids(turn: store_pb2.Turn) -> list[str]:
    return [item.id for result in turn.runtime_results for item in result.interactions]


async def test_a_committed_turns_interactions_are_open_in_the_world_and_listed(stub):
    session_id = (await new_session(stub)).id
    first = await play(stub, session_id, [asking(interaction("way"), interaction("sure", "confirm"))])
    assert first.turn.status == store_pb2.TURN_STATUS_COMMITTED and interaction_trace(first.turn) == []
    form = interaction("name", "form", form_id="hero-name", action_kind="do", plugin_id=PLUGIN, runtime_id="namer",
                       spec=to_struct({"schema": {"type": "object", "properties": {"name": {"type": "string"}}}, "fieldOrder": ["name"]}))
    second = await play(stub, session_id, [asking(form, runtime_id="namer")])

    records = await listed(stub, session_id)
    assert [(r.interaction.id, r.turn_id, r.status, r.answered_turn_id, r.HasField("answer"), r.HasField("answered_at")) for r in records] == [
        ("way", first.turn.id, "open", "", False, False), ("sure", first.turn.id, "open", "", False, False),
        ("name", second.turn.id, "open", "", False, False)]
    # The whole Interaction, its plugin and runtime filled in from the result that asked it.
    way = records[0].interaction
    assert (way.kind, way.title, way.prompt, way.plugin_id, way.runtime_id, from_struct(way.spec)) == (
        "choice", "Ask way", "Which way?", PLUGIN, ASKER, OPTIONS)
    assert records[2].interaction == form
    assert records[0].HasField("created_at") and records[0].created_at == records[1].created_at
    assert await open_in_world(stub, session_id) == records
    assert await listed(stub, session_id, include_answered=True) == records
    # The lease's world reads them too.
    reply = await acquire(stub, session_id, reads=store_pb2.TurnReads(world=True), ttl_ms=30_000)
    try:
        assert list(reply.world.open_interactions) == records
    finally:
        await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session_id, lease_id=reply.lease.lease_id))
    # The turn keeps what it asked.
    read = (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session_id, turn_id=first.turn.id))).turn
    assert asked_ids(read) == asked_ids(first.turn) == ["way", "sure"]


async def test_turns_and_units_that_did_not_commit_ask_nothing(stub):
    session_id = (await new_session(stub)).id
    lease = (await acquire(stub, session_id)).lease
    aborted = request_for(lease, [asking(interaction("aborted"))])
    aborted.turn.status, aborted.turn.abort_reason = store_pb2.TURN_STATUS_ABORTED, "cancelled"
    assert (await stub.CommitTurn(aborted)).turn.status == store_pb2.TURN_STATUS_ABORTED
    lease = (await acquire(stub, session_id)).lease
    failed = request_for(lease, [asking(interaction("failed"))])
    failed.turn.status, failed.turn.abort_reason = store_pb2.TURN_STATUS_FAILED, "the story runtime failed"
    assert (await stub.CommitTurn(failed)).turn.status == store_pb2.TURN_STATUS_FAILED
    # A story rejection fails the turn in the store: nothing either.
    bad_story = story_proposal("x")
    bad_story.payload.CopyFrom(to_struct({}))
    lease = (await acquire(stub, session_id)).lease
    rejected = request_for(lease, [asking(interaction("rolled-back"))])
    rejected.proposals[0].CopyFrom(bad_story)
    reply = await stub.CommitTurn(rejected)
    assert reply.turn.status == store_pb2.TURN_STATUS_FAILED and asked_ids(reply.turn) == []
    # A unit discarded in a committed turn (its runtime failed) asked nothing; the others did.
    write = data_proposal("notes", "k", 1, plugin_id=PLUGIN, runtime_id="broken")
    reply = await play(stub, session_id, [asking(interaction("lost"), runtime_id="broken", status="failed"), asking(interaction("kept"))],
                       proposals=[write])
    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED
    assert outcomes_by_id(reply.turn)[write.id].status == DISCARDED
    assert asked_ids(reply.turn) == ["kept"]
    assert [r.interaction.id for r in await listed(stub, session_id, include_answered=True)] == ["kept"]


async def test_an_answering_turn_closes_the_interaction_with_its_values(stub):
    session_id = (await new_session(stub)).id
    asked = (await play(stub, session_id, [asking(interaction("way"), interaction("sure", "confirm"))])).turn
    reply = await play(stub, session_id, actions=[answering("way", option="left")], player_message="")
    assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED and interaction_trace(reply.turn) == []
    assert [r.interaction.id for r in await listed(stub, session_id)] == ["sure"]
    assert [r.interaction.id for r in await open_in_world(stub, session_id)] == ["sure"]
    way, sure = await listed(stub, session_id, include_answered=True)
    assert (way.interaction.id, way.status, way.turn_id, way.answered_turn_id, from_struct(way.answer)) == (
        "way", "answered", asked.id, reply.turn.id, {"option": "left"})
    assert way.answered_at.ToDatetime() >= way.created_at.ToDatetime()
    assert (sure.status, sure.answered_turn_id, sure.HasField("answer")) == ("open", "", False)
    # An answer and a new question in one turn; values with numbers and nesting come back as sent.
    reply = await play(stub, session_id, [asking(interaction("next"))], actions=[answering("sure", confirmed=True, extra={"n": 3})])
    records = {r.interaction.id: r for r in await listed(stub, session_id, include_answered=True)}
    assert from_struct(records["sure"].answer) == {"confirmed": True, "extra": {"n": 3}}
    assert (records["next"].status, records["next"].turn_id) == ("open", reply.turn.id)


async def test_answering_an_interaction_no_longer_open_fails_the_turn(stub):
    session_id = (await new_session(stub)).id
    await play(stub, session_id, [asking(interaction("way"))])
    first = await play(stub, session_id, actions=[answering("way", option="left")])
    assert first.turn.status == store_pb2.TURN_STATUS_COMMITTED
    before = await stub.GetSession(store_pb2.GetSessionRequest(session_id=session_id))
    messages = len((await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session_id))).messages)

    write = data_proposal("notes", "late", True, plugin_id=PLUGIN, runtime_id="recorder")
    late = await play(stub, session_id, [asking(interaction("follow-up"))], proposals=[write], actions=[answering("way", option="right")])
    turn = late.turn
    assert turn.status == store_pb2.TURN_STATUS_FAILED
    assert "interaction way was already answered" in turn.abort_reason and first.turn.id in turn.abort_reason
    assert {outcome.status for outcome in turn.proposal_outcomes} == {DISCARDED} and len(turn.proposal_outcomes) == 2
    assert {outcome.code for outcome in turn.proposal_outcomes} == {"interaction-not-open"}
    assert all("interaction way was already answered" in outcome.reason for outcome in turn.proposal_outcomes)
    assert {unit.unit_runtime_id for unit in turn.discarded_units} == {"narrator", "recorder"}
    assert [(e["code"], e["interactionId"], e["state"]) for e in interaction_trace(turn)] == [("interaction.not-open", "way", "answered")]
    assert turn.narrative == "" and list(turn.messages) == [] and asked_ids(turn) == []
    # Nothing of it committed: no message, no data, no question, the first answer stands, the turn not counted.
    assert len((await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session_id))).messages) == messages
    assert await plugin_data(stub, session_id, PLUGIN) == {}
    [way] = await listed(stub, session_id, include_answered=True)
    assert (way.status, way.answered_turn_id, from_struct(way.answer)) == ("answered", first.turn.id, {"option": "left"})
    after = (await stub.GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session
    assert after.completed_player_turns == before.session.completed_player_turns
    read = (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session_id, turn_id=turn.id))).turn
    assert (read.status, read.abort_reason, interaction_trace(read)) == (turn.status, turn.abort_reason, interaction_trace(turn))

    # An unknown interaction fails the turn alike.
    unknown = (await play(stub, session_id, actions=[answering("nowhere", option="left")])).turn
    assert unknown.status == store_pb2.TURN_STATUS_FAILED and "interaction nowhere does not exist" in unknown.abort_reason
    assert [(e["interactionId"], e["state"]) for e in interaction_trace(unknown)] == [("nowhere", "none")]


async def test_a_turn_that_does_not_commit_leaves_its_answer_open(stub):
    session_id = (await new_session(stub)).id
    await play(stub, session_id, [asking(interaction("way"))])
    lease = (await acquire(stub, session_id)).lease
    request = request_for(lease, actions=[answering("way", option="left")], status=store_pb2.TURN_STATUS_ABORTED)
    assert (await stub.CommitTurn(request)).turn.status == store_pb2.TURN_STATUS_ABORTED
    bad_story = story_proposal("x")
    bad_story.payload.CopyFrom(to_struct({}))
    lease = (await acquire(stub, session_id)).lease
    request = request_for(lease, actions=[answering("way", option="left")])
    request.proposals[0].CopyFrom(bad_story)
    assert (await stub.CommitTurn(request)).turn.status == store_pb2.TURN_STATUS_FAILED
    assert [(r.interaction.id, r.status) for r in await listed(stub, session_id, include_answered=True)] == [("way", "open")]


async def test_a_duplicate_id_is_dropped_with_a_trace_entry(stub):
    session_id = (await new_session(stub)).id
    first = (await play(stub, session_id, [asking(interaction("way"))])).turn
    reply = await play(stub, session_id, [asking(interaction("way", title="Again"), interaction("fresh"), interaction("fresh", "confirm")),
                                          asking(interaction("fresh"), runtime_id="other")])
    turn = reply.turn
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED
    trace = interaction_trace(turn)
    assert [(e["code"], e["interactionId"], e["runtimeId"], e["pluginId"], e["keptTurnId"]) for e in trace] == [
        ("interaction.duplicate", "way", ASKER, PLUGIN, first.id), ("interaction.duplicate", "fresh", ASKER, PLUGIN, turn.id),
        ("interaction.duplicate", "fresh", "other", PLUGIN, turn.id)]
    assert "already used by turn" in trace[0]["message"] and "earlier in this turn" in trace[1]["message"]
    # Dropped from the results too: the turn shows what the session keeps.
    assert asked_ids(turn) == ["fresh"]
    read = (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session_id, turn_id=turn.id))).turn
    assert asked_ids(read) == ["fresh"] and interaction_trace(read) == trace
    records = await listed(stub, session_id)
    assert [(r.interaction.id, r.interaction.title, r.interaction.kind, r.turn_id) for r in records] == [
        ("way", "Ask way", "choice", first.id), ("fresh", "Ask fresh", "choice", turn.id)]


async def test_a_replayed_commit_records_nothing_twice(stub):
    session_id = (await new_session(stub)).id
    lease = (await acquire(stub, session_id)).lease
    request = request_for(lease, [asking(interaction("way"))])
    first = await stub.CommitTurn(request)
    second = await stub.CommitTurn(request)
    assert second.turn.id == first.turn.id and asked_ids(second.turn) == ["way"]
    assert interaction_trace(second.turn) == []
    lease = (await acquire(stub, session_id)).lease
    request = request_for(lease, actions=[answering("way", option="left")])
    answered = await stub.CommitTurn(request)
    # A replay of the answering turn is that turn, not a second answer (which would fail).
    again = await stub.CommitTurn(request)
    assert again.turn.status == answered.turn.status == store_pb2.TURN_STATUS_COMMITTED
    [way] = await listed(stub, session_id, include_answered=True)
    assert (way.turn_id, way.status, way.answered_turn_id) == (first.turn.id, "answered", answered.turn.id)


async def test_requests_name_their_bad_fields(stub):
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.ListInteractions(store_pb2.ListInteractionsRequest(session_id="no-such-session")))
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.ListInteractions(store_pb2.ListInteractionsRequest()))
    assert violated_fields(error) == ["session_id"]
    # (A refused commit leaves its lease held: each in a session of its own.)
    cases = [
        ({"results": [asking(interaction(""))]}, "turn.runtime_results[1].interactions[0].id"),
        ({"results": [asking(interaction("x" * 201))]}, "turn.runtime_results[1].interactions[0].id"),
        ({"results": [asking(interaction("ok", kind="k" * 33))]}, "turn.runtime_results[1].interactions[0].kind"),
        ({"actions": [answering("")]}, "turn.actions[0].interaction.id"),
        ({"actions": [answering("way", option="left"), answering("way", option="right")]}, "turn.actions[1].interaction.id"),
    ]
    for fields, field in cases:
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, play(stub, (await new_session(stub)).id, **fields))
        assert violated_fields(error) == [field]


async def test_deleting_the_session_removes_its_interactions(store):
    stub = store.stub
    session_id = (await new_session(stub)).id
    await play(stub, session_id, [asking(interaction("way"), interaction("sure", "confirm"))])
    await play(stub, session_id, actions=[answering("way", option="left")])
    assert len(await listed(stub, session_id, include_answered=True)) == 2
    await stub.EndSession(store_pb2.EndSessionRequest(session_id=session_id, reason="deleted"))
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.ListInteractions(store_pb2.ListInteractionsRequest(session_id=session_id)))
    settings = store.settings
    engine = create_store_engine(settings.database_url(), schema=settings.store_database_schema, pool_size=1)
    try:
        with engine.connect() as connection:
            count = select(func.count()).select_from(InteractionRow).where(InteractionRow.session_id == session_id)
            assert connection.execute(count).scalar_one() == 0
    finally:
        engine.dispose()
