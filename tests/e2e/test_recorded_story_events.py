"""story-events/plot against recorded real-model replies, through the five services (tests/e2e/recorded_model.py),
in the fixture world Bellwater (tests/fixtures/living-worlds/bellwater).

Checks that the planner asks the model nothing while no event fires; the request it sends when one does (its
RUNTIME.md prompt or the zh variant, the fired event's cue as its only input, story-event.plan@1 as the response
format, no tools, the story so far); that the narrator's request carries the cue and the recorded plan (and the
world's rules, living-world-rules' segment); that no request of any runtime ever holds anything of an event that
has not fired; and that a plan breaking the contract fails the planner with a concealed reason, commits nothing,
and the story is still told from the cue."""

from __future__ import annotations

import json
import uuid

import jsonschema
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value
from tests.e2e.recorded_model import Request, recorded, recorded_services
from tests.support.builtin_plugins import SETUP_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = REPO_ROOT / "plugins"
WORLDS = REPO_ROOT / "tests" / "fixtures" / "living-worlds"
PLOT = "story-events/plot"
# Bellwater with the story, the events and the rules only: the other model-driven plugins are left out.
LEFT_OUT = [*SETUP_PLUGINS, "memory", "history-compaction", "world-time"]
TURN_1, TURN_2 = "I trim the wick of the lamp.", "I look out at the harbour."
TURN_ZH_1, TURN_ZH_2 = "我修剪灯芯。", "我望向港口。"
FERRY = ("Ysolde's ferry bumps against the pier out of the fog, a day early. She hands the keeper a letter sealed with black wax "
         "and will not say who sent it.")
FERRY_ZH = "伊索尔德的渡船从雾里出来，撞上栈桥，早到了一天。她把一封用黑色封蜡封着的信交给看守人，却不肯说是谁寄的。"
# Events that do not fire in these turns: nothing of them may reach any request.
UNFIRED = ("The letter is from the keeper before Ash", "bell must be rung at midnight", "Brann hurries up the path",
           "Beneath the pier a second bell", "This never happens", "letter-read", "gale-warning", "drowned-bell", "broken-chain",
           "The black seal", "The wind rises", "The drowned bell", "信是阿什之前", "沉没的钟", "栈桥下的深水", "风向一转")


def body(path: str) -> str:
    return (PLUGINS / path).read_text(encoding="utf-8").split("---", 2)[2].strip()


def schema(path: str) -> dict:
    return json.loads((PLUGINS / path).read_text(encoding="utf-8"))


def preamble(runtime_id: str, plugin_id: str, language: str = "English") -> str:
    return f'You are the runtime "{runtime_id}" of the plugin "{plugin_id}" in an interactive story.\nWrite everything the player reads in {language}.'


def inputs_of(request: Request) -> dict:
    return json.loads(request.system.split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])


def chat(request: Request) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in request.body["messages"][1:]]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    env = {"COVEL_RANDOM_SEED": "recorded", "COVEL_WORLD_DIRS": str(WORLDS)}
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded-events"), [PLUGINS], env) as running:
        yield running


async def new_session(stub, locale: str = "en") -> str:
    request = scheduler_pb2.CreateSessionRequest(world_id="bellwater", locale=locale, excluded_plugins=LEFT_OUT)
    return (await stub.CreateSession(request)).session.id


async def play(stub, session_id: str, text: str) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="act", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def stored_turn(store, session_id: str, turn_id: str) -> store_pb2.Turn:
    return (await store.GetTurn(store_pb2.GetTurnRequest(session_id=session_id, turn_id=turn_id))).turn


def results(turn) -> dict:
    return {r.runtime_id: r for r in turn.runtime_results}


async def fired(store, session_id: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="story-events", namespace="fired"))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


def assert_nothing_unfired(model) -> None:
    every = json.dumps([request.body for request in model.requests], ensure_ascii=False)
    for text in UNFIRED:
        assert text not in every, text


async def test_the_planner_asks_only_when_an_event_fires_and_the_story_stages_it(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub)
    model.requests.clear()
    model.replies = {"narrator": [recorded("story-events-narrator-en-1")]}
    quiet = await play(stub, session_id, TURN_1)
    assert quiet.status == store_pb2.TURN_STATUS_COMMITTED, quiet.abort_reason
    assert results(quiet)[PLOT].status == resources_pb2.RUNTIME_STATUS_SKIPPED and model.of(PLOT) == [], "nothing fired: no model call"
    first_narrator = model.of("narrator")[0]
    assert inputs_of(first_narrator) == {"storyEvent": {"value": {"turn": 1, "events": []}}, "storyEventPlan": {"value": {"events": []}}}
    # living-world-rules' segment: the world's rules in the story's prompt.
    assert "The lighthouse must never go dark two nights running." in first_narrator.system

    model.replies = {"narrator": [recorded("story-events-narrator-en-2")], PLOT: [recorded("story-events-plot-en-1")]}
    turn = await play(stub, session_id, TURN_2)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    assert results(turn)[PLOT].status == resources_pb2.RUNTIME_STATUS_SUCCESS

    # plot: preamble, its own prompt, the fired event's cue as its one input, its contract as the response format, no tools.
    [plot] = model.of(PLOT)
    assert plot.system.startswith(preamble(PLOT, "story-events") + "\n\n" + body("story-events/runtimes/plot/RUNTIME.md"))
    assert inputs_of(plot) == {"cue": {"value": {"turn": 2, "events": [{"id": "ferry-arrives", "title": "The early ferry", "cue": FERRY}]}}}
    wanted = plot.body["response_format"]
    assert wanted["type"] == "json_schema" and wanted["json_schema"]["schema"] == schema("story-events/schemas/plan.schema.json")
    assert "tools" not in plot.body
    roles = [role for role, _ in chat(plot)]
    assert roles[-1] == "user" and chat(plot)[-1][1] == TURN_2 and TURN_1 in [text for _, text in chat(plot)], "the last turns of the story"

    # narrator: the cue and the recorded plan as its inputs, in this turn.
    narrator = model.of("narrator")[-1]
    assert inputs_of(narrator) == {
        "storyEvent": {"value": {"turn": 2, "events": [{"id": "ferry-arrives", "title": "The early ferry", "cue": FERRY}]}},
        "storyEventPlan": {"value": json.loads(recorded("story-events-plot-en-1")["choices"][0]["message"]["content"])},
    }
    assert "runtime-inputs.storyEvent lists events" in narrator.system
    assert "Ysolde's ferry, a day early" in turn.narrative

    # What committed: the fire record (no cue); the plan is the planner's output in the store's full record only.
    assert await fired(store, session_id) == {"ferry-arrives": {"id": "ferry-arrives", "title": "The early ferry", "count": 1, "firstTurn": 2, "lastTurn": 2}}
    plan = from_struct(results(await stored_turn(store, session_id, turn.id))[PLOT].output)
    jsonschema.validate(plan, schema("story-events/schemas/plan.schema.json"))
    assert plan["events"][0]["characters"] == ["Ysolde"]
    assert not from_struct(results(turn)[PLOT].output), "concealed from the client"
    assert_nothing_unfired(model)


async def test_a_chinese_session_plans_from_the_zh_prompt_and_the_translated_cue(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub, "zh")
    model.requests.clear()
    model.replies = {"narrator": [recorded("story-events-narrator-zh-1")]}
    assert (await play(stub, session_id, TURN_ZH_1)).status == store_pb2.TURN_STATUS_COMMITTED
    model.replies = {"narrator": [recorded("story-events-narrator-zh-2")], PLOT: [recorded("story-events-plot-zh-1")]}
    turn = await play(stub, session_id, TURN_ZH_2)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    [plot] = model.of(PLOT)
    assert plot.system.startswith(preamble(PLOT, "story-events", "Simplified Chinese") + "\n\n" + body("story-events/runtimes/plot/RUNTIME.zh.md"))
    assert inputs_of(plot) == {"cue": {"value": {"turn": 2, "events": [{"id": "ferry-arrives", "title": "提早来的渡船", "cue": FERRY_ZH}]}}}
    narrator = model.of("narrator")[-1]
    assert "runtime-inputs.storyEvent 列出事件时" in narrator.system and "灯塔绝不能连续两夜熄灭。" in narrator.system
    assert inputs_of(narrator)["storyEventPlan"]["value"]["events"][0]["characters"] == ["伊索尔德"]
    assert "伊索尔德的渡船" in turn.narrative
    assert_nothing_unfired(model)


async def test_a_plan_that_breaks_the_contract_fails_the_planner_and_the_story_goes_on_from_the_cue(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub)
    model.replies = {"narrator": [recorded("story-events-narrator-en-1")]}
    assert (await play(stub, session_id, TURN_1)).status == store_pb2.TURN_STATUS_COMMITTED
    model.requests.clear()
    model.replies = {"narrator": [recorded("story-events-narrator-en-2")], PLOT: [recorded("story-events-plot-bad-beats")]}
    turn = await play(stub, session_id, TURN_2)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    plot = results(turn)[PLOT]
    assert plot.status == resources_pb2.RUNTIME_STATUS_FAILED and plot.concealed
    assert "beats" not in plot.reason and "ferry" not in plot.reason.lower(), "a concealed runtime's reason is a generic one for clients"
    stored = results(await stored_turn(store, session_id, turn.id))[PLOT]
    assert stored.status == "failed" and "beats" in stored.reason, "the real reason is kept in the store's record"
    assert len(model.of(PLOT)) == 2, "one repair attempt, then it fails"
    narrator = model.of("narrator")[-1]
    assert [e["id"] for e in inputs_of(narrator)["storyEvent"]["value"]["events"]] == ["ferry-arrives"] and "storyEventPlan" not in inputs_of(narrator)
    assert results(turn)["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS and "Ysolde" in turn.narrative
    # The event fired all the same (evaluate's record commits with the story); it will not fire again.
    assert (await fired(store, session_id))["ferry-arrives"]["count"] == 1


async def test_a_turn_whose_story_fails_commits_no_fire_and_the_event_fires_when_the_turn_is_played_again(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub)
    model.replies = {"narrator": [recorded("story-events-narrator-en-1")]}
    assert (await play(stub, session_id, TURN_1)).status == store_pb2.TURN_STATUS_COMMITTED
    model.replies = {"narrator": [recorded("provider-error-400")], PLOT: [recorded("story-events-plot-en-1")]}
    failed = await play(stub, session_id, TURN_2)
    assert failed.status == store_pb2.TURN_STATUS_FAILED and results(failed)["story-events/evaluate"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    assert await fired(store, session_id) == {}, "the ferry's fire did not commit without its story"
    model.requests.clear()
    model.replies = {"narrator": [recorded("story-events-narrator-en-2")], PLOT: [recorded("story-events-plot-en-1")]}
    again = await play(stub, session_id, TURN_2)
    assert again.status == store_pb2.TURN_STATUS_COMMITTED, again.abort_reason
    assert [e["id"] for e in inputs_of(model.of("narrator")[-1])["storyEvent"]["value"]["events"]] == ["ferry-arrives"]
    assert (await fired(store, session_id))["ferry-arrives"] == {"id": "ferry-arrives", "title": "The early ferry", "count": 1, "firstTurn": 2, "lastTurn": 2}
