"""A function handler's ctx.world, ctx.store, ctx.tools and ctx.gateway, through all five services."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, to_struct
from tests.e2e.conftest import running_services
from tests.support.builtin_plugins import SETUP_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Only the memory slot (function.model of ctx-probe/worker) answers this prompt with this text.
SCRIPT = {"rules": [{"match": "ctx-probe-ask", "slots": ["memory"], "reply": {"text": "the memory slot answers"}}]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scripted(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("covel-ctx"), script=SCRIPT) as group:
        yield group


async def test_function_ctx_reaches_world_session_tools_and_gateway(scripted) -> None:
    async with open_channel(scripted.addrs["scheduler"]) as channel, scripted.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["ctx-probe"], approved_plugins=["ctx-probe"],
                                                                                excluded_plugins=SETUP_PLUGINS))).session
        # A world with a character, committed through the store (as a setup runtime would).
        lease = (await store.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(
            session_id=session.id, holder="test", ttl_ms=10000, origin="manual"))).lease
        await store.CommitTurn(store_pb2.CommitTurnRequest(
            session_id=session.id, lease_id=lease.lease_id, release_lease=True,
            turn=store_pb2.Turn(id=lease.turn_id, status=store_pb2.TURN_STATUS_COMMITTED, origin="manual"),
            proposals=[
                store_pb2.Proposal(id="s", type="character.schema.set", plugin_id="world", runtime_id="world/setup",
                                   payload=to_struct({"types": ["npc"], "attributes": {}})),
                store_pb2.Proposal(id="c", type="character.upsert", plugin_id="world", runtime_id="world/setup",
                                   payload=to_struct({"characterId": "npc-mira", "expectedVersion": 0, "character": {"name": "Mira", "type": "npc"}})),
                # The scripted narrator's own cast: its stories name him, so he is present in them.
                store_pb2.Proposal(id="r", type="character.upsert", plugin_id="world", runtime_id="world/setup",
                                   payload=to_struct({"characterId": "npc-rhee", "expectedVersion": 0,
                                                      "character": {"name": "Captain Rhee", "type": "npc"}})),
            ]))
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I ask around.")])
        turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
        looked_up = (await store.ListPluginData(store_pb2.ListPluginDataRequest(
            session_id=session.id, plugin_id="ctx-probe", namespace="looked-up"))).entries
    assert sorted(entry.key for entry in looked_up) == ["annotate", "plain", "rewritten"], "tool writes commit with the function"
    result = next(r for r in turn.runtime_results if r.runtime_id == "ctx-probe/worker")
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    output = from_struct(result.output)
    assert output["characters"] == ["Mira", "Captain Rhee"] and output["schemaTypes"] == ["npc"]
    assert output["afterPropose"] == ["Mira", "Captain Rhee", "Tam"], "ctx.world sees the run's own buffered proposal"
    assert output["sameUntilProposed"], "reading again gives the same object until the run proposes"
    assert output["worldRecord"] is None, "a session without a world has no world record"
    assert output["frozen"], "ctx.world and what it holds are read-only"
    assert output["session"] == {"phase": "playing", "completed": 0, "locale": "en"}
    calls = output["calls"]
    assert calls["plain"] == {"ok": True, "data": {"word": "plain", "by": "ctx-probe/worker"}}
    assert calls["rewrite"]["data"]["word"] == "rewritten", "PreToolUse rewrote the arguments"
    assert calls["blocked"]["ok"] is False and "ctx-probe refuses" in json.dumps(calls["blocked"])
    assert calls["annotate"] == {"ok": True, "data": {"annotated": True}}, "PostToolUse rewrote the result"
    assert output["unauthorized"] == "unauthorized", "only function.tools may be called"
    surveyed = output["surveyed"]["data"]
    assert 1 <= surveyed.pop("roll") <= 6, "a tool's context.random draws as ctx.random does"
    assert surveyed == {"phase": "playing", "locale": "en", "characters": ["Mira", "Captain Rhee", "Tam"], "worldRecord": None}, (
        "a tool's context.store.get_session() and context.world: the caller's view, its own proposal included")
    assert output["text"] == "the memory slot answers", "ctx.gateway used function.model's slot"
    assert output["answer"] == {"mood": "calm"}
    judged = output["judged"]
    assert isinstance(judged["verdict"], bool) and judged["reason"], "ctx.gateway.evaluate: a verdict and a reason"
    async with open_channel(scripted.addrs["scheduler"]) as channel:
        invoked = await scheduler_pb2_grpc.SchedulerStub(channel).InvokeAction(scheduler_pb2.InvokeActionRequest(
            session_id=session.id, plugin_id="ctx-probe", action="survey"))
    action = json.loads(invoked.result_json)
    assert 1 <= action.pop("roll") <= 6
    assert action == {"phase": "playing", "locale": "en", "characters": ["Mira", "Captain Rhee", "Tam"], "worldRecord": None}, (
        "an action's context: the committed world (Tam committed with the turn) and the session view")
    assert output["witnessed"]["npc-rhee"] == {"turns": [], "texts": [], "more": False}, "no story yet"
    assert output["unknownCharacter"] == "history_for('npc-nobody'): no such character in ctx.world.characters"
    # The story of a turn where a character was present is what he witnessed when the next turn starts; not Mira.
    [story] = [m for m in turn.messages if m.role == resources_pb2.MESSAGE_ROLE_STORY]
    assert from_struct(story.metadata)["presentCharacterIds"] == ["npc-rhee"], from_struct(story.metadata)
    async with open_channel(scripted.addrs["scheduler"]) as channel:
        second = [event async for event in scheduler_pb2_grpc.SchedulerStub(channel).SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I wait for the tide.")]))][-1].turn_completed
    witnessed = from_struct(next(r for r in second.runtime_results if r.runtime_id == "ctx-probe/worker").output)["witnessed"]
    assert witnessed["npc-rhee"] == {"turns": [turn.id], "texts": [story.text], "more": False}
    assert witnessed["npc-mira"] == {"turns": [], "texts": [], "more": False}
    traced = [(e.event, e.runtime_id) for e in turn.hook_trace]
    assert ("PreToolUse", "ctx-probe/worker") in traced and ("PostToolUse", "ctx-probe/worker") in traced
