"""npc-graph in the demo world on the scripted model, through the five services: the extractor commits the
relationships the turns state as versions (one open version per fact, the old one closed when the story
changes it), the retriever gives the next turns the relationships of the characters involved and their
neighbours (graph-rag@1), and the panel lists them per character."""

from __future__ import annotations

import uuid

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.play import DEFAULT_WORLD
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value
from tests.e2e.conftest import running_services
from tests.support.builtin_plugins import SETUP_PLUGINS, story_world_plugins_except

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")

# The demo world's other plugins stay out: this test is about npc-graph (demo-world gives the story its cast).
OTHERS = [*SETUP_PLUGINS, "dice-check", "inventory", "affinity", "guide", "cost-gate", "memory", "history-compaction", "world-time",
          *story_world_plugins_except("npc-graph")]


async def _turn(stub, session_id: str, text: str):
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    events = [event async for event in stub.SubmitActions(request)]
    turn = events[-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, (text, turn.abort_reason)
    results = {r.runtime_id: r for r in turn.runtime_results}
    for runtime_id in ("npc-graph/rag-retriever", "npc-graph/extractor"):
        assert results[runtime_id].status == resources_pb2.RUNTIME_STATUS_SUCCESS, (text, runtime_id, results[runtime_id].reason)
    return {runtime_id: from_struct(result.output) for runtime_id, result in results.items()}


async def _data(store, session_id: str, namespace: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="npc-graph", namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


async def test_relationships_are_versioned_retrieved_and_shown(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id=DEFAULT_WORLD, requested_plugins=["npc-graph"], excluded_plugins=OTHERS))).session.id

        first = await _turn(stub, session_id, "I watch the room. Mira distrusts Old Tobin, that much is plain.")
        assert first["npc-graph/rag-retriever"]["facts"] == [], "nothing known before the first turn"
        assert first["npc-graph/extractor"]["changed"] == [
            {"fact": "mira.trust.tobin", "subject": "Mira", "relation": "trust", "object": "Old Tobin", "state": "distrusts", "was": None}]

        second = await _turn(stub, session_id, "I ask Tobin about Sela. Sela is Tobin's daughter, he says.")
        rag = second["npc-graph/rag-retriever"]
        assert [(f["id"], f["why"]) for f in rag["focus"]][:2] == [("tobin", "named"), ("sela", "named")]
        assert rag["lines"] == ["Mira distrusts Old Tobin"], "Tobin is named: his relationship comes to the story"
        assert [f["fact"] for f in second["npc-graph/extractor"]["facts"]] == ["mira.trust.tobin", "sela.kin.tobin"]

        # The story changes a relationship: its open version is closed, a new one opens, the history stays.
        third = await _turn(stub, session_id, "I see that Mira now trusts Old Tobin.")
        assert third["npc-graph/extractor"]["changed"] == [
            {"fact": "mira.trust.tobin", "subject": "Mira", "relation": "trust", "object": "Old Tobin", "state": "trusts", "was": "distrusts"}]
        facts = await _data(store, session_id, "facts")
        trust = sorted((f for f in facts.values() if f["fact"] == "mira.trust.tobin"), key=lambda f: f["validFrom"])
        assert [(f["state"], f["validFrom"], f["validTo"]) for f in trust] == [("distrusts", 1, 3), ("trusts", 3, None)]
        assert all(sum(1 for f in facts.values() if f["fact"] == fact and f["validTo"] is None) == 1 for fact in {f["fact"] for f in facts.values()})

        # Saying the same again changes nothing.
        again = await _turn(stub, session_id, "Mira trusts Old Tobin, I think.")
        assert again["npc-graph/extractor"]["changed"] == []
        assert len(await _data(store, session_id, "facts")) == 3

        # Mira is named: her own fact first (with what it was before), then Tobin's other one (her neighbour, in the scene).
        fourth = await _turn(stub, session_id, "I ask Mira about the lighthouse.")
        rag = fourth["npc-graph/rag-retriever"]
        assert rag["focus"][0] == {"id": "mira", "name": "Mira", "why": "named"}
        assert rag["lines"] == ["Mira trusts Old Tobin (since turn 3; before: distrusts)", "Sela is the daughter of Old Tobin"]
        graph = fourth["npc-graph/extractor"]
        assert {(f["subject"], f["state"], f["object"]) for f in graph["facts"]} == {
            ("Mira", "trusts", "Old Tobin"), ("Sela", "is the daughter of", "Old Tobin")}

        # The panel: one list per character, from the session's state.
        people = await _data(store, session_id, "people")
        assert people["tobin"]["relations"] == ["Sela is the daughter of Old Tobin", "Mira trusts Old Tobin"]
        assert people["sela"]["summary"] == "Sela is the daughter of Old Tobin"
        panels = (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session_id, location=resources_pb2.UI_SLOT_RIGHT))).panels
        panel = next(p for p in panels if p.plugin_id == "npc-graph")
        state = from_struct(panel.state)
        assert set(state["data"]["people"]) == {"mira", "tobin", "sela"}
        assert "scene" in state["data"] and "facts" in state["data"]


WORLD = {
    "world.yaml": """name: Kin Harbour
description: A test harbour whose people are related.
opening: The tide is out.
pluginPolicy:
  plus: [npc-graph]
data:
  - to: contract:npc-graph.seeds@1
    source: {path: data/relationships.yaml}
""",
    "characters.yaml": """- {id: mira, name: Mira, description: The harbor-master.}
- {id: tobin, name: Old Tobin, aliases: [Tobin], description: The innkeeper.}
- {id: sela, name: Sela, description: A scholar.}
- {id: traveller, name: The traveller, type: player, description: The player.}
""",
    "data/relationships.yaml": """- {id: sela-tobin, subject: Sela, relation: kin, object: Tobin, state: is the daughter of}
- {id: mira-tobin, subject: Mira, relation: trust, object: Old Tobin, state: distrusts, evidence: An old quarrel over a boat.}
""",
}


async def test_a_world_feeds_the_relationships_it_knows_from_the_start(tmp_path) -> None:
    for name, text in WORLD.items():
        (tmp_path / "worlds" / "kin-harbour" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "worlds" / "kin-harbour" / name).write_text(text, encoding="utf-8")
    env = {"COVEL_WORLD_DIRS": str(tmp_path / "worlds")}
    async with running_services(tmp_path / "data", extra_env=env) as group, open_channel(group.addrs["scheduler"]) as channel, \
            group.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id="kin-harbour", excluded_plugins=[p for p in OTHERS if p not in ("npc-graph",)]))).session.id
        assert len(await _data(store, session_id, "seeds")) == 2, "imported with the session"
        first = await _turn(stub, session_id, "I ask Tobin about the tide.")
        assert first["npc-graph/rag-retriever"]["lines"] == ["Mira distrusts Old Tobin", "Sela is the daughter of Old Tobin"]
        facts = await _data(store, session_id, "facts")
        assert {key: (f["validFrom"], f["validTo"]) for key, f in facts.items()} == {"mira.trust.tobin@0": (0, None), "sela.kin.tobin@0": (0, None)}
        assert await _data(store, session_id, "seeds") == {}, "opened once"
        assert set(await _data(store, session_id, "people")) == {"mira", "tobin", "sela"}
