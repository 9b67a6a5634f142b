"""A tool's and an action's context (services/hooks/tool_contexts.py): the world and session views the scheduler sent,
frozen, with the call's own proposals in later reads; a random source COVEL_RANDOM_SEED makes repeat."""

from __future__ import annotations

import asyncio

import pytest

from covel.hooks.v1 import hooks_pb2
from services.hooks.tool_contexts import plugin_context
from shared.structs import to_struct

CONTEXT = hooks_pb2.HookContext(session_id="s1", turn_id="t1", runtime_id="p/r", logical_turn=3)
WORLD = {"characterSchema": {"types": ["npc"], "attributes": {}}, "characters": [{"id": "npc-a", "name": "Ada", "version": 1}],
         "dimensions": {}, "seats": [], "worldRecord": {"id": "saltmere", "name": "Saltmere"}}
VIEW = {"phase": "playing", "completedPlayerTurns": 2, "locale": "en", "setupRuntimes": {}}


def tool_request(call_id: str = "c1") -> hooks_pb2.CallToolRequest:
    return hooks_pb2.CallToolRequest(context=CONTEXT, plugin_id="p", name="roll", call_id=call_id,
                                     world=to_struct(WORLD), session_view=to_struct(VIEW))


def draws(call_id: str) -> list[int]:
    context = plugin_context(CONTEXT, "p", request=tool_request(call_id), random_key=f"p/r:p/roll:{call_id}")
    return [context.random.int(1, 1_000_000) for _ in range(5)]


def test_a_seeded_tool_call_draws_the_same_numbers_each_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COVEL_RANDOM_SEED", "42")
    assert draws("c1") == draws("c1")
    assert draws("c1") != draws("c2"), "another call draws its own numbers"


def test_the_world_and_session_views_are_the_callers_frozen_and_the_calls_proposals_show() -> None:
    context = plugin_context(CONTEXT, "p", request=tool_request())
    world = context.world
    assert world is not None and [c["name"] for c in world.characters] == ["Ada"] and world.worldRecord["name"] == "Saltmere"
    with pytest.raises(TypeError):
        world.characters[0]["name"] = "Eve"
    first = world.characters
    context.propose("character.upsert", {"characterId": "npc-b", "expectedVersion": 0, "character": {"name": "Bo"}})
    assert [c["name"] for c in world.characters] == ["Ada", "Bo"] and [c["name"] for c in first] == ["Ada"]
    assert asyncio.run(context.store.get_session()) == VIEW


def test_a_call_without_views_has_no_world_and_its_store_says_why() -> None:
    context = plugin_context(CONTEXT, "p")
    assert context.world is None
    with pytest.raises(LookupError, match="this call has no session"):
        asyncio.run(context.store.get_session())
