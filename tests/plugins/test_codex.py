"""codex in process: matching and merging entries (never a duplicate), the runtime through the kernel's
function runner with a fake model, and the scripted model's answers."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import MappingProxyType, SimpleNamespace

from services.gateway.chat import Message
from services.gateway.providers.scripted.plugin_writers.codex import entries_in
from services.gateway.providers.scripted.story_replies import structured_reply
from services.registry.package_loader import load_package
from services.scheduler.execution.plugin_data_view import PluginDataView
from services.scheduler.function.runtime import FunctionContext, run_function
from shared.plugin_code import PluginFile
from shared.plugin_sdk import CancellationSignal
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.settings import REPO_ROOT

PLUGIN = REPO_ROOT / "plugins" / "codex"
spec = importlib.util.spec_from_file_location("codex_lib_codex", PLUGIN / "lib" / "codex.py")
codex = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = codex
spec.loader.exec_module(codex)

CAST = ({"id": "mira", "name": "Mira", "aliases": ["米拉"], "description": "The harbor-master."},
        {"id": "tobin", "name": "Old Tobin", "aliases": ["Tobin", "老托宾"], "description": "The innkeeper."},
        {"id": "traveller", "name": "The traveller", "type": "player", "description": "The player's character."})
SEATS = ({"id": "main", "role": "player", "currentCharacterId": "traveller", "characterIds": ["traveller"]},)
STORY = {"segments": [{"kind": "narration", "text": "Rain lashes the harbour."},
                      {"kind": "dialogue", "speaker": "Mira", "text": "The lamp on Gull Point has been dark three nights."}]}


def entry(name, category, description, **more):
    return {"name": name, "category": category, "description": description, **more}


def stored(key, name, category, description, first=1, last=1, mentions=1, **more):
    return {"id": key, "name": name, "category": category, "aliases": more.pop("aliases", []), "description": description,
            "firstSeen": first, "lastSeen": last, "mentions": mentions, **more}


# ---- matching and merging ---------------------------------------------------------------------------------

def test_names_compare_without_case_width_articles_or_punctuation() -> None:
    assert codex.norm("The  Lighthouse!") == codex.norm("lighthouse") == codex.norm("ＬＩＧＨＴＨＯＵＳＥ") == "lighthouse"
    assert codex.norm("A Letter") == "letter" and codex.norm("Theodore") == "theodore"
    assert codex.slug("The Drowned Lantern") == "drowned-lantern" and codex.slug("灯塔").startswith("e-")


def test_a_known_entry_is_enriched_never_duplicated() -> None:
    known = {"places": {"lighthouse": stored("lighthouse", "The lighthouse", "place", "A tower on Gull Point.", aliases=["Gull Point light"])},
             "people": {}, "items": {}, "rumours": {}}
    changed, report = codex.plan([
        entry("lighthouse", "place", "Its lamp has been dark three nights."),              # the same, without "the": enriched
        entry("the gull point light", "item", "A tower on Gull Point."),                   # its alias, another category: same entry
        entry("LIGHTHOUSE", "place", "Its lamp has been dark three nights."),               # nothing new
    ], known, CAST, 3)
    record = changed["places"]["lighthouse"]
    assert record["description"] == "A tower on Gull Point. Its lamp has been dark three nights."
    assert (record["firstSeen"], record["lastSeen"], record["mentions"], record["category"]) == (1, 3, 2, "place")
    assert record["aliases"] == ["Gull Point light"], "the spellings of a known name are not added again"
    assert set(changed) == {"places"} and report == {"added": [], "enriched": ["The lighthouse"], "seen": []}


def test_people_are_the_world_models_characters() -> None:
    known = {"places": {}, "people": {}, "items": {}, "rumours": {}}
    changed, report = codex.plan([entry("Tobin", "person", "Keeps the inn."), entry("老托宾", "person", "Keeps the inn."),
                                  entry("Mira", "place", "The harbor-master."), entry("Captain Rhee", "person", "A sailor.")],
                                 known, CAST, 2)
    tobin = changed["people"]["old-tobin"]
    assert (tobin["name"], tobin["characterId"], tobin["aliases"], tobin["mentions"]) == ("Old Tobin", "tobin", ["Tobin", "老托宾"], 1)
    assert changed["people"]["mira"]["category"] == "person", "a character's name is a person whatever the model said"
    assert "characterId" not in changed["people"]["captain-rhee"]
    assert report == {"added": ["Old Tobin", "Mira", "Captain Rhee"], "enriched": [], "seen": []}, "an entry of this turn is only added"


def test_a_new_entry_whose_key_is_taken_gets_another() -> None:
    known = {"places": {"lens": stored("lens", "Lens", "place", "A cove called the Lens.")}, "people": {}, "items": {}, "rumours": {}}
    changed, _ = codex.plan([entry("Lens cove", "place", "x")], known, (), 1)
    assert set(changed["places"]) == {"lens-cove"}
    changed, _ = codex.plan([entry("lens!", "item", "The lighthouse's lens.")], {**known, "places": {"lens": {**known["places"]["lens"], "name": "Cove"}}}, (), 1)
    assert set(changed["items"]) == {"lens-2"}


def test_descriptions_grow_only_with_what_is_new_and_within_the_limit() -> None:
    assert codex.enriched("A tower.", "a tower") == "A tower."
    assert codex.enriched("A tower", "A tower on the cliffs.") == "A tower on the cliffs."
    assert codex.enriched("A tower", "Dark for three nights.") == "A tower. Dark for three nights."
    assert codex.enriched("x" * 590, "Something else entirely.") == "x" * 590


def test_a_malformed_answer_is_refused_with_what_is_wrong() -> None:
    for answer, problem in (({"entries": [entry("Lamp", "thing", "x")]}, "entries[0].category must be one of"),
                            ({"entries": [entry("!!!", "item", "x")]}, "entries[0].name has no letters"),
                            ({"entries": [entry("Lamp", "item", "x", aliases="lamp")]}, "entries[0].aliases must be a list"),
                            ({"entries": [entry("Lamp", "item", "x", note="?")]}, "unknown fields: note"), ([], "is not")):
        try:
            codex.check_answer(answer)
        except codex.AnswerError as error:
            assert problem in str(error), (problem, str(error))
        else:
            raise AssertionError(f"accepted: {answer}")


# ---- the runtime, through the kernel's function runner -----------------------------------------------------

class FakeGateway:
    def __init__(self, answer):
        self.answer, self.calls = answer, []

    async def generate_object(self, prompt=None, *, schema, system=None, name="result", **_):
        self.calls.append({"prompt": prompt, "system": system, "schema": schema, "name": name})
        return self.answer


def ctx(*, message="", story=STORY, data=None, turn=1, locale="en", answer=None) -> FunctionContext:
    committed = dict(data or {})

    async def load(namespace):
        return {k: v for k, v in committed.items() if namespace is None or k[0] == namespace}

    context = FunctionContext(
        runtime_id="codex", plugin_id="codex", inputs=MappingProxyType({"story": {"value": story}}), player_message=message,
        player_actions=(), logical_turn=turn, execution=MappingProxyType({"origin": "player", "locale": locale}), recursion_depth=0,
        random=SeededRandom("test"), plugin_data=PluginDataView("codex", load), signal=CancellationSignal(), user_settings=MappingProxyType({}))
    context.world = SimpleNamespace(characters=CAST, seats=SEATS)
    context.gateway = FakeGateway(answer)
    return context


async def run(context: FunctionContext):
    [compiled] = [r.compiled for r in load_package(PLUGIN, source="builtin").runtimes if r.runtime_id == "codex"]
    return await run_function(context, PluginFile("codex", PLUGIN, compiled.function_part.handler), compiled.function_part.timeout_ms)


async def test_codex_asks_with_its_prompt_and_writes_the_merged_entries() -> None:
    data = {("places", "harbour"): stored("harbour", "The harbour", "place", "Boats and nets.", aliases=["the harbor"])}
    context = ctx(message="I ask Mira about the lamp.", data=data, turn=4, answer={"entries": [
        entry("Mira", "person", "The harbor-master; she blames herself."), entry("Gull Point", "place", "A headland with a dark lamp."),
        entry("the Harbor", "place", "Rain lashes it."), entry("Traveller", "person", "That is me.")]})
    done = await run(context)
    assert done.status == "success", done.reason
    [call] = context.gateway.calls
    assert call["name"] == "codex-entries" and call["schema"]["title"] == "codex.entries@1" and call["prompt"] == "I ask Mira about the lamp."
    body = (PLUGIN / "PLUGIN.md").read_text().split("---", 2)[2].strip()
    assert call["system"].startswith(body)
    inputs = json.loads(call["system"].split("<runtime-inputs>")[1].split("</runtime-inputs>")[0])
    assert inputs["story"] == "Rain lashes the harbour.\nMira: \u201cThe lamp on Gull Point has been dark three nights.\u201d"
    assert inputs["known"] == [{"name": "The harbour", "category": "place", "aliases": ["the harbor"], "description": "Boats and nets."}]
    assert [c["name"] for c in inputs["characters"]] == ["Mira", "Old Tobin"], "the player's own character is left out"
    writes = {(w["payload"]["namespace"], w["payload"]["key"]): w["payload"]["value"] for w in done.writes}
    assert set(writes) == {("people", "mira"), ("places", "gull-point"), ("places", "harbour")}
    assert writes[("places", "harbour")]["description"] == "Boats and nets. Rain lashes it." and writes[("places", "harbour")]["firstSeen"] == 1
    assert writes[("people", "mira")] == {"id": "mira", "name": "Mira", "category": "person", "aliases": [], "characterId": "mira",
                                          "description": "The harbor-master; she blames herself.", "firstSeen": 4, "lastSeen": 4, "mentions": 1}
    assert done.canonical_value == {"added": ["Mira", "Gull Point"], "enriched": ["The harbour"], "seen": []}


async def test_codex_reads_its_zh_prompt_and_skips_a_turn_without_story() -> None:
    context = ctx(message="我四处看看。", locale="zh", answer={"entries": []})
    done = await run(context)
    assert done.status == "success" and not done.writes
    assert context.gateway.calls[0]["system"].startswith((PLUGIN / "PLUGIN.zh.md").read_text().split("---", 2)[2].strip())
    quiet = ctx(story={"segments": []}, answer={"entries": []})
    assert (await run(quiet)).canonical_value == {"added": [], "enriched": [], "seen": []} and quiet.gateway.calls == []


async def test_a_malformed_answer_fails_the_codex_and_writes_nothing() -> None:
    done = await run(ctx(answer={"entries": [entry("Mira", "person", "ok"), entry("Lamp", "gadget", "bad")]}))
    assert done.status == "failed" and "entries[1].category must be one of" in done.reason and not done.writes


# ---- the scripted model ------------------------------------------------------------------------------------

def test_scripted_codex_lists_the_cast_places_items_and_rumours_it_does_not_know() -> None:
    chars = [{"name": "Mira", "aliases": ["米拉"], "description": "The harbor-master."}, {"name": "Old Tobin", "aliases": ["Tobin"]}]
    story = "In the Drowned Lantern inn on the harbor, salt wind tugs at the ropes.\nMira: \u201cCareful.\u201d"
    found = entries_in("I ask Tobin about the missing boats and pick up the rusty key.", story, chars, set())
    assert [(e["name"], e["category"]) for e in found] == [
        ("Mira", "person"), ("Old Tobin", "person"), ("The Drowned Lantern", "place"), ("The harbour", "place"), ("Rusty key", "item"),
        ("The missing boats", "rumour")]
    assert found[0]["description"] == "The harbor-master." and found[1]["description"] == "Someone the story names."
    assert found[4]["description"] == "The player asks Tobin about the missing boats and pick up the rusty key."
    known = {"mira", "old tobin", "tobin", "drowned lantern", "inn", "harbour", "harbor", "rusty key", "missing boats"}
    assert entries_in("I ask Tobin about the missing boats and pick up the rusty key.", story, chars, known) == []


def test_scripted_model_answers_the_codex_request() -> None:
    schema = json.loads((PLUGIN / "schemas" / "entries.schema.json").read_text())
    inputs = {"story": "The lighthouse stands dark.", "known": [{"name": "Mira", "category": "person", "description": "x"}],
              "characters": [{"name": "Mira"}, {"name": "Sela", "description": "A wandering scholar."}]}
    system = "You keep the codex...\n\n<runtime-inputs>\n" + json.dumps(inputs) + "\n</runtime-inputs>"
    messages = [Message(role="system", content=system), Message(role="user", content="I ask Mira and Sela about it.")]
    reply = structured_reply("codex-entries", schema, messages, "I ask Mira and Sela about it.", "seed")
    assert reply == {"entries": [{"name": "Sela", "category": "person", "description": "A wandering scholar."},
                                 {"name": "The lighthouse", "category": "place", "description": "The lighthouse stands dark."}]}
    codex.check_answer(reply)
