"""core-quest/log against recorded real-model replies, through the five services (tests/e2e/recorded_model.py).

Checks the request the log really sends (its RUNTIME.md prompt or the zh variant, the story and the quest
log as runtime inputs, the player's words, core-quest.changes@1 as the response format), that the recorded
answers commit a valid quest log and vocabulary, that the story reads the open quests as a segment the next
turn, and that an answer breaking the schema fails the log and commits nothing."""

from __future__ import annotations

import json
import uuid

import jsonschema
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from covel.store.v1 import store_pb2
from covel_cli.play import DEFAULT_WORLD
from shared.settings import REPO_ROOT
from shared.structs import from_struct, from_value
from tests.e2e.recorded_model import recorded, recorded_services
from tests.support.builtin_plugins import SETUP_PLUGINS

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = REPO_ROOT / "plugins"
PLUGIN = PLUGINS / "core-quest"
LOG = "format:core-quest-changes"
# The demo world with only the story and the quest log: the other model-driven plugins are left out.
LEFT_OUT = [*SETUP_PLUGINS, "memory", "guide", "affinity", "dice-check", "cost-gate", "history-compaction", "world-time", "inventory"]
TURN_1 = "I promise Mira I will find the missing boats."
TURN_2 = "I ask the fishermen at the quay who saw the boats last."
TURN_ZH = "我答应米拉，一定找到失踪的渔船。"


def schema(path: str) -> dict:
    return json.loads((PLUGINS / path).read_text(encoding="utf-8"))


def body(path: str) -> str:
    return (PLUGINS / path).read_text(encoding="utf-8").split("---", 2)[2].strip()


def inputs_of(system: str) -> dict:
    return json.loads(system.split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded-quest"), [PLUGINS], {"COVEL_RANDOM_SEED": "recorded"}) as running:
        yield running


async def new_session(stub, locale: str = "en") -> str:
    request = scheduler_pb2.CreateSessionRequest(world_id=DEFAULT_WORLD, locale=locale, excluded_plugins=LEFT_OUT, requested_plugins=["core-quest"])
    return (await stub.CreateSession(request)).session.id


async def play(stub, session_id: str, text: str) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def quests(store, session_id: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="core-quest", namespace="quests"))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


def results(turn) -> dict:
    return {r.runtime_id: r for r in turn.runtime_results}


async def test_the_log_request_and_its_recorded_answers_commit_a_quest_log(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub)
    model.requests.clear()
    model.replies = {"narrator": [recorded("core-quest-story-en-1")], LOG: [recorded("core-quest-log-en-1")]}
    first = await play(stub, session_id, TURN_1)
    assert first.status == store_pb2.TURN_STATUS_COMMITTED, first.abort_reason
    ran = results(first)
    for runtime_id in ("narrator", "core-quest/log", "core-quest/vocabulary"):
        assert ran[runtime_id].status == resources_pb2.RUNTIME_STATUS_SUCCESS, (runtime_id, ran[runtime_id].reason)

    # The request: RUNTIME.md's prompt, the story and the (empty) log as inputs, the player's words, the contract as the format.
    [request] = model.of(LOG)
    system = request.system
    assert system.startswith(body("core-quest/runtimes/log/RUNTIME.md"))
    shown = inputs_of(system)
    assert shown["quests"] == {"value": []}
    assert shown["narrative"]["value"].startswith("Mira looks up from the tide charts") and "Gull Point" in shown["narrative"]["value"]
    assert [(m["role"], m["content"]) for m in request.body["messages"][1:]] == [("user", TURN_1)]
    wanted = request.body["response_format"]["json_schema"]
    assert wanted["name"] == "core-quest-changes" and wanted["schema"] == schema("core-quest/schemas/changes.schema.json")

    # What committed: the quest with its objectives, giver and turn; the output as applied; the vocabulary.
    log = await quests(store, session_id)
    boats = log["find-the-missing-boats"]
    jsonschema.validate(boats, schema("core-quest/schemas/quest.schema.json"))
    assert boats["status"] == "active" and boats["giver"] == "Mira" and boats["started"] == boats["updated"]
    assert [o["text"] for o in boats["objectives"]] == ["Ask the fishermen at the quay", "Search the rocks past Gull Point", "Bring the boats home"]
    output = from_struct(ran["core-quest/log"].output)
    assert output["changes"][0]["id"] == "find-the-missing-boats" and output["changes"][0]["change"] == "started"
    assert from_struct(ran["core-quest/vocabulary"].output) == {"source": "core-quest", "kind": "quest", "terms": [
        {"id": "find-the-missing-boats", "name": "Find the missing boats", "note": "active"}]}

    # Turn 2: the story reads the open quest (prompt.segment@1/open-quests), the log shows it and advances it.
    model.requests.clear()
    model.replies = {"narrator": [recorded("core-quest-story-en-2")], LOG: [recorded("core-quest-log-en-2")]}
    second = await play(stub, session_id, TURN_2)
    assert second.status == store_pb2.TURN_STATUS_COMMITTED, second.abort_reason
    narrator = next(r for r in model.of("narrator") if r.step == 0)
    segment = [m["content"] for m in narrator.body["messages"][1:] if m["role"] == "system" and "open quests" in (m["content"] or "")]
    assert segment == ["The player's open quests (follow them up when the story gives a chance; never finish one for the player):\n"
                       "- Find the missing boats (for Mira): 0 of 3 done; next: Ask the fishermen at the quay"]
    assert narrator.body["messages"][-1] == {"role": "user", "content": TURN_2}
    [request] = model.of(LOG)
    assert inputs_of(request.system)["quests"]["value"] == [{"id": "find-the-missing-boats", "title": "Find the missing boats", "status": "active",
                                                             "objectives": [{"text": o["text"], "done": False} for o in boats["objectives"]]}]
    boats = (await quests(store, session_id))["find-the-missing-boats"]
    assert [(o["text"], o["done"]) for o in boats["objectives"]] == [
        ("Ask the fishermen at the quay", True), ("Search the rocks past Gull Point", False), ("Bring the boats home", False),
        ("Find out why the boats rowed out dark", False)]
    assert [h["change"] for h in boats["history"]] == ["started", "advanced"] and boats["updated"] == boats["started"] + 1


async def test_a_chinese_session_sends_the_zh_prompt_and_keeps_the_chinese_title(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub, "zh")
    model.requests.clear()
    model.replies = {"narrator": [recorded("core-quest-story-zh-1")], LOG: [recorded("core-quest-log-zh-1")]}
    turn = await play(stub, session_id, TURN_ZH)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    [request] = model.of(LOG)
    assert request.system.startswith(body("core-quest/runtimes/log/RUNTIME.zh.md"))
    log = await quests(store, session_id)
    [(key, quest)] = log.items()
    assert key.startswith("quest-") and quest["title"] == "找到失踪的渔船" and quest["giver"] == "米拉"


async def test_an_answer_that_breaks_the_schema_fails_the_log_and_commits_nothing(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub)
    model.requests.clear()
    model.replies = {"narrator": [recorded("core-quest-story-en-1")], LOG: [recorded("core-quest-log-bad-change")]}
    turn = await play(stub, session_id, TURN_1)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, "a helper's bad answer does not stop the story"
    ran = results(turn)
    assert ran["core-quest/log"].status == resources_pb2.RUNTIME_STATUS_FAILED
    assert "/changes/0/change" in ran["core-quest/log"].reason, ran["core-quest/log"].reason
    assert await quests(store, session_id) == {}
    assert ran["core-quest/vocabulary"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, "the vocabulary runs after the log, whatever its outcome"
    assert from_struct(ran["core-quest/vocabulary"].output)["terms"] == []
