"""codex against recorded real-model replies, through the five services (tests/e2e/recorded_model.py): its
request (the prompt and the zh variant, the story, the known entries and the cast as inputs, the player's
words, the response format) and what the answers commit: one entry per discovery by category, a later mention
by another name enriches the known entry instead of adding one, and an answer that breaks the schema commits
nothing."""

from __future__ import annotations

import json
import uuid

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
CODEX = "format:codex-entries"
OTHERS = [*SETUP_PLUGINS, "dice-check", "inventory", "affinity", "guide", "cost-gate", "memory", "history-compaction", "world-time"]
TURN_1 = "I push open the door of the Drowned Lantern and look around."
TURN_2 = "I ask Tobin who kept the lighthouse."


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded-codex"), [PLUGINS], {"COVEL_RANDOM_SEED": "recorded"}) as running:
        yield running


def body_of(name: str) -> str:
    return (PLUGINS / "codex" / name).read_text(encoding="utf-8").split("---", 2)[2].strip()


def inputs_of(request: Request) -> dict:
    return json.loads(request.system.split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])


async def session(stub, locale: str = "en") -> str:
    request = scheduler_pb2.CreateSessionRequest(world_id="demo-world", locale=locale, requested_plugins=["codex"], excluded_plugins=OTHERS)
    return (await stub.CreateSession(request)).session.id


async def play(stub, session_id: str, text: str) -> store_pb2.RuntimeResult:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    return next(r for r in turn.runtime_results if r.runtime_id == "codex")


async def entries(store, session_id: str) -> dict:
    found = {}
    for namespace in ("places", "people", "items", "rumours"):
        reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="codex", namespace=namespace))
        found.update({f"{namespace}/{entry.key}": from_value(entry.value) for entry in reply.entries})
    return found


async def test_english_request_and_entries_enriched_not_duplicated(stack) -> None:
    model, stub, store = stack
    session_id = await session(stub)
    model.replies.update({"narrator": [recorded("codex-narrator-en-1")], CODEX: [recorded("codex-en-1")]})
    result = await play(stub, session_id, TURN_1)
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason

    asked = model.of(CODEX)[-1]
    assert asked.system.startswith(body_of("PLUGIN.md"))
    inputs = inputs_of(asked)
    assert inputs["story"].startswith("The Drowned Lantern is low-beamed and smoky") and inputs["known"] == []
    assert [c["name"] for c in inputs["characters"]] == ["Mira", "Sela", "Old Tobin"], "the cast without the player's character"
    assert inputs["characters"][2] == {"name": "Old Tobin", "aliases": ["Tobin", "老托宾", "托宾"],
                                       "description": "The innkeeper. Kind, talkative, knows every rumour in town."}
    assert [(m["role"], m["content"]) for m in asked.body["messages"][1:]] == [("user", TURN_1)]
    assert asked.body["response_format"]["json_schema"]["schema"]["title"] == "codex.entries@1"

    first = await entries(store, session_id)
    assert set(first) == {"places/drowned-lantern", "people/old-tobin", "places/gull-point-lighthouse", "rumours/mad-keeper", "items/brass-spyglass"}
    assert first["people/old-tobin"]["characterId"] == "tobin" and first["places/drowned-lantern"]["aliases"] == ["the inn"]
    assert all(e["firstSeen"] == 1 for e in first.values())

    # The lighthouse by its alias and Tobin by his short name: the known entries, enriched; the keeper is new.
    model.replies.update({"narrator": [recorded("codex-narrator-en-2")], CODEX: [recorded("codex-en-2")]})
    result = await play(stub, session_id, TURN_2)
    assert from_struct(result.output) == {"added": ["Aldous Crane"], "enriched": ["Gull Point lighthouse"], "seen": ["Old Tobin"]}
    known = inputs_of(model.of(CODEX)[-1])["known"]
    assert {"name": "Gull Point lighthouse", "category": "place", "aliases": ["the lighthouse"],
            "description": "The lighthouse on Gull Point; its lamp has gone dark."} in known
    second = await entries(store, session_id)
    assert set(second) == set(first) | {"people/aldous-crane"}
    lighthouse = second["places/gull-point-lighthouse"]
    assert lighthouse["description"] == "The lighthouse on Gull Point; its lamp has gone dark. Aldous Crane kept its light for forty years."
    assert (lighthouse["firstSeen"], lighthouse["lastSeen"], lighthouse["mentions"]) == (1, 2, 2)
    tobin = second["people/old-tobin"]
    assert (tobin["description"], tobin["aliases"], tobin["mentions"]) == (first["people/old-tobin"]["description"], ["Tobin"], 2)
    assert second["people/aldous-crane"]["aliases"] == ["the keeper"] and second["people/aldous-crane"]["firstSeen"] == 2


async def test_an_answer_that_breaks_the_schema_commits_nothing(stack) -> None:
    model, stub, store = stack
    session_id = await session(stub)
    model.replies.update({"narrator": [recorded("codex-narrator-en-1")], CODEX: [recorded("codex-en-1")]})
    await play(stub, session_id, TURN_1)
    before = await entries(store, session_id)
    model.replies.update({"narrator": [recorded("codex-narrator-en-2")], CODEX: [recorded("codex-bad-category")]})
    result = await play(stub, session_id, TURN_2)
    assert result.status == resources_pb2.RUNTIME_STATUS_FAILED and "entries[1].category must be one of" in result.reason, result.reason
    assert await entries(store, session_id) == before, "not even the valid entry of the answer is written"


async def test_chinese_session_sends_the_zh_prompt(stack) -> None:
    model, stub, store = stack
    session_id = await session(stub, "zh")
    model.replies.update({"narrator": [recorded("codex-narrator-zh-1")], CODEX: [recorded("codex-zh-1")]})
    result = await play(stub, session_id, "我推开溺灯酒馆的门，四处看看。")
    assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
    asked = model.of(CODEX)[-1]
    assert asked.system.startswith(body_of("PLUGIN.zh.md"))
    assert "老托宾: \u201c进来避避风吧。" in inputs_of(asked)["story"]
    stored = await entries(store, session_id)
    assert stored["people/old-tobin"]["aliases"] == ["老托宾"] and stored["people/old-tobin"]["characterId"] == "tobin"
    assert {e["name"] for e in stored.values()} == {"溺灯酒馆", "Old Tobin", "疯掉的守塔人"}
    assert all(key.split("/")[1].startswith("e-") for key, e in stored.items() if e["name"] != "Old Tobin"), "Chinese names get hashed keys"
