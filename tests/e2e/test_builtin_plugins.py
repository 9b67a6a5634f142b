"""Ten turns in the demo world with every builtin plugin on, over gRPC, on the scripted model."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.play import DEFAULT_WORLD
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value, to_struct
from tests.support.builtin_plugins import SETUP_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")

ACTIONS = (
    "I push open the door of the Drowned Lantern and look around.",
    "I ask Old Tobin about the dark lighthouse and thank him for the warm fire.",
    "I pick up the rusty key from the table and light the lantern.",
    "I climb onto the roof of the inn to see the harbor.",
    "I ask Mira about the missing boats.",
    "I give one copper coin to Old Tobin for a bowl of soup.",
    "I sneak past the sleeping dog into the back room.",
    "I rest by the fire for a while.",
    "I ask Sela what she knows about the lens.",
    "I remember the rusty key and try it on the cellar door.",
)


async def _session(stub, settings: dict | None = None) -> str:
    """A session in the demo world: its plugins and settings presets come from the world package (without its
    setup, which tests/e2e/test_setup_builtins.py plays, so the first action is the first story turn)."""
    request = scheduler_pb2.CreateSessionRequest(world_id=DEFAULT_WORLD, excluded_plugins=SETUP_PLUGINS)
    for plugin_id, values in (settings or {}).items():
        request.plugin_settings[plugin_id].CopyFrom(to_struct(values))
    return (await stub.CreateSession(request)).session.id


async def _turn(stub, session_id: str, text: str):
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    events = [event async for event in stub.SubmitActions(request)]
    return events[-1].turn_completed


async def _data(store, session_id: str, plugin_id: str, namespace: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=plugin_id, namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


async def test_ten_turns_with_every_builtin_plugin(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session_id = await _session(stub, {"history-compaction": {"budgetChars": 2500, "keepTurns": 3}})
        turns = []
        for number, action in enumerate(ACTIONS):
            if number == len(ACTIONS) - 1:
                # Before the last turn, the memories of the earlier ones have been extracted (detached jobs).
                for _ in range(100):
                    if len(await _data(store, session_id, "memory", "memories")) >= number:
                        break
                    await asyncio.sleep(0.1)
            turn = await _turn(stub, session_id, action)
            assert turn.status == store_pb2.TURN_STATUS_COMMITTED, (action, turn.abort_reason)
            for result in turn.runtime_results:
                # Skipped on purpose: a detached job (it runs after the commit), story-events' planner when no event fired.
                skipped = result.status == resources_pb2.RUNTIME_STATUS_SKIPPED and (
                    "detached" in result.reason or result.runtime_id == "story-events/plot")
                assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS or skipped, (action, result.runtime_id, result.status, result.reason)
            turns.append(turn)
        outputs = [{r.runtime_id: from_struct(r.output) for r in turn.runtime_results} for turn in turns]
        ran = {runtime_id for output in outputs for runtime_id in output}
        assert {"narrator", "dice-check/roller", "dice-check/recorder", "inventory/stock", "inventory/ledger", "inventory/apply",
                "affinity/judge", "affinity/apply", "guide", "world-time/context", "world-time/advance",
                # The story world the demo turns on besides (docs/builtin-plugins.md).
                "inventory/vocabulary", "core-quest/log", "core-quest/vocabulary", "world-ir", "npc-graph/rag-retriever",
                "npc-graph/extractor", "codex", "story-events/intake", "story-events/evaluate", "scene-stage/seed", "scene-stage/cast",
                "scene-stage/resolver", "soundtrack/scene", "soundtrack/cue", "character-blueprint/presence"} <= ran

        # dice-check: the climb (turn 4) and the sneak (turn 7) were rolled and recorded.
        assert outputs[3]["dice-check/roller"]["checks"][0]["skill"] == "athletics"
        assert outputs[6]["dice-check/roller"]["checks"][0]["skill"] == "stealth"
        assert outputs[0]["dice-check/roller"] == {"checks": []}
        checks = await _data(store, session_id, "dice-check", "checks")
        assert set(checks) == {"t4-1", "t7-1"}
        tally = (await _data(store, session_id, "dice-check", "tally"))["all"]
        assert tally["checks"] == 2 and tally["successes"] + tally["failures"] == 2

        # inventory: stocked from the world preset, the key picked up, the lantern lit, a coin given.
        items = await _data(store, session_id, "inventory", "items")
        assert items["rusty-key"]["quantity"] == 1
        assert items["brass-lantern"]["equipped"] is True
        assert items["copper-coin"]["quantity"] == 2
        assert "worn-map" in items

        # world-time: starts at the preset 19:30, 20 min a turn ("sneak past the sleeping dog" is not sleep).
        assert outputs[0]["world-time/context"]["time"] == "19:30"
        clock = (await _data(store, session_id, "world-time", "clock"))["now"]
        assert clock["minutes"] == 19 * 60 + 30 + 8 * 20 + 45 + 60  # the roof climb takes 45, the rest 60

        # affinity: Old Tobin was thanked; every score within bounds.
        scores = await _data(store, session_id, "affinity", "scores")
        assert scores["tobin"]["score"] > 0 and all(-100 <= s["score"] <= 100 for s in scores.values())

        # The demo world package: its cast and dimensions are in the world model from the start, and stories name them.
        world_model = await store.GetWorld(store_pb2.GetWorldRequest(session_id=session_id))
        assert {c.id: c.plugin_id for c in world_model.characters} == {"mira": "world:demo-world", "tobin": "world:demo-world",
                                                                        "sela": "world:demo-world", "traveller": "world:demo-world"}
        assert {d.id: from_value(d.value) for d in world_model.dimensions} == {"lighthouse": "dark", "missing-boats": 2}
        story_messages = [m for m in (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session_id))).messages
                          if m.role == resources_pb2.MESSAGE_ROLE_STORY]
        assert any(from_struct(m.metadata).get("presentCharacterIds") for m in story_messages)

        # guide: 3 to 6 suggestions every turn.
        assert all(3 <= len(output["guide"]["suggestions"]) <= 6 for output in outputs)

        # history-compaction: the older turns were folded into a summary the prompts read.
        messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session_id))).messages
        summaries = [m for m in messages if m.role == resources_pb2.MESSAGE_ROLE_SUMMARY]
        assert summaries and summaries[-1].plugin_id == "history-compaction"
        # The world's opening comes first: it is the first story message of the log.
        assert summaries[0].text.startswith("The evening coach leaves you at the harbor of Saltmere.\nThe player: I push open the door of the Drowned Lantern")

        # memory: every turn's detached extraction commits after its turn, and the last turn's story
        # found an earlier memory through memory-search (the scripted story recalls the best hit).
        memories: dict = {}
        for _ in range(100):
            memories = await _data(store, session_id, "memory", "memories")
            if len(memories) >= len(ACTIONS):
                break
            await asyncio.sleep(0.1)
        assert len(memories) == len(ACTIONS), sorted(memories)
        assert all(memory["kind"] == "event" and memory["text"].startswith("The player chose to") for memory in memories.values())
        # (Each memory comes back once: the key's in the last turn, or in a turn before it once it was extracted.)
        recalled = [turn.narrative for turn in turns[3:] if "You remember: The player chose to pick up the rusty key" in turn.narrative]
        assert len(recalled) == 1, [turn.narrative for turn in turns]


async def test_cost_gate_soft_cap_keeps_only_the_story_and_hard_cap_stops(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        soft = await _session(stub, {"cost-gate": {"softCapTokens": 1, "hardCapTokens": 10_000_000}})
        first = await _turn(stub, soft, "I look around.")
        assert "guide" in [r.runtime_id for r in first.runtime_results]
        second = await _turn(stub, soft, "I look around again.")
        assert second.status == store_pb2.TURN_STATUS_COMMITTED
        assert [r.runtime_id for r in second.runtime_results] == ["narrator"], "past the soft cap only the story runs"

        hard = await _session(stub, {"cost-gate": {"softCapTokens": 10_000_000, "hardCapTokens": 50}})
        counted = await _turn(stub, hard, "I look around.")
        assert counted.status == store_pb2.TURN_STATUS_COMMITTED
        # cost-gate only watches model calls (observe=True): they reach it gathered, before TurnStop, in the turn's trace.
        watched = [e.event for e in counted.hook_trace if e.handler_plugin_id == "cost-gate"]
        assert watched.count("PostLLMResponse") >= 2 and watched.index("PostLLMResponse") > watched.index("PreSchedule")
        stopped = await _turn(stub, hard, "I look around again.")
        assert stopped.status == store_pb2.TURN_STATUS_ABORTED
        assert "hard cap of 50" in stopped.abort_reason
