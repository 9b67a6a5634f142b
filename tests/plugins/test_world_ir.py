"""world-ir in process: names resolved to stable ids (world cast, recorded characters, every vocabulary), the
records merged turn by turn, the handler through the kernel's function runner (a fake model), malformed answers,
the world-ir.vocabulary@1 contract its providers share (inventory's vocabulary runtime), and the scripted writer."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from types import MappingProxyType, SimpleNamespace

import jsonschema
import pytest

from services.gateway.chat import Message
from services.gateway.providers.scripted.plugin_writers.world_ir import extraction
from services.gateway.providers.scripted.story_replies import structured_reply
from shared.settings import REPO_ROOT
from tests.plugins.test_builtin_plugins import ctx, run

PLUGINS = REPO_ROOT / "plugins"
PLUGIN = PLUGINS / "world-ir"
SCHEMA = {name: json.loads((PLUGIN / "schemas" / f"{name}.schema.json").read_text())
          for name in ("extraction", "facts", "character", "relation", "event", "clue", "vocabulary", "vocabularies")}


def _module(name: str, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


facts = _module("world_ir_lib_facts", PLUGIN / "lib" / "facts.py")
CAST = [{"id": "mira", "name": "Mira", "aliases": ["米拉"]}, {"id": "tobin", "name": "Old Tobin", "aliases": ["Tobin", "老托宾"]},
        {"id": "traveller", "name": "The traveller", "type": "player"}]
ITEMS = {"source": "inventory", "kind": "item", "terms": [{"id": "rusty-key", "name": "rusty key", "note": "carried ×1"},
                                                          {"id": "brass-lantern", "name": "brass lantern"}]}
QUESTS = {"source": "core-quest", "kind": "quest", "terms": [{"id": "find-the-missing-boats", "name": "Find the missing boats"}]}
ANSWER = {
    "characters": [{"name": "Tobin", "description": "the innkeeper"}, {"name": "a hooded stranger"}],
    "relations": [{"from": "you", "to": "Old Tobin", "kind": "thanked", "note": "for the fire"},
                  {"from": "the hooded stranger", "to": "you", "kind": "watches"}],
    "events": [{"summary": "You took the rusty key.", "participants": ["you", "Tobin"], "terms": ["the rusty key", "Find the missing boats", "the lens"]}],
    "clues": [{"text": "The stranger asked about the lens.", "about": ["a hooded stranger", "the lens"]}],
}


def test_names_resolve_to_the_world_the_record_and_the_vocabularies() -> None:
    names = facts.Names(CAST, {"stranger": {"id": "stranger", "name": "Stranger", "aliases": ["the hooded man"]}}, [ITEMS, QUESTS])
    assert names.character("Tobin")["id"] == "tobin" and names.character("老托宾")["id"] == "tobin"
    assert names.character("you")["id"] == "traveller" and names.character("玩家")["id"] == "traveller"
    assert names.character("The hooded man")["id"] == "stranger"
    new = names.character("Captain Rhee")
    assert new == {"id": "captain-rhee", "name": "Captain Rhee", "world": False, "new": True}
    assert names.character("captain rhee")["new"] is False, "known from then on"
    assert names.term("The rusty keys") == {"source": "inventory", "kind": "item", "id": "rusty-key", "name": "rusty key"}
    assert names.ref("find the missing boats")["id"] == "find-the-missing-boats"
    assert names.ref("the lens") == {"source": "world-ir", "kind": "mention", "id": "the-lens", "name": "the lens"}
    assert facts.Names([], {}, []).character("you")["id"] == "player", "no player character in the world: `player`"
    assert facts.slug("灯塔的镜片", "mention").startswith("mention-")


def test_merge_turn_keeps_ids_and_the_turns_that_saw_them() -> None:
    names = facts.Names(CAST, {}, [ITEMS, QUESTS])
    value, writes = facts.merge_turn(ANSWER, 3, names, {})
    jsonschema.validate(value, SCHEMA["facts"])
    assert set(writes["characters"]) == {"tobin", "a-hooded-stranger", "traveller"}
    tobin = writes["characters"]["tobin"]
    assert tobin["name"] == "Old Tobin" and tobin["world"] and tobin["description"] == "the innkeeper" and tobin["aliases"] == ["Tobin"]
    assert (tobin["firstSeen"], tobin["lastSeen"], tobin["turns"]) == (3, 3, 1)
    assert set(writes["relations"]) == {"traveller-thanked-tobin", "a-hooded-stranger-watches-traveller"}
    [event] = writes["events"].values()
    assert event["id"] == "t3-1" and event["participants"] == ["traveller", "tobin"]
    assert [(t["source"], t["id"]) for t in event["terms"]] == [("inventory", "rusty-key"), ("core-quest", "find-the-missing-boats"),
                                                                 ("world-ir", "the-lens")]
    assert value["terms"] == event["terms"][:2], "the vocabulary terms the turn named"
    [clue] = writes["clues"].values()
    assert clue["about"][0] == {"source": "world-ir", "kind": "character", "id": "a-hooded-stranger", "name": "a hooded stranger"}
    for namespace in ("character", "relation", "event", "clue"):
        for record in writes[f"{namespace}s"].values():
            jsonschema.validate(record, SCHEMA[namespace])

    # A later turn: the same ids, firstSeen kept, lastSeen and turns moved on.
    known = {namespace: dict(records) for namespace, records in writes.items()}
    names = facts.Names(CAST, known["characters"], [ITEMS])
    later, again = facts.merge_turn({"characters": [{"name": "A hooded stranger"}], "relations": [{"from": "you", "to": "Tobin", "kind": "thanked"}],
                                     "events": [], "clues": [{"text": "The stranger asked about the lens.", "about": []}]}, 5, names, known)
    assert (again["characters"]["a-hooded-stranger"]["firstSeen"], again["characters"]["a-hooded-stranger"]["lastSeen"]) == (3, 5)
    assert again["characters"]["a-hooded-stranger"]["turns"] == 2
    assert again["relations"]["traveller-thanked-tobin"]["note"] == "for the fire", "a relation keeps its note"
    assert list(again["clues"]) == list(writes["clues"]) and again["clues"][clue["id"]]["firstSeen"] == 3
    assert later["events"] == []


@pytest.mark.parametrize(("answer", "where"), [
    ({"characters": [], "relations": [], "events": []}, "'clues' is a required property"),
    ({**ANSWER, "events": [{"summary": "", "participants": [], "terms": []}]}, "/events/0/summary"),
    ({**ANSWER, "characters": [{"name": "Mira", "mood": "sad"}]}, "/characters/0"),
    (["not", "an", "object"], "is not of type 'object'"),
])
def test_a_malformed_extraction_is_refused_naming_where(answer, where) -> None:
    with pytest.raises(facts.ExtractionError, match="world-ir's schema") as error:
        facts.check_extraction(answer, SCHEMA["extraction"])
    assert where in str(error.value)


class FakeGateway:
    def __init__(self, answer):
        self.answer, self.calls = answer, []

    async def generate_object(self, prompt=None, *, schema, messages=None, system=None, name="result", temperature=None):
        self.calls.append({"system": system, "messages": messages, "schema": schema, "name": name})
        return self.answer


def _ctx(answer, *, data=None, locale="en", vocabularies=(ITEMS, QUESTS), story="Old Tobin hands you the rusty key."):
    inputs = {"narrative": {"value": story}}
    if vocabularies is not None:
        inputs["vocabularies"] = {"value": list(vocabularies)}
    context = ctx("world-ir", "world-ir", message="I take the rusty key and thank Tobin.", inputs=inputs, data=data, turn=4)
    return dataclasses.replace(context, gateway=FakeGateway(answer), world=SimpleNamespace(characters=CAST),
                               execution=MappingProxyType({"origin": "player", "locale": locale}))


async def test_the_handler_asks_with_its_prompt_and_writes_every_namespace() -> None:
    context = _ctx(ANSWER)
    done = await run("world-ir", "world-ir", context)
    assert done.status == "success", done.reason
    jsonschema.validate(done.canonical_value, SCHEMA["facts"])
    assert done.canonical_value["turn"] == 4
    assert {(w["payload"]["namespace"], w["payload"]["key"]) for w in done.writes} >= {("characters", "tobin"), ("events", "t4-1"),
                                                                                       ("relations", "traveller-thanked-tobin")}
    [call] = context.gateway.calls
    body = (PLUGIN / "PLUGIN.md").read_text().split("\n---", 1)[1].strip()
    assert call["system"].startswith(body) and call["name"] == "world-ir-extraction" and call["schema"] == SCHEMA["extraction"]
    shown = json.loads(call["system"].split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])
    assert shown["narrative"] == {"value": "Old Tobin hands you the rusty key."}
    assert shown["known"]["value"]["characters"][2] == {"id": "traveller", "name": "The traveller", "player": True}
    assert [v["source"] for v in shown["vocabularies"]["value"]] == ["inventory", "core-quest"]
    assert call["messages"] == [{"role": "user", "content": "I take the rusty key and thank Tobin."}]
    zh = _ctx({"characters": [], "relations": [], "events": [], "clues": []}, locale="zh", vocabularies=None)
    done = await run("world-ir", "world-ir", zh)
    assert done.status == "success" and done.writes == []
    assert zh.gateway.calls[0]["system"].startswith((PLUGIN / "PLUGIN.zh.md").read_text().split("\n---", 2)[1].strip())


async def test_a_malformed_answer_fails_the_run_and_writes_nothing() -> None:
    done = await run("world-ir", "world-ir", _ctx({**ANSWER, "clues": [{"text": "x"}]}))
    assert done.status == "failed" and "/clues/0" in done.reason and done.writes == []


def test_every_provider_publishes_the_same_vocabulary_schema() -> None:
    copies = {plugin: json.loads((PLUGINS / plugin / "schemas/vocabulary.schema.json").read_text()) for plugin in ("world-ir", "core-quest", "inventory")}
    assert copies["world-ir"] == copies["core-quest"] == copies["inventory"]
    for plugin in copies:
        manifest = (PLUGINS / plugin / "PLUGIN.md").read_text()
        assert "world-ir.vocabulary@1:\n    schema: ./schemas/vocabulary.schema.json" in manifest, plugin
    jsonschema.validate([ITEMS, QUESTS], SCHEMA["vocabularies"])


async def test_inventory_vocabulary_names_the_carried_items() -> None:
    data = {("items", "rusty-key"): {"id": "rusty-key", "name": "rusty key", "quantity": 1, "equipped": False},
            ("items", "brass-lantern"): {"id": "brass-lantern", "name": "brass lantern", "quantity": 1, "equipped": True}}
    done = await run("inventory", "vocabulary", ctx("inventory", "inventory/vocabulary", data=data))
    assert done.status == "success" and done.writes == []
    assert done.canonical_value == {"source": "inventory", "kind": "item", "terms": [
        {"id": "brass-lantern", "name": "brass lantern", "note": "carried ×1, in hand"},
        {"id": "rusty-key", "name": "rusty key", "note": "carried ×1"}]}
    jsonschema.validate(done.canonical_value, SCHEMA["vocabulary"])
    empty = await run("inventory", "vocabulary", ctx("inventory", "inventory/vocabulary"))
    assert empty.canonical_value == {"source": "inventory", "kind": "item", "terms": []}


def test_scripted_extraction_names_the_cast_and_the_vocabularies() -> None:
    known = [{"id": "mira", "name": "Mira"}, {"id": "tobin", "name": "Old Tobin", "aliases": ["Tobin"]}, {"id": "traveller", "name": "The traveller", "player": True}]
    answer = extraction("I promise Mira I will find the missing boats.", "Old Tobin heard strange noises last night.", known, [ITEMS, QUESTS])
    jsonschema.validate(answer, SCHEMA["extraction"])
    assert [c["name"] for c in answer["characters"]] == ["Mira", "Old Tobin"]
    assert answer["relations"] == [{"from": "you", "to": "Mira", "kind": "promised to help", "note": "promise Mira you will find the missing boats"}]
    assert answer["events"][0]["summary"] == "You promise Mira you will find the missing boats."
    assert answer["events"][0]["terms"] == ["Find the missing boats"]
    assert answer["clues"] == [{"text": "Old Tobin heard strange noises last night.", "about": ["Old Tobin"]}]
    searched = extraction("I search the harbor for the missing boats with the rusty key.", "", known, [ITEMS, QUESTS])
    assert searched["events"][0]["terms"] == ["rusty key", "Find the missing boats"]
    inputs = {"narrative": {"value": "Mira waits."}, "known": {"value": {"characters": known}}, "vocabularies": {"value": [ITEMS]}}
    system = "x\n<runtime-inputs>\n" + json.dumps(inputs) + "\n</runtime-inputs>"
    reply = structured_reply("world-ir-extraction", SCHEMA["extraction"], [Message("system", system), Message("user", "I light the brass lantern.")],
                             "I light the brass lantern.", "s")
    jsonschema.validate(reply, SCHEMA["extraction"])
    assert reply["events"][0]["terms"] == ["brass lantern"] and reply["characters"] == [{"name": "Mira"}]
