"""scene-stage/direction (its only model-driven runtime) against recorded real-model replies, through the
five services, in the fixture world Lantern Night: the request the kernel sends (preamble, the prompt and its
zh variant, the story's segments and cues as inputs, <stage> and <scenes>, the response format, no tools, a
one-turn history) and what its recorded answers commit; an answer that breaks stage-direction@1 fails the
direction, and the resolver falls back to the story's cues."""

from __future__ import annotations

import json
import uuid

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from shared.kernel_prompts import TASK_PROMPT
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS
from tests.e2e.recorded_model import Request, recorded, recorded_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = REPO_ROOT / "plugins"
WORLDS = REPO_ROOT / "tests" / "fixtures" / "stage-worlds"
WORLD = "lantern-night"
OPENING = "Rain drums on the shutters of the Drowned Lantern. Beyond the quay, the lighthouse is dark."
TURN_EN = "I walk down to the quay to look for Mira."
TURN_ZH = "我走到码头去找米拉。"


def prompt_body(path: str) -> str:
    return (PLUGINS / path).read_text(encoding="utf-8").split("---", 2)[2].strip()


def preamble(language: str = "English") -> str:
    return f'You are the runtime "scene-stage/direction" of the plugin "scene-stage" in an interactive story.\nWrite everything the player reads in {language}.'


def block(request: Request, tag: str) -> dict:
    rows = request.system.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0].splitlines()
    return {row.split(" | ", 1)[0][2:]: json.loads(row.split(" | ", 1)[1]) for row in rows}


def inputs_of(request: Request) -> dict:
    return json.loads(request.system.split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])


def chat(request: Request) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in request.body["messages"][1:]]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded-stage"), [PLUGINS],
                                 {"COVEL_RANDOM_SEED": "recorded", "COVEL_WORLD_DIRS": str(WORLDS)}) as (model, stub, store):
        yield model, stub, store


async def new_session(stub, locale: str = "en") -> str:
    request = scheduler_pb2.CreateSessionRequest(world_id=WORLD, locale=locale,
                                                 excluded_plugins=[*NON_STORY_CORE_PLUGINS, "soundtrack", "character-blueprint"])
    return (await stub.CreateSession(request)).session.id


async def play(stub, session_id: str, text: str) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="act", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def stage(store, session_id: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="scene-stage", namespace="stage"))
    return {entry.key: from_value(entry.value) for entry in reply.entries}["current"]


def results(turn: store_pb2.Turn) -> dict[str, store_pb2.RuntimeResult]:
    return {r.runtime_id: r for r in turn.runtime_results}


async def test_the_direction_request_and_its_recorded_answer(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub)
    model.requests.clear()
    model.replies = {"narrator": [recorded("scene-stage-narrator-en-1")], "scene-stage/direction": [recorded("scene-stage-direction-en-1")]}
    turn = await play(stub, session_id, TURN_EN)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    ran = results(turn)
    for runtime_id in ("scene-stage/seed", "scene-stage/cast", "scene-stage/story-cues", "scene-stage/direction", "scene-stage/resolver"):
        assert ran[runtime_id].status == resources_pb2.RUNTIME_STATUS_SUCCESS, (runtime_id, ran[runtime_id].reason)

    # The story's prompt carries the stage the seed set.
    [narrator] = model.of("narrator")
    assert "Scene: The Drowned Lantern (the harbor of Saltmere); evening, warm lamplight\nOn stage: Old Tobin, Mira" in narrator.system

    [direction] = model.of("scene-stage/direction")
    assert direction.system.startswith(preamble() + "\n\n" + prompt_body("scene-stage/runtimes/direction/RUNTIME.md"))
    inputs = inputs_of(direction)
    assert [s["speaker"] for s in inputs["story"]["value"] if s.get("speaker")] == ["Mira", "Mira"]
    assert inputs["cues"]["value"] == {"scene": "the quay", "mood": "tense", "present": ["Mira"], "speakers": ["Mira"]}
    shown = block(direction, "stage")["current"]
    assert shown["scene"]["name"] == "The Drowned Lantern" and [a["name"] for a in shown["actors"]] == ["Old Tobin", "Mira"]
    assert set(block(direction, "scenes")) == {"inn", "quay", "lighthouse"}
    wanted = direction.body["response_format"]
    assert wanted["type"] == "json_schema" and wanted["json_schema"]["name"] == "stage-direction-1"
    assert wanted["json_schema"]["schema"] == json.loads((PLUGINS / "scene-stage/schemas/stage-direction.schema.json").read_text())
    assert "tools" not in direction.body and chat(direction)[:2] == [("assistant", OPENING), ("user", TURN_EN)] and chat(direction)[3] == ("user", TASK_PROMPT)

    # What committed: the quay, its backdrop URL, Mira with her performance; Old Tobin stayed at the inn.
    committed = await stage(store, session_id)
    assert committed["scene"]["id"] == "quay" and committed["scene"]["lighting"] == "rain and lantern light"
    assert committed["scene"]["backdrop"] == {"src": "https://example.com/backdrops/quay.jpg", "source": "url"}
    assert committed["actors"] == [{"id": "mira", "name": "Mira", "pose": "holding up a storm lantern", "expression": "grim",
                                    "position": "at the end of the pier", "since": 1}]
    assert committed["left"] == ["Old Tobin"] and committed["reason"] == "The player walked down to the quay, where Mira keeps watch."
    assert from_struct(ran["scene-stage/resolver"].output)["scene"] == committed["scene"]


async def test_a_chinese_session_sends_the_zh_prompt(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub, "zh")
    model.requests.clear()
    model.replies = {"narrator": [recorded("scene-stage-narrator-zh-1")], "scene-stage/direction": [recorded("scene-stage-direction-zh-1")]}
    turn = await play(stub, session_id, TURN_ZH)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    assert results(turn)["scene-stage/direction"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    [narrator] = model.of("narrator")
    assert "当前场景：The Drowned Lantern（" not in narrator.system and "当前场景：The Drowned Lantern (the harbor of Saltmere)" in narrator.system
    [direction] = model.of("scene-stage/direction")
    assert direction.system.startswith(preamble("Simplified Chinese") + "\n\n" + prompt_body("scene-stage/runtimes/direction/RUNTIME.zh.md"))
    assert chat(direction)[:2] == [("assistant", OPENING), ("user", TURN_ZH)] and chat(direction)[2][0] == "assistant"
    committed = await stage(store, session_id)
    # 米拉 is Mira's alias, 码头 the quay's: the Chinese answer maps onto the world's ids.
    assert committed["scene"]["id"] == "quay" and committed["scene"]["name"] == "The quay"
    assert [(a["id"], a["pose"]) for a in committed["actors"]] == [("mira", "举着防风灯")]


async def test_a_broken_direction_fails_and_the_cues_direct_the_stage(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub)
    model.requests.clear()
    model.replies = {"narrator": [recorded("scene-stage-narrator-en-1")], "scene-stage/direction": [recorded("scene-stage-direction-bad")]}
    turn = await play(stub, session_id, TURN_EN)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, "a helper's bad answer does not stop the story"
    ran = results(turn)
    assert ran["scene-stage/direction"].status == resources_pb2.RUNTIME_STATUS_FAILED, ran["scene-stage/direction"].reason
    assert "/performances/0" in ran["scene-stage/direction"].reason, ran["scene-stage/direction"].reason
    assert len(model.of("scene-stage/direction")) >= 2, "the kernel asked the model to repair its answer first"
    assert ran["scene-stage/resolver"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
    committed = await stage(store, session_id)
    # The story's cues (scene "the quay", Mira present) moved the stage, without the broken performance.
    assert committed["scene"]["id"] == "quay" and [(a["id"], a.get("pose")) for a in committed["actors"]] == [("mira", None)]
    assert committed["reason"] == "the story's cues"
