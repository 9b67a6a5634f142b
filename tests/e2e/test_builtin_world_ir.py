"""world-ir in the demo world on the scripted model, through the five services: after each story it records
the characters, relations, events and clues with stable ids and the turns that saw them, names items and
quests the way inventory and core-quest publish them (world-ir.vocabulary@1, every provider), and answers
world-ir-provider@1."""

from __future__ import annotations

import uuid

import jsonschema
import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.play import DEFAULT_WORLD
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value
from tests.support.builtin_plugins import SETUP_PLUGINS, story_world_plugins_except

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
SCHEMAS = REPO_ROOT / "plugins" / "world-ir" / "schemas"

ACTIONS = (
    "I ask Old Tobin about the dark lighthouse and thank him for the warm fire.",
    "I pick up the rusty key from the table.",
    "I promise Mira I will find the missing boats.",
    "I search the harbor for the missing boats with the rusty key in my pocket.",
    "I thank Old Tobin again for the soup.",
)


async def _turn(stub, session_id: str, text: str):
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def _data(store, session_id: str, plugin_id: str, namespace: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=plugin_id, namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


def _schema(name: str) -> dict:
    import json
    return json.loads((SCHEMAS / name).read_text(encoding="utf-8"))


async def test_facts_with_stable_ids_named_by_every_vocabulary(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        request = scheduler_pb2.CreateSessionRequest(world_id=DEFAULT_WORLD, excluded_plugins=[*SETUP_PLUGINS, *story_world_plugins_except("world-ir", "core-quest")],
                                                     requested_plugins=["world-ir", "core-quest"])
        session = (await stub.CreateSession(request)).session
        assert {"world-ir", "core-quest", "inventory"} <= set(session.active_plugins)
        facts, turns = [], []
        for action in ACTIONS:
            turn = await _turn(stub, session.id, action)
            assert turn.status == store_pb2.TURN_STATUS_COMMITTED, (action, turn.abort_reason)
            results = {r.runtime_id: r for r in turn.runtime_results}
            assert results["world-ir"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, (action, results["world-ir"].reason)
            facts.append(from_struct(results["world-ir"].output))
            turns.append(turn)
        for value in facts:
            jsonschema.validate(value, _schema("facts.schema.json"))
        first = facts[0]["turn"]
        assert [f["turn"] - first for f in facts] == [0, 1, 2, 3, 4]

        # Characters: the world's ids (Old Tobin is `tobin`, the player's character `traveller`), the turns that saw them.
        characters = await _data(store, session.id, "world-ir", "characters")
        assert characters["tobin"]["world"] is True and characters["tobin"]["name"] == "Old Tobin"
        assert characters["tobin"]["firstSeen"] == first and characters["tobin"]["lastSeen"] == first + 4
        assert characters["tobin"]["turns"] >= 2
        assert characters["mira"]["firstSeen"] <= first + 2
        assert "traveller" in characters
        relations = await _data(store, session.id, "world-ir", "relations")
        assert relations["traveller-thanked-tobin"]["from"] == "traveller" and relations["traveller-thanked-tobin"]["to"] == "tobin"
        assert relations["traveller-thanked-tobin"]["firstSeen"] == first and relations["traveller-thanked-tobin"]["lastSeen"] == first + 4
        assert relations["traveller-promised-to-help-mira"]["firstSeen"] == first + 2

        # Events name the items and quests by the vocabularies of the same turn (inventory and core-quest both read).
        events = await _data(store, session.id, "world-ir", "events")
        assert set(events) == {f"t{first + n}-1" for n in range(5)}
        key_event = events[f"t{first + 1}-1"]
        assert {"source": "inventory", "kind": "item", "id": "rusty-key", "name": "rusty key"} in key_event["terms"]
        search = events[f"t{first + 3}-1"]
        assert {"source": "core-quest", "kind": "quest", "id": "find-the-missing-boats", "name": "Find the missing boats"} in search["terms"]
        assert {"source": "inventory", "kind": "item", "id": "rusty-key", "name": "rusty key"} in search["terms"]
        assert facts[3]["terms"] == search["terms"]
        for namespace, schema in (("characters", "character.schema.json"), ("relations", "relation.schema.json"),
                                  ("events", "event.schema.json"), ("clues", "clue.schema.json")):
            for record in (await _data(store, session.id, "world-ir", namespace)).values():
                jsonschema.validate(record, _schema(schema))

        # The panel draws the people and the clues.
        panels = (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session.id))).panels
        state = from_struct(next(p for p in panels if p.plugin_id == "world-ir").state)
        assert "tobin" in state["data"]["characters"]


async def test_without_vocabulary_providers_world_ir_still_runs(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        request = scheduler_pb2.CreateSessionRequest(world_id=DEFAULT_WORLD, excluded_plugins=[*SETUP_PLUGINS, "inventory", *story_world_plugins_except("world-ir")],
                                                     requested_plugins=["world-ir"])
        session = (await stub.CreateSession(request)).session
        assert "inventory" not in session.active_plugins and "core-quest" not in session.active_plugins
        turn = await _turn(stub, session.id, "I pick up the rusty key and thank Old Tobin.")
        result = next(r for r in turn.runtime_results if r.runtime_id == "world-ir")
        assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
        value = from_struct(result.output)
        assert value["terms"] == [] and "tobin" in [c["id"] for c in value["characters"]]


async def test_the_ten_demo_turns_with_world_ir_and_core_quest_on(services) -> None:
    """What the demo world would play with both turned on: every runtime succeeds, and the story's memory-search
    still recalls the memory of the key (world-ir's events and clues are searchable too)."""
    import asyncio

    from tests.e2e.test_builtin_plugins import ACTIONS as DEMO_ACTIONS

    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        request = scheduler_pb2.CreateSessionRequest(world_id=DEFAULT_WORLD, excluded_plugins=[*SETUP_PLUGINS, *story_world_plugins_except("world-ir", "core-quest")],
                                                     requested_plugins=["world-ir", "core-quest"])
        session = (await stub.CreateSession(request)).session
        last, stories = None, []
        for number, action in enumerate(DEMO_ACTIONS):
            if number == len(DEMO_ACTIONS) - 1:
                for _ in range(100):
                    if len(await _data(store, session.id, "memory", "memories")) >= number:
                        break
                    await asyncio.sleep(0.1)
            last = await _turn(stub, session.id, action)
            stories.append(last.narrative)
            assert last.status == store_pb2.TURN_STATUS_COMMITTED, (action, last.abort_reason)
            for result in last.runtime_results:
                detached = result.runtime_id == "memory/extract" and "detached" in result.reason
                assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS or detached, (action, result.runtime_id, result.reason)
        # Each memory comes back once: in the last turn, or in one before it once it was extracted.
        assert sum("You remember: The player chose to pick up the rusty key" in story for story in stories[3:]) == 1, stories
        events = await _data(store, session.id, "world-ir", "events")
        assert len(events) == len(DEMO_ACTIONS)
