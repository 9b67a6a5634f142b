"""npc-graph against recorded real-model replies, through the five services (tests/e2e/recorded_model.py): the
extractor's request (its prompt and the zh variant, the story and the relationships as they stand as its
inputs, the player's words, the response format) and what its answers commit: versions with one open per
fact, the retriever's graph-rag@1 the next turn, and an answer that breaks the schema commits nothing."""

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
from tests.support.builtin_plugins import SETUP_PLUGINS, story_world_plugins_except

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGINS = REPO_ROOT / "plugins"
EXTRACTOR = "format:npc-graph-facts"
# The model-driven plugins this module is not about stay out.
OTHERS = [*SETUP_PLUGINS, "dice-check", "inventory", "affinity", "guide", "cost-gate", "memory", "history-compaction", "world-time",
          *story_world_plugins_except("npc-graph")]
TURN_1 = "I ask Old Tobin why Mira never comes into the inn."
TURN_2 = "I find Mira on the quay and tell her Tobin kept her father's boat safe all these years."


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded-npc-graph"), [PLUGINS], {"COVEL_RANDOM_SEED": "recorded"}) as running:
        yield running


def body_of(path: str) -> str:
    return (PLUGINS / "npc-graph" / path).read_text(encoding="utf-8").split("---", 2)[2].strip()


def inputs_of(request: Request) -> dict:
    return json.loads(request.system.split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])


async def session(stub, locale: str = "en") -> str:
    request = scheduler_pb2.CreateSessionRequest(world_id="demo-world", locale=locale, requested_plugins=["npc-graph"], excluded_plugins=OTHERS)
    return (await stub.CreateSession(request)).session.id


async def play(stub, session_id: str, text: str) -> tuple[store_pb2.Turn, dict]:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    return turn, {r.runtime_id: r for r in turn.runtime_results}


async def facts(store, session_id: str, namespace: str = "facts") -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id="npc-graph", namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


async def test_english_extractor_request_and_versions(stack) -> None:
    model, stub, store = stack
    session_id = await session(stub)
    model.replies.update({"narrator": [recorded("npc-graph-narrator-en-1")], EXTRACTOR: [recorded("npc-graph-extractor-en-1")]})
    _turn, ran = await play(stub, session_id, TURN_1)
    assert ran["npc-graph/extractor"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, ran["npc-graph/extractor"].reason

    # The request: the prompt (no kernel preamble: a function's model call), the story and cast as inputs, the player's words.
    asked = model.of(EXTRACTOR)[-1]
    assert asked.system.startswith(body_of("runtimes/extractor/RUNTIME.md"))
    inputs = inputs_of(asked)
    assert inputs["story"].startswith("Old Tobin stops polishing a mug") and "Sela: \u201cFather, you don't have to tell" in inputs["story"]
    assert inputs["open"] == [] and {"name": "Old Tobin", "aliases": ["Tobin", "老托宾", "托宾"]} in inputs["characters"]
    assert [(m["role"], m["content"]) for m in asked.body["messages"][1:]] == [("user", TURN_1)]
    wanted = asked.body["response_format"]["json_schema"]
    assert wanted["schema"]["title"] == "npc-graph.facts@1" and "npc-graph" in wanted["name"]

    # The answer's names resolve to the world's characters ("Tobin" is Old Tobin); one open version per fact.
    stored = await facts(store, session_id)
    assert {key: (v["subject"], v["state"], v["object"], v["validFrom"], v["validTo"]) for key, v in stored.items()} == {
        "mira.trust.tobin@1": ("Mira", "distrusts", "Old Tobin", 1, None), "sela.kin.tobin@1": ("Sela", "is the daughter of", "Old Tobin", 1, None)}
    assert (await facts(store, session_id, "scene"))["current"]["present"] == ["tobin", "sela"]

    # The next turn: the retriever gives the story Mira's and Tobin's relationships before it is written.
    model.replies.update({"narrator": [recorded("npc-graph-narrator-en-2")], EXTRACTOR: [recorded("npc-graph-extractor-en-2")]})
    _turn, ran = await play(stub, session_id, TURN_2)
    rag = from_struct(ran["npc-graph/rag-retriever"].output)
    assert [(f["id"], f["why"]) for f in rag["focus"]] == [("mira", "named"), ("tobin", "named"), ("traveller", "acting"), ("sela", "present")]
    assert rag["lines"] == ["Mira distrusts Old Tobin", "Sela is the daughter of Old Tobin"]
    second = model.of(EXTRACTOR)[-1]
    assert inputs_of(second)["open"] == ["Mira distrusts Old Tobin [trust]", "Sela is the daughter of Old Tobin [kin]"]

    # Mira's trust changed: the old version closed at turn 2, a new one open; Sela's, repeated unchanged, stays one version.
    stored = await facts(store, session_id)
    assert {key: (v["state"], v["validFrom"], v["validTo"]) for key, v in stored.items()} == {
        "mira.trust.tobin@1": ("distrusts", 1, 2), "mira.trust.tobin@2": ("trusts", 2, None), "sela.kin.tobin@1": ("is the daughter of", 1, None)}
    graph = from_struct(ran["npc-graph/extractor"].output)
    assert graph["changed"] == [{"fact": "mira.trust.tobin", "subject": "Mira", "relation": "trust", "object": "Old Tobin",
                                 "state": "trusts", "was": "distrusts"}]
    people = await facts(store, session_id, "people")
    assert people["tobin"]["summary"] == "Sela is the daughter of Old Tobin; Mira trusts Old Tobin"


async def test_an_answer_that_breaks_the_schema_commits_nothing(stack) -> None:
    model, stub, store = stack
    session_id = await session(stub)
    model.replies.update({"narrator": [recorded("npc-graph-narrator-en-1")], EXTRACTOR: [recorded("npc-graph-extractor-en-1")]})
    await play(stub, session_id, TURN_1)
    before = await facts(store, session_id)
    model.replies.update({"narrator": [recorded("npc-graph-narrator-en-2")], EXTRACTOR: [recorded("npc-graph-extractor-bad-relation")]})
    turn, ran = await play(stub, session_id, TURN_2)
    failed = ran["npc-graph/extractor"]
    assert failed.status == resources_pb2.RUNTIME_STATUS_FAILED and "facts[0].relation must be one of" in failed.reason, failed.reason
    assert await facts(store, session_id) == before, "neither the valid fact of the answer nor the scene is written"
    assert (await facts(store, session_id, "scene"))["current"]["turn"] == 1
    assert turn.narrative.startswith("You find Mira coiling rope"), "the story commits without the graph"


async def test_chinese_session_sends_the_zh_prompt_and_resolves_chinese_names(stack) -> None:
    model, stub, store = stack
    session_id = await session(stub, "zh")
    model.replies.update({"narrator": [recorded("npc-graph-narrator-zh-1")], EXTRACTOR: [recorded("npc-graph-extractor-zh-1")]})
    _turn, ran = await play(stub, session_id, "我问老托宾为什么米拉从不来酒馆。")
    assert ran["npc-graph/extractor"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, ran["npc-graph/extractor"].reason
    asked = model.of(EXTRACTOR)[-1]
    assert asked.system.startswith(body_of("runtimes/extractor/RUNTIME.zh.md"))
    assert "塞拉: \u201c爸爸，你不必把全镇的恩怨都讲给陌生人听。\u201d" in inputs_of(asked)["story"]
    stored = await facts(store, session_id)
    assert {key: (v["subject"], v["state"], v["object"]) for key, v in stored.items()} == {
        "mira.trust.tobin@1": ("Mira", "不信任", "Old Tobin"), "sela.kin.tobin@1": ("Sela", "的父亲是", "Old Tobin")}
    assert (await facts(store, session_id, "people"))["sela"]["summary"] == "Sela的父亲是Old Tobin"
