"""story-events through the five services, on the scripted model, in the fixture world Bellwater
(tests/fixtures/living-worlds/bellwater): its hidden events fire when their conditions hold (a turn count and a
dimension, a flag and the player's words, a repeatable one), each once, staged by the narrator from the cue and
plot's plan in the same turn; and nothing of an event that has not fired reaches a client (turn stream, turn
records, messages, panels) or a prompt (the system prompt of every model call whose hooks a client may see, reported
by the event-key probe; the concealed planner's own prompt is checked by test_recorded_story_events.py)."""

from __future__ import annotations

import json
import uuid

import pytest
import pytest_asyncio
from google.protobuf.json_format import MessageToJson

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value
from tests.e2e.conftest import running_services
from tests.support.builtin_plugins import SETUP_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")
WORLDS = REPO_ROOT / "tests" / "fixtures" / "living-worlds"
PROBE = "event-key-probe"  # its PreLLMCall hook reports each model call's system prompt in the turn stream
RUNTIMES = ("story-events/intake", "story-events/evaluate", "story-events/plot")
ACTIONS = ("I trim the wick of the lamp.", "I look out at the harbour.", "I break the seal of the letter.",
           "A storm is coming, I can feel it.", "The storm again, louder.")
FIRES = ([], ["ferry-arrives"], ["letter-read"], ["gale-warning"], [])
# Never fire in these turns: nothing of them may show anywhere.
SECRETS = ("Beneath the pier a second bell", "drowned village", "drowned-bell", "The drowned bell", "This never happens", "broken-chain")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def bellwater(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("story-events"), extra_env={"COVEL_WORLD_DIRS": str(WORLDS)}) as group:
        yield group


async def play(stub, session_id: str, text: str):
    """One turn: its stream's events, and the system prompt of every model call by runtime (the probe's reports)."""
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="act", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    events = [event async for event in stub.SubmitActions(request)]
    prompts: dict[str, list[str]] = {}
    for event in events:
        if event.WhichOneof("event") == "hook" and event.hook.event == "PreLLMCall" and event.hook.message.startswith("{"):
            prompts.setdefault(event.hook.runtime_id, []).append(json.loads(event.hook.message)["system"])
    return events, prompts


def inputs_of(system: str) -> dict:
    """The <runtime-inputs> block of a system prompt."""
    start = system.index("<runtime-inputs>") + len("<runtime-inputs>")
    return json.loads(system[start:system.index("</runtime-inputs>", start)])


async def store_data(store, session_id: str, namespace: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="story-events", namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


async def test_hidden_events_fire_once_when_their_conditions_hold_and_nothing_else_shows(bellwater) -> None:
    async with open_channel(bellwater.addrs["scheduler"]) as channel, bellwater.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id="bellwater", requested_plugins=[PROBE], approved_plugins=[PROBE], excluded_plugins=SETUP_PLUGINS))).session
        assert {"story-events", "living-world-rules"} <= set(session.active_plugins)
        assert set(await store_data(store, session.id, "_hidden.events")) == {"ferry-arrives", "letter-read", "gale-warning", "drowned-bell", "broken-chain"}

        streams, prompts, turns = [], [], []
        for text in ACTIONS:
            events, seen = await play(stub, session.id, text)
            turn = events[-1].turn_completed
            assert turn.status == resources_pb2.TURN_STATUS_COMMITTED, (text, turn.abort_reason)
            streams.append(events)
            prompts.append(seen)
            turns.append(turn)

        for number, (turn, seen, fires) in enumerate(zip(turns, prompts, FIRES, strict=True), start=1):
            results = {r.runtime_id: r for r in turn.runtime_results}
            assert set(RUNTIMES) <= set(results), number
            assert results["story-events/intake"].status == results["story-events/evaluate"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
            # Concealed: the client's record has no output of them, whatever fired.
            for runtime_id in RUNTIMES:
                assert results[runtime_id].concealed and not from_struct(results[runtime_id].output), (number, runtime_id)
            plot = results["story-events/plot"]
            narrator_inputs = inputs_of(seen["narrator"][0])
            cue = narrator_inputs["storyEvent"]["value"]
            assert [event["id"] for event in cue["events"]] == fires and cue["turn"] == number
            # Concealed: not even its hook events reach the turn stream (the recorded test reads its prompt).
            assert "story-events/plot" not in seen
            if fires:
                assert plot.status == resources_pb2.RUNTIME_STATUS_SUCCESS, "the planner ran"
                plan = narrator_inputs["storyEventPlan"]["value"]
                assert [event["id"] for event in plan["events"]] == fires and plan["events"][0]["beats"]
            else:
                assert plot.status == resources_pb2.RUNTIME_STATUS_SKIPPED, "no model call"
                assert narrator_inputs["storyEventPlan"]["value"] == {"events": []}

        # The ferry: the cue the world wrote, in the narrator's prompt of the turn it fired, and the plan's characters.
        ferry = inputs_of(prompts[1]["narrator"][0])["storyEvent"]["value"]["events"][0]
        assert ferry["title"] == "The early ferry" and ferry["cue"].startswith("Ysolde's ferry bumps against the pier")
        assert "Ysolde" in inputs_of(prompts[1]["narrator"][0])["storyEventPlan"]["value"]["events"][0]["characters"]
        assert "bell must be rung at midnight" in prompts[2]["narrator"][0] and "bell must be rung at midnight" not in json.dumps(prompts[:2])

        # The record: each fired once (the gale is repeatable, but its cooldown kept turn 5 quiet); the flag the ferry set.
        fired = await store_data(store, session.id, "fired")
        assert fired == {
            "ferry-arrives": {"id": "ferry-arrives", "title": "The early ferry", "count": 1, "firstTurn": 2, "lastTurn": 2},
            "letter-read": {"id": "letter-read", "title": "The black seal", "count": 1, "firstTurn": 3, "lastTurn": 3},
            "gale-warning": {"id": "gale-warning", "title": "The wind rises", "count": 1, "firstTurn": 4, "lastTurn": 4},
        }
        assert set(await store_data(store, session.id, "_hidden.flags")) == {"letter-delivered"}
        status = (await store_data(store, session.id, "_hidden.intake"))["status"]
        assert status["valid"] == ["drowned-bell", "ferry-arrives", "gale-warning", "letter-read"]
        assert status["invalid"] == [{"id": "broken-chain", "field": "when.fired", "problem": "no event 'no-such-event' is declared"}]

        # The store keeps the full record (for retries); evaluate's output there is the cue.
        stored = await store.GetTurn(store_pb2.GetTurnRequest(session_id=session.id, turn_id=turns[1].id))
        evaluate = next(r for r in stored.turn.runtime_results if r.runtime_id == "story-events/evaluate")
        assert [event["id"] for event in from_struct(evaluate.output)["events"]] == ["ferry-arrives"]

        # What a client can read: nothing of the events that never fired, anywhere.
        listed = await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))
        messages = await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))
        panels = await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session.id))
        plugins = await stub.GetSessionPlugins(scheduler_pb2.GetSessionPluginsRequest(session_id=session.id))
        got = [await stub.GetTurn(scheduler_pb2.GetTurnRequest(session_id=session.id, turn_id=turn.id)) for turn in turns]
        seen_by_clients = "\n".join([*(MessageToJson(event) for events in streams for event in events), MessageToJson(listed),
                                     MessageToJson(messages), MessageToJson(panels), MessageToJson(plugins), *map(MessageToJson, got)])
        every_prompt = json.dumps(prompts, ensure_ascii=False)
        for secret in SECRETS:
            assert secret not in seen_by_clients, secret
            assert secret not in every_prompt, secret
        assert "The letter is from the keeper before Ash" not in "\n".join(
            MessageToJson(event) for events in streams[:2] for event in events), "an event that had not fired yet"
