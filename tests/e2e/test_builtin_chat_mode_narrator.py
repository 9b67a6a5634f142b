"""chat-mode-narrator through the five services on the scripted model: a session that requests it tells its story
with it instead of the narrator (plan, a pre-turn function, then narrate, the plan bound to narrate and the last story read back by the
next turn's plan through the committed latest-story export), with and without a scene-cast@1 provider on stage,
with the dice receipt, streaming, settings, and a story that yields continue."""

from __future__ import annotations

import uuid

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.play import DEFAULT_WORLD
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value, to_struct
from tests.e2e.conftest import TEST_PLUGIN_DIR, running_services
from tests.support.builtin_plugins import SETUP_PLUGINS, story_world_plugins_except

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGIN = "chat-mode-narrator"
PLAN, NARRATE = f"{PLUGIN}/plan", f"{PLUGIN}/narrate"
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "chat-mode"
CONTINUING = {"segments": [{"kind": "dialogue", "speaker": "Mira", "text": "Keep walking. I will tell you on the way."}], "yield": "continue"}
SCRIPT = {"rules": [{"match": match, "slots": ["story"], "reply": {"json": CONTINUING}} for match in ("walk on with mira", "The player waits")]}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def chat_services(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("chat-mode"), plugin_dirs=(TEST_PLUGIN_DIR, FIXTURES), script=SCRIPT) as group:
        yield group


async def _session(stub, *, plugins=(PLUGIN,), settings: dict | None = None):
    request = scheduler_pb2.CreateSessionRequest(world_id=DEFAULT_WORLD, excluded_plugins=[*SETUP_PLUGINS, "memory", "history-compaction", *story_world_plugins_except()],
                                                 requested_plugins=list(plugins), approved_plugins=[p for p in plugins if p == "scene-cast-fixture"])
    for plugin_id, values in (settings or {}).items():
        request.plugin_settings[plugin_id].CopyFrom(to_struct(values))
    return (await stub.CreateSession(request)).session


async def _turn(stub, session_id: str, text: str) -> tuple[list, store_pb2.Turn]:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    events = [event async for event in stub.SubmitActions(request)]
    return events, events[-1].turn_completed


def _results(turn) -> dict:
    return {r.runtime_id: r for r in turn.runtime_results}


async def _stories(stub, session_id: str) -> list:
    return [m for m in (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session_id))).messages
            if m.role == resources_pb2.MESSAGE_ROLE_STORY]


async def test_a_session_requesting_it_tells_the_story_as_a_planned_conversation(chat_services) -> None:
    async with open_channel(chat_services.addrs["scheduler"]) as channel, chat_services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = await _session(stub, plugins=(PLUGIN, "dice-check"))
        assert PLUGIN in session.active_plugins and "narrator" not in session.active_plugins, "the narrator steps back"

        events, turn = await _turn(stub, session.id, "I push open the door of the Drowned Lantern and look around.")
        results = _results(turn)
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
        assert results[PLAN].status == resources_pb2.RUNTIME_STATUS_SUCCESS and results[NARRATE].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        assert results[NARRATE].story and not results[PLAN].story and "narrator" not in results
        plan = from_struct(results[PLAN].output)
        assert (plan["source"], plan["speakers"]) == ("none", []), "a function: nobody on stage and no story yet, nobody chosen"
        deltas = [e.narrative_delta for e in events if e.WhichOneof("event") == "narrative_delta"]
        assert deltas and {d.runtime_id for d in deltas} == {NARRATE}, "the story streams from narrate"
        story = (await _stories(stub, session.id))[-1]
        metadata = from_struct(story.metadata)
        assert story.plugin_id == PLUGIN and metadata["segments"] and metadata["yield"] == "user"
        assert any(s["kind"] == "dialogue" and s.get("speaker") for s in metadata["segments"])

        # The story was kept as the latest-story export; the next turn's plan reads it (scope: committed).
        exports = (await store.ListExports(store_pb2.ListExportsRequest(session_id=session.id, plugin_id=PLUGIN))).exports
        assert [(e.record_as, e.runtime_id) for e in exports] == [("latest-story", NARRATE)]
        exported = from_value(exports[0].value)["segments"]
        assert [(s["kind"], s.get("speaker"), s["text"]) for s in exported] == [(s["kind"], s.get("speaker"), s["text"]) for s in metadata["segments"]]

        _, turn = await _turn(stub, session.id, "I ask about the missing boats.")
        assert _results(turn)[PLAN].status == resources_pb2.RUNTIME_STATUS_SUCCESS

        assert all(r.status == resources_pb2.RUNTIME_STATUS_SUCCESS for r in turn.runtime_results), \
            [(r.runtime_id, r.reason) for r in turn.runtime_results if r.status != resources_pb2.RUNTIME_STATUS_SUCCESS]
        assert {"guide", "affinity/judge", "inventory/ledger", "world-time/advance"} <= set(_results(turn)), "the story's readers read narrate"

        # The dice receipt reaches both: the plan plans around the verdict, the story tells it.
        _, turn = await _turn(stub, session.id, "I climb onto the roof of the inn to see the harbor.")
        results = _results(turn)
        [check] = from_struct(results["dice-check/roller"].output)["checks"]
        plan = from_struct(results[PLAN].output)
        verdict = {"critical-success": "it goes better than hoped", "success": "it works", "failure": "it does not work",
                   "critical-failure": "it goes badly wrong"}[check["outcome"]]
        assert plan["outcome"] == check["outcome"] and verdict
        told = {"critical-success": "It goes better than you dared to hope.", "success": "It works, though not without effort.",
                "failure": "It does not go the way you hoped.", "critical-failure": "It goes badly wrong."}[check["outcome"]]
        assert told in (await _stories(stub, session.id))[-1].text


async def test_the_stage_cast_feeds_plan_and_narrate(chat_services) -> None:
    async with open_channel(chat_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await _session(stub, plugins=(PLUGIN, "scene-cast-fixture"), settings={PLUGIN: {"maxSpeakers": 1}})
        _, turn = await _turn(stub, session.id, "I wave at the people by the fire.")
        results = _results(turn)
        assert results["scene-cast-fixture/cast"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        plan = from_struct(results[PLAN].output)
        assert [s["name"] for s in plan["speakers"]] == ["Mira"], "only who is on stage, and at most maxSpeakers"
        assert plan["scene"] == "The Drowned Lantern"
        assert results[NARRATE].status == resources_pb2.RUNTIME_STATUS_SUCCESS

        # Without the provider the plan picks from the last story instead (tested above); here both inputs were bound.
        turns = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))).turns
        assert turns[-1].status == store_pb2.TURN_STATUS_COMMITTED


async def test_settings_are_checked_and_a_story_can_yield_continue(chat_services) -> None:
    async with open_channel(chat_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _session(stub, settings={PLUGIN: {"maxSpeakers": 9}})
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and f"plugin_settings.{PLUGIN}.maxSpeakers" in refused.value.details()

        session = await _session(stub, settings={PLUGIN: {"person": "third"}, "framework": {"maxAutoAdvance": 1}})
        turns = []
        async for event in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(text="I walk on with Mira.")])):
            if event.WhichOneof("event") == "turn_completed":
                turns.append(event.turn_completed)
        assert [t.origin for t in turns] == [resources_pb2.TURN_ORIGIN_PLAYER, resources_pb2.TURN_ORIGIN_CONTINUATION]
        assert all(_results(t)[NARRATE].status == resources_pb2.RUNTIME_STATUS_SUCCESS for t in turns)
        hooks = [(entry.runtime_id, entry.status) for t in turns for entry in t.hook_trace
                 if entry.handler_plugin_id == PLUGIN and entry.event == "PostContextAssembly"]
        assert set(hooks) == {(NARRATE, resources_pb2.HOOK_STATUS_OK)}, "the settings reached the story's prompt (the plan is a function)"


async def test_the_next_plan_reads_the_last_story_through_the_committed_export(chat_services) -> None:
    async with open_channel(chat_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await _session(stub)
        await _turn(stub, session.id, "I push open the door of the Drowned Lantern and look around.")
        metadata = from_struct((await _stories(stub, session.id))[-1].metadata)
        spoke = list(dict.fromkeys(s["speaker"] for s in metadata["segments"] if s["kind"] in ("dialogue", "action") and s.get("speaker")))
        _, turn = await _turn(stub, session.id, "I ask about the missing boats.")
        plan = from_struct(_results(turn)[PLAN].output)
        assert plan["source"] == "story" and [s["name"] for s in plan["speakers"]] == spoke[:3], "who spoke last time goes on"
        assert plan.get("scene") == metadata["cues"]["scene"]
