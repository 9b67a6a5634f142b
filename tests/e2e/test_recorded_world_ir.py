"""world-ir against recorded real-model replies, through the five services (tests/e2e/recorded_model.py).

Checks the request world-ir really sends (its PLUGIN.md prompt or the zh variant, the story, the known
characters and every provider's world-ir.vocabulary@1 as runtime inputs, the player's words, its extraction
schema as the response format), that the recorded answers commit facts with the world's ids and the
vocabularies' names, and that an answer breaking the schema fails the run and commits nothing of it."""

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
EXTRACT = "format:world-ir-extraction"
QUEST_LOG = "format:core-quest-changes"
LEFT_OUT = [*SETUP_PLUGINS, "memory", "guide", "affinity", "dice-check", "cost-gate", "history-compaction", "world-time"]
TURN_1 = "I pick up the rusty key from the table, light my lantern and thank Old Tobin for the warm fire."
TURN_ZH = "我从桌上拿起生锈的钥匙，感谢老托宾的炉火。"
KEY = {"source": "inventory", "kind": "item", "id": "rusty-key", "name": "rusty key"}
LANTERN = {"source": "inventory", "kind": "item", "id": "brass-lantern", "name": "brass lantern"}


def schema(name: str) -> dict:
    return json.loads((PLUGINS / "world-ir" / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8"))


def body(path: str) -> str:
    return (PLUGINS / path).read_text(encoding="utf-8").split("\n---", 1)[1].strip()


def inputs_of(system: str) -> dict:
    return json.loads(system.split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-recorded-world-ir"), [PLUGINS], {"COVEL_RANDOM_SEED": "recorded"}) as running:
        yield running


async def new_session(stub, locale: str = "en") -> str:
    request = scheduler_pb2.CreateSessionRequest(world_id=DEFAULT_WORLD, locale=locale, excluded_plugins=LEFT_OUT,
                                                 requested_plugins=["world-ir", "core-quest"])
    return (await stub.CreateSession(request)).session.id


async def play(stub, session_id: str, text: str) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def data(store, session_id: str, namespace: str, plugin_id: str = "world-ir") -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=plugin_id, namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


def results(turn) -> dict:
    return {r.runtime_id: r for r in turn.runtime_results}


async def test_the_request_reads_every_vocabulary_and_the_answer_commits_facts_with_stable_ids(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub)
    model.requests.clear()
    model.replies = {"narrator": [recorded("narrator-en-1")], "inventory/ledger": [recorded("inventory-ledger-en-1a"), recorded("inventory-ledger-en-1b")],
                     QUEST_LOG: [recorded("core-quest-log-none")], EXTRACT: [recorded("world-ir-en-1")]}
    turn = await play(stub, session_id, TURN_1)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    ran = results(turn)
    for runtime_id in ("narrator", "inventory/apply", "inventory/vocabulary", "core-quest/log", "core-quest/vocabulary", "world-ir"):
        assert ran[runtime_id].status == resources_pb2.RUNTIME_STATUS_SUCCESS, (runtime_id, ran[runtime_id].reason)

    # The request: PLUGIN.md's prompt; the story, the world's cast and the vocabularies as this turn left them.
    [request] = model.of(EXTRACT)
    assert request.system.startswith(body("world-ir/PLUGIN.md"))
    shown = inputs_of(request.system)
    assert shown["narrative"]["value"].startswith("The key is cold and crusted with salt") and "That key was left here" in shown["narrative"]["value"]
    assert sorted(shown["known"]["value"]["characters"], key=lambda c: c["id"]) == [
        {"id": "mira", "name": "Mira"}, {"id": "sela", "name": "Sela"}, {"id": "tobin", "name": "Old Tobin"},
        {"id": "traveller", "name": "The traveller", "player": True}]
    # core-quest's vocabulary has no quest yet (left out of the prompt); inventory's has this turn's key.
    assert [(v["source"], v["kind"]) for v in shown["vocabularies"]["value"]] == [("inventory", "item")]
    assert [t["id"] for t in shown["vocabularies"]["value"][0]["terms"]] == ["brass-lantern", "copper-coin", "rusty-key", "worn-map"]
    assert [(m["role"], m["content"]) for m in request.body["messages"][1:]] == [("user", TURN_1)]
    wanted = request.body["response_format"]["json_schema"]
    assert wanted["name"] == "world-ir-extraction" and wanted["schema"] == schema("extraction")

    # What committed: the world's ids, the vocabularies' names, the turn that saw each.
    facts = from_struct(ran["world-ir"].output)
    jsonschema.validate(facts, schema("facts"))
    now = facts["turn"]
    characters = await data(store, session_id, "characters")
    assert set(characters) == {"tobin", "traveller"}
    assert characters["tobin"] == {"id": "tobin", "name": "Old Tobin", "aliases": [], "world": True,
                                   "description": "The innkeeper of the Drowned Lantern.", "firstSeen": now, "lastSeen": now, "turns": 1}
    relations = await data(store, session_id, "relations")
    assert set(relations) == {"traveller-thanked-tobin", "tobin-welcomes-traveller"}
    events = await data(store, session_id, "events")
    assert [events[f"t{now}-{n}"]["terms"] for n in (1, 2)] == [[KEY], [LANTERN]]
    assert events[f"t{now}-3"]["participants"] == ["tobin", "traveller"]
    assert events[f"t{now}-3"]["terms"] == [KEY, {"source": "world-ir", "kind": "mention", "id": "lighthouse", "name": "lighthouse"}]
    [clue] = (await data(store, session_id, "clues")).values()
    assert clue["about"][0] == KEY and clue["firstSeen"] == now
    assert facts["terms"] == [KEY, LANTERN]
    for namespace, record_schema in (("characters", "character"), ("relations", "relation"), ("events", "event"), ("clues", "clue")):
        for record in (await data(store, session_id, namespace)).values():
            jsonschema.validate(record, schema(record_schema))


async def test_a_chinese_session_sends_the_zh_prompt_and_resolves_chinese_names(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub, "zh")
    model.requests.clear()
    model.replies = {"narrator": [recorded("narrator-zh-1")], "inventory/ledger": [recorded("inventory-ledger-zh-1")],
                     QUEST_LOG: [recorded("core-quest-log-none")], EXTRACT: [recorded("world-ir-zh-1")]}
    turn = await play(stub, session_id, TURN_ZH)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    assert results(turn)["world-ir"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results(turn)["world-ir"].reason
    [request] = model.of(EXTRACT)
    assert request.system.startswith(body("world-ir/PLUGIN.zh.md"))
    items = await data(store, session_id, "items", "inventory")
    key = next(k for k, v in items.items() if v["name"] == "生锈的钥匙")
    characters = await data(store, session_id, "characters")
    assert characters["tobin"]["name"] == "Old Tobin" and characters["tobin"]["aliases"] == ["老托宾"]
    relations = await data(store, session_id, "relations")
    [relation] = relations.values()
    assert (relation["from"], relation["to"], relation["kind"]) == ("traveller", "tobin", "感谢")
    [event] = (await data(store, session_id, "events")).values()
    assert event["terms"] == [{"source": "inventory", "kind": "item", "id": key, "name": "生锈的钥匙"}]


async def test_an_answer_that_breaks_the_schema_fails_world_ir_and_commits_nothing_of_it(stack) -> None:
    model, stub, store = stack
    session_id = await new_session(stub)
    model.requests.clear()
    model.replies = {"narrator": [recorded("narrator-en-1")], "inventory/ledger": [recorded("inventory-ledger-en-1a"), recorded("inventory-ledger-en-1b")],
                     QUEST_LOG: [recorded("core-quest-log-none")], EXTRACT: [recorded("world-ir-bad-missing-clues")]}
    turn = await play(stub, session_id, TURN_1)
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, "a helper's bad answer does not stop the story"
    ran = results(turn)
    assert ran["world-ir"].status == resources_pb2.RUNTIME_STATUS_FAILED and "'clues' is a required property" in ran["world-ir"].reason, ran["world-ir"].reason
    for namespace in ("characters", "relations", "events", "clues"):
        assert await data(store, session_id, namespace) == {}
    assert "rusty-key" in await data(store, session_id, "items", "inventory"), "the other plugins' units still commit"
