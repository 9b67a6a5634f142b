"""branch-reply against recorded real-model replies, through the five services: the request its agent
sends (preamble, its prompt and the zh variant, the story it rewrites, the offer-variants tool it must
finish with), the variants it keeps, and the next story prompt following the player's pick."""

from __future__ import annotations

import json
import uuid

import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from services.scheduler.agent.context import STORY_POINTER
from shared.kernel_prompts import TASK_PROMPT
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value
from tests.e2e.conftest import minimal_session
from tests.e2e.recorded_model import Request, recorded, recorded_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = REPO_ROOT / "plugins"
PLUGIN = "branch-reply"
LANGUAGES = {"en": "English", "zh": "Simplified Chinese"}
ACTIONS = {"en": ("I pick up the rusty key from the table.", "I ask Tobin about the name."),
           "zh": ("我从桌上拿起生锈的钥匙。", "我问老托宾那个名字的事。")}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded-branch"), [PLUGINS]) as (model, stub, store):
        yield model, stub, store


async def play(stub, session_id: str, text: str):
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    events = [event async for event in stub.SubmitActions(request)]
    return events, events[-1].turn_completed


def prompt_body(path: str) -> str:
    return (PLUGINS / path).read_text(encoding="utf-8").split("---", 2)[2].strip()


def inputs_of(request: Request) -> dict:
    return json.loads(request.system.split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])


@pytest.mark.parametrize("locale", ["en", "zh"])
async def test_recorded_variants_are_kept_and_the_pick_is_what_the_story_reads_next(stack, locale: str) -> None:
    model, stub, store = stack
    model.requests.clear()
    model.replies = {"narrator": [recorded(f"narrator-{locale}-1")], PLUGIN: [recorded(f"branch-reply-{locale}-1")]}
    session = (await stub.CreateSession(minimal_session(requested_plugins=[PLUGIN], locale=locale))).session
    first_action, second_action = ACTIONS[locale]
    events, turn = await play(stub, session.id, first_action)
    assert turn.status == resources_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    ran = {r.runtime_id: r for r in turn.runtime_results}
    assert ran[PLUGIN].status == resources_pb2.RUNTIME_STATUS_SUCCESS, ran[PLUGIN].reason

    [request] = model.of(PLUGIN)
    preamble = f'You are the runtime "{PLUGIN}" of the plugin "{PLUGIN}" in an interactive story.\nWrite everything the player reads in {LANGUAGES[locale]}.'
    body = prompt_body("branch-reply/PLUGIN.zh.md" if locale == "zh" else "branch-reply/PLUGIN.md")
    assert request.system.startswith(preamble + "\n\n" + body)
    story = json.loads(recorded(f"narrator-{locale}-1")["choices"][0]["message"]["content"])
    # The story it branches is the assistant message after the player's input; its input points there (issue 40, 3).
    assert inputs_of(request)["narrative"]["value"] == STORY_POINTER
    conversation = [(m["role"], m.get("content")) for m in request.body["messages"][1:]]
    assert [role for role, _ in conversation] == ["user", "assistant", "user"] and conversation[0] == ("user", first_action)
    told = conversation[1][1]
    assert all(segment["text"] in told for segment in story["segments"]), told
    assert conversation[2] == ("user", TASK_PROMPT)
    assert request.tool_names == ["offer-variants"] and request.body["tool_choice"] == "required"

    recorded_variants = json.loads(recorded(f"branch-reply-{locale}-1")["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
    texts = [v["text"] for v in recorded_variants["variants"]]
    kept = (await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id=PLUGIN, namespace="variants"))).entries
    assert [(e.key, from_value(e.value)["texts"]) for e in kept] == [("1", texts)]
    [block] = [e.ui for e in events if e.WhichOneof("event") == "ui" and e.ui.plugin_id == PLUGIN]
    assert block.title == ("这段回复的其他版本" if locale == "zh" else "Other versions of this reply")
    assert len(from_struct(block.parts[0])["items"]) == 3

    picked = await stub.RunCommand(scheduler_pb2.RunCommandRequest(session_id=session.id, text="/variant 3"))
    assert json.loads(picked.result_json) == {"turn": 1, "variant": 3}
    model.requests.clear()
    _, second = await play(stub, session.id, second_action)
    assert second.status == resources_pb2.TURN_STATUS_COMMITTED, second.abort_reason
    narrator = model.of("narrator")[0]
    chat = [(m["role"], m.get("content")) for m in narrator.body["messages"][1:]]
    assert chat == [("user", first_action), ("assistant", texts[1]), ("user", second_action)], chat
    # The branch-reply agent of turn 2 reads the picked version too (its own package's transform).
    assert ("assistant", texts[1]) in [(m["role"], m.get("content")) for m in model.of(PLUGIN)[0].body["messages"][1:]]


async def test_more_versions_than_asked_for_is_a_tool_error_the_model_corrects(stack) -> None:
    model, stub, store = stack
    model.requests.clear()
    model.replies = {"narrator": [recorded("narrator-en-1")],
                     PLUGIN: [recorded("branch-reply-en-too-many"), recorded("branch-reply-en-1")]}
    session = (await stub.CreateSession(minimal_session(requested_plugins=[PLUGIN]))).session
    _, turn = await play(stub, session.id, ACTIONS["en"][0])
    ran = {r.runtime_id: r for r in turn.runtime_results}
    assert ran[PLUGIN].status == resources_pb2.RUNTIME_STATUS_SUCCESS, ran[PLUGIN].reason
    second = next(r for r in model.of(PLUGIN) if r.step == 1)
    [error] = [json.loads(m["content"]) for m in second.body["messages"] if m["role"] == "tool"]
    assert error["ok"] is False and error["error"]["code"] == "too-many" and error["error"]["message"] == "3 versions written, 2 asked for"
    kept = (await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id, plugin_id=PLUGIN, namespace="variants"))).entries
    assert [len(from_value(e.value)["texts"]) for e in kept] == [2]
