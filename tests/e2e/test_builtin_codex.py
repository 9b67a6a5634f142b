"""codex in the demo world on the scripted model, through the five services: the places, people, items and
rumours the turns bring up become one entry each (by category, with the turn they were first seen), a later
mention of a known one by another name adds no entry, and the panel lists them by category."""

from __future__ import annotations

import uuid

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.play import DEFAULT_WORLD
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value
from shared.ui_panels import render_text
from tests.support.builtin_plugins import SETUP_PLUGINS, story_world_plugins_except

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")

OTHERS = [*SETUP_PLUGINS, "dice-check", "inventory", "affinity", "guide", "cost-gate", "memory", "history-compaction", "world-time",
          *story_world_plugins_except("codex")]


async def _turn(stub, session_id: str, text: str) -> dict:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    events = [event async for event in stub.SubmitActions(request)]
    turn = events[-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, (text, turn.abort_reason)
    [result] = [r for r in turn.runtime_results if r.runtime_id == "codex"]
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, (text, result.reason)
    return from_struct(result.output)


async def _codex(store, session_id: str) -> dict:
    entries = {}
    for namespace in ("places", "people", "items", "rumours"):
        reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="codex", namespace=namespace))
        entries[namespace] = {entry.key: from_value(entry.value) for entry in reply.entries}
    return entries


async def test_the_codex_collects_each_discovery_once_by_category(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id=DEFAULT_WORLD, requested_plugins=["codex"], excluded_plugins=OTHERS))).session.id

        first = await _turn(stub, session_id, "I ask Mira about the missing boats.")
        # The player names Mira and a rumour; the story's scene is the inn on the harbour, and Old Tobin speaks.
        assert first["added"] == ["Mira", "Old Tobin", "The Drowned Lantern", "The harbour", "The missing boats"]
        codex = await _codex(store, session_id)
        mira = codex["people"]["mira"]
        assert mira["description"] == "The harbor-master. Sharp, tired, blames herself for the missing boats."
        assert (mira["characterId"], mira["firstSeen"], mira["lastSeen"], mira["mentions"]) == ("mira", 1, 1, 1)
        assert codex["rumours"]["missing-boats"]["description"] == "Talk of the missing boats in town; the player asked Mira about it."
        assert "drowned-lantern" in codex["places"] and "harbour" in codex["places"], "the scene the story names"
        assert "traveller" not in codex["people"], "the player's own character is no discovery"

        second = await _turn(stub, session_id, "I ask Tobin about the dark lighthouse and pick up the rusty key.")
        assert {"The lighthouse", "Rusty key"} <= set(second["added"]) and "Old Tobin" not in second["added"], "Tobin is known: no second entry"
        codex = await _codex(store, session_id)
        assert codex["people"]["old-tobin"]["characterId"] == "tobin" and codex["people"]["old-tobin"]["aliases"] == []
        # Described by the story's sentence that names it (the scripted story words it one of a few ways).
        assert "ask Tobin about the dark lighthouse and pick up the rusty key" in codex["items"]["rusty-key"]["description"]
        assert codex["places"]["lighthouse"]["firstSeen"] == 2

        # The harbour (by its other spelling) and the lighthouse are known already: no second entry for them.
        before = await _codex(store, session_id)
        third = await _turn(stub, session_id, "I walk down to the harbor and look at the lighthouse.")
        assert not {"The harbour", "The harbor", "The lighthouse"} & set(third["added"] + third["enriched"])
        after = await _codex(store, session_id)
        assert after["places"] == before["places"]
        names = [e["name"] for entries in after.values() for e in entries.values()]
        assert len(names) == len(set(names))

        panels = (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session_id, location=resources_pb2.UI_SLOT_RIGHT))).panels
        panel = next(p for p in panels if p.plugin_id == "codex")
        lines = render_text(from_struct(panel.spec), from_struct(panel.state))
        assert lines[:2] == ["Codex", "Places"] and "Rumours" in lines
        assert "The missing boats: Talk of the missing boats in town; the player asked Mira about it." in lines
        assert "Old Tobin: The innkeeper. Kind, talkative, knows every rumour in town." in lines
