"""chat-mode-narrator against recorded real-model replies, through the five services: its plan is a pre-turn function
(no model call) choosing who may speak; the request narrate sends (preamble, its prompt and zh variant, the settings
rules, the inputs: the plan bound to narrate, the dice receipt; the story contract, streaming, tools) and what the
recorded answers commit; the next turn's plan chooses who spoke in the last story."""

from __future__ import annotations

import json
import uuid

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from covel_cli.play import DEFAULT_WORLD
from services.scheduler.contracts import kernel_contract_schema
from shared.settings import REPO_ROOT
from shared.structs import from_struct, to_struct
from tests.e2e.recorded_model import Request, recorded, recorded_services
from tests.support.builtin_plugins import SETUP_PLUGINS, story_world_plugins_except

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = REPO_ROOT / "plugins"
PLUGIN = "chat-mode-narrator"
PLAN, NARRATE = f"{PLUGIN}/plan", f"{PLUGIN}/narrate"
# Only the story engine and the dice talk to the model here (the other builtins have their own recorded tests).
QUIET = [*SETUP_PLUGINS, "memory", "history-compaction", "guide", "affinity", "inventory", *story_world_plugins_except()]
TURN_EN = "I ask Old Tobin about the dark lighthouse."
TURN_ZH = "我从桌上拿起生锈的钥匙，感谢老托宾的炉火。"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded-chat"), [PLUGINS], {"COVEL_RANDOM_SEED": "recorded"}) as (model, stub, store):
        yield model, stub, store


def prompt_body(path: str) -> str:
    return (PLUGINS / path).read_text(encoding="utf-8").split("---", 2)[2].strip()


def preamble(runtime_id: str, language: str = "English") -> str:
    return f'You are the runtime "{runtime_id}" of the plugin "{PLUGIN}" in an interactive story.\nWrite everything the player reads in {language}.'


def inputs_of(request: Request) -> dict:
    return json.loads(request.system.split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])


def only(requests: list[Request]) -> Request:
    assert len(requests) == 1, [(r.runtime_id, r.step) for r in requests]
    return requests[0]


async def session(stub, locale: str, settings: dict | None = None) -> str:
    request = scheduler_pb2.CreateSessionRequest(world_id=DEFAULT_WORLD, locale=locale, excluded_plugins=QUIET, requested_plugins=[PLUGIN])
    for plugin_id, values in (settings or {}).items():
        request.plugin_settings[plugin_id].CopyFrom(to_struct(values))
    return (await stub.CreateSession(request)).session.id


async def play(stub, session_id: str, text: str) -> tuple[list, store_pb2.Turn]:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    events = [event async for event in stub.SubmitActions(request)]
    return events, events[-1].turn_completed


def results(turn) -> dict:
    return {r.runtime_id: r for r in turn.runtime_results}


def recorded_json(name: str) -> dict:
    return json.loads(recorded(name)["choices"][0]["message"]["content"])


NO_PLAN = {"source": "none", "speakers": []}


async def test_english_plan_then_narrate_send_their_prompts_and_commit_the_recorded_story(stack) -> None:
    model, stub, _ = stack
    model.requests.clear()
    model.replies.update({NARRATE: [recorded("chat-mode-narrator-narrate-en-1")]})
    session_id = await session(stub, "en", {PLUGIN: {"person": "third", "maxSpeakers": 2}})
    events, turn = await play(stub, session_id, TURN_EN)
    ran = results(turn)
    assert ran[PLAN].status == resources_pb2.RUNTIME_STATUS_SUCCESS and ran[NARRATE].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    # The plan is a pre-turn function (issue 40, 12): no model call; no stage and no story yet, nobody chosen.
    assert model.of(PLAN) == [] and from_struct(ran[PLAN].output) == NO_PLAN

    narrate = only(model.of(NARRATE))
    assert narrate.system.startswith(preamble(NARRATE) + "\nReply with one JSON object that matches the response format narrative-engine@2")
    assert prompt_body("chat-mode-narrator/runtimes/narrate/RUNTIME.md") in narrate.system
    assert narrate.system.index(prompt_body("chat-mode-narrator/runtimes/narrate/RUNTIME.md")) < narrate.system.index("World: Saltmere")
    bound = inputs_of(narrate)
    assert bound["plan"] == {"value": NO_PLAN} and bound["check"] == {"value": {"checks": []}}
    assert narrate.system.endswith("never address them as \"you\".\nAt most 2 characters besides the player's speak this turn."), "the settings"
    assert narrate.body["response_format"]["json_schema"]["schema"] == kernel_contract_schema("narrative-engine@2")
    assert narrate.body["stream"] is True and "memory-search" in [t["function"]["name"] for t in narrate.body.get("tools") or []]

    story = recorded_json("chat-mode-narrator-narrate-en-1")
    deltas = "".join(e.narrative_delta.text for e in events if e.WhichOneof("event") == "narrative_delta")
    assert deltas == "\n\n".join(s["text"] for s in story["segments"]), "only the segments' text streams"
    messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session_id))).messages
    told = [m for m in messages if m.role == resources_pb2.MESSAGE_ROLE_STORY][-1]
    metadata = from_struct(told.metadata)
    assert told.text == deltas and [s.get("speaker") for s in metadata["segments"]] == ["Old Tobin", "Old Tobin", "Mira", None, "Old Tobin"]
    assert {s.get("speakerId") for s in metadata["segments"]} == {"tobin", "mira", None}, "speakers resolved to the world's characters"
    assert set(metadata["presentCharacterIds"]) == {"tobin", "mira"}


async def test_the_next_plan_chooses_who_spoke_in_the_last_story(stack) -> None:
    model, stub, _ = stack
    model.requests.clear()
    model.replies.update({NARRATE: [recorded("chat-mode-narrator-narrate-en-1"), recorded("chat-mode-narrator-narrate-en-1")]})
    session_id = await session(stub, "en")
    await play(stub, session_id, TURN_EN)
    _, turn = await play(stub, session_id, "I ask Mira whether the boats came back.")
    plan = from_struct(results(turn)[PLAN].output)
    assert plan["source"] == "story" and [s["name"] for s in plan["speakers"]] == ["Old Tobin", "Mira"]
    assert inputs_of(model.of(NARRATE)[-1])["plan"] == {"value": plan}


async def test_chinese_session_sends_the_zh_prompts(stack) -> None:
    model, stub, _ = stack
    model.requests.clear()
    model.replies.update({NARRATE: [recorded("chat-mode-narrator-narrate-zh-1")]})
    session_id = await session(stub, "zh")
    _, turn = await play(stub, session_id, TURN_ZH)
    ran = results(turn)
    assert ran[NARRATE].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    narrate = only(model.of(NARRATE))
    assert model.of(PLAN) == [] and narrate.system.startswith(preamble(NARRATE, "Simplified Chinese"))
    assert prompt_body("chat-mode-narrator/runtimes/narrate/RUNTIME.zh.md") in narrate.system
    assert narrate.system.endswith("叙事人称：第二人称。用“你”称呼玩家的角色。\n这一回合除玩家的角色外，最多 3 个角色开口。")
    assert inputs_of(narrate)["plan"] == {"value": NO_PLAN}
    told = [m for m in (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session_id))).messages
            if m.role == resources_pb2.MESSAGE_ROLE_STORY][-1]
    assert told.text.startswith("不客气，不客气。") and "鸥角" in told.text
