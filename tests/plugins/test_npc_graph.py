"""npc-graph in process: fact versions (one open version per fact), mentions and the retrieval, the extractor
and the retriever through the kernel's function runner with a fake model, and the scripted model's answers."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import MappingProxyType, SimpleNamespace

from services.gateway.chat import Message
from services.gateway.providers.scripted.plugin_writers.npc_graph import facts_in
from services.gateway.providers.scripted.story_replies import structured_reply
from services.registry.package_loader import load_package
from services.scheduler.execution.plugin_data_view import PluginDataView
from services.scheduler.function.runtime import FunctionContext, run_function
from shared.plugin_code import PluginFile
from shared.plugin_sdk import CancellationSignal
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.settings import REPO_ROOT

PLUGIN = REPO_ROOT / "plugins" / "npc-graph"


def _lib(name: str):
    spec = importlib.util.spec_from_file_location(f"npc_graph_lib_{name}", PLUGIN / "lib" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


graph = _lib("graph")
CAST = ({"id": "mira", "name": "Mira", "aliases": ["米拉"]}, {"id": "tobin", "name": "Old Tobin", "aliases": ["Tobin", "老托宾"]},
        {"id": "sela", "name": "Sela", "aliases": ["塞拉"]}, {"id": "traveller", "name": "The traveller", "type": "player"},
        {"id": "ann", "name": "Ann", "aliases": ["the twin"]}, {"id": "bea", "name": "Bea", "aliases": ["the twin"]})
SEATS = ({"id": "main", "role": "player", "currentCharacterId": "traveller", "characterIds": ["traveller"]},)
STORY = {"segments": [{"kind": "narration", "text": "The inn is warm."},
                      {"kind": "dialogue", "speaker": "Old Tobin", "text": "Mira never trusted me, you know."}],
         "cues": {"scene": "The inn", "present": ["Old Tobin", "Mira"]}}


def fact(subject, relation, obj, state, **more):
    return {"subject": subject, "relation": relation, "object": obj, "state": state, "evidence": "the story says so", **more}


def version(subject_id, subject, relation, object_id, obj, state, since, until=None):
    key = f"{subject_id}.{relation}.{object_id}"
    return {"id": f"{key}@{since}", "fact": key, "subject": subject, "subjectId": subject_id, "relation": relation, "object": obj,
            "objectId": object_id, "state": state, "evidence": "", "validFrom": since, "validTo": until}


def records(*versions):
    return {v["id"]: v for v in versions}


# ---- versions ---------------------------------------------------------------------------------------

def test_a_changed_state_closes_the_open_version_and_opens_one() -> None:
    known = records(version("mira", "Mira", "trust", "tobin", "Old Tobin", "distrusts", 1))
    writes, changed = graph.plan_changes([fact("Mira", "trust", "Tobin", "trusts")], known, CAST, 4)
    assert writes == [("close", "mira.trust.tobin@1", 4), ("set", "mira.trust.tobin@4", {
        **version("mira", "Mira", "trust", "tobin", "Old Tobin", "trusts", 4), "evidence": "the story says so"})]
    assert changed == [{"fact": "mira.trust.tobin", "subject": "Mira", "relation": "trust", "object": "Old Tobin", "state": "trusts",
                        "was": "distrusts"}]
    after = graph.applied(known, writes)
    assert [(v["state"], v["validFrom"], v["validTo"]) for v in after.values()] == [("distrusts", 1, 4), ("trusts", 4, None)]
    assert len(graph.open_versions(after)) == 1


def test_the_same_state_again_ended_and_new_facts() -> None:
    known = records(version("mira", "Mira", "trust", "tobin", "Old Tobin", "distrusts", 1),
                    version("sela", "Sela", "kin", "tobin", "Old Tobin", "is the daughter of", 2))
    writes, changed = graph.plan_changes([
        fact("MIRA", "trust", "老托宾", "Distrusts."),                       # the same, however written: no change
        fact("Sela", "kin", "Old Tobin", "is the daughter of", ended=True),  # ends: closed, nothing opens
        fact("Sela", "feeling", "Captain Rhee", "admires"),                  # someone the world does not know: a slug
        fact("Mira", "bond", "the twin", "is a friend of"),                  # ambiguous: left out
        fact("Mira", "bond", "Mira", "is a friend of"),                      # oneself: left out
        fact("Mira", "trust", "Sela", "trusts"), fact("Mira", "trust", "Sela", "suspects"),  # the first of two counts
        fact("Mira", "feeling", "Tobin", "pities", ended=True),              # nothing open to end
    ], known, CAST, 5)
    assert [(kind, key) for kind, key, _value in writes] == [
        ("close", "sela.kin.tobin@2"), ("set", "sela.feeling.captain-rhee@5"), ("set", "mira.trust.sela@5")]
    assert [(c["fact"], c["state"], c["was"]) for c in changed] == [
        ("sela.kin.tobin", None, "is the daughter of"), ("sela.feeling.captain-rhee", "admires", None), ("mira.trust.sela", "trusts", None)]
    assert writes[1][2]["object"] == "Captain Rhee"


def test_a_malformed_answer_is_refused_with_what_is_wrong() -> None:
    for answer, problem in (({"facts": [fact("Mira", "hates", "Tobin", "x")]}, "facts[0].relation must be one of"),
                            ({"facts": [fact("Mira", "trust", "Tobin", "")]}, "facts[0].state must be a non-empty string"),
                            ({"facts": [{**fact("Mira", "trust", "Tobin", "trusts"), "why": "?"}]}, "unknown fields: why"),
                            ({"changes": []}, "is not {\"facts\""), ({"facts": [fact("A", "trust", "B", "trusts")] * 9}, "at most 8")):
        try:
            graph.check_answer(answer)
        except graph.AnswerError as error:
            assert problem in str(error), (problem, str(error))
        else:
            raise AssertionError(f"accepted: {answer}")


def test_people_lists_each_characters_open_relationships() -> None:
    known = records(version("mira", "Mira", "trust", "tobin", "Old Tobin", "distrusts", 1, 3),
                    version("mira", "Mira", "trust", "tobin", "Old Tobin", "trusts", 3),
                    version("sela", "Sela", "kin", "tobin", "Old Tobin", "is the daughter of", 2),
                    version("mira", "米拉", "trust", "sela", "塞拉", "不信任", 4))
    people = graph.people(known)
    assert people["tobin"]["relations"] == ["Sela is the daughter of Old Tobin", "Mira trusts Old Tobin"]
    assert people["mira"]["relations"] == ["Mira trusts Old Tobin", "米拉不信任塞拉"]
    assert people["sela"]["summary"] == "Sela is the daughter of Old Tobin; 米拉不信任塞拉"


# ---- mentions and retrieval --------------------------------------------------------------------------

def test_mentions_need_whole_words_and_a_longer_name_wins() -> None:
    people = [("tobin", ["Old Tobin", "Tobin"]), ("old", ["Old"]), ("rin", ["Rin"]), ("mira", ["Mira", "米拉"])]
    assert graph.mentioned("In spring I ask Old Tobin about mira.", people) == ["tobin", "mira"]
    assert graph.mentioned("我问米拉灯塔的事", people) == ["mira"]
    assert graph.mentioned("Old friends", people) == ["old"]


def test_retrieval_ranks_named_then_present_then_neighbours_and_keeps_what_changed() -> None:
    known = records(version("mira", "Mira", "trust", "tobin", "Old Tobin", "distrusts", 1, 3),
                    version("mira", "Mira", "trust", "tobin", "Old Tobin", "trusts", 3),
                    version("sela", "Sela", "kin", "tobin", "Old Tobin", "is the daughter of", 2),
                    version("sela", "Sela", "feeling", "rhee", "Captain Rhee", "admires", 4),
                    version("rhee", "Captain Rhee", "duty", "guild", "the guild", "works for", 5))
    found = graph.retrieve(known, [("mira", "Mira", "named")])
    assert found["lines"] == ["Mira trusts Old Tobin (since turn 3; before: distrusts)", "Sela is the daughter of Old Tobin"]
    assert found["facts"][0]["was"] == "distrusts" and "was" not in found["facts"][1]
    assert graph.retrieve(known, [("mira", "Mira", "named")], hops=1)["lines"] == ["Mira trusts Old Tobin (since turn 3; before: distrusts)"]
    both = graph.retrieve(known, [("sela", "Sela", "named"), ("tobin", "Old Tobin", "present")], limit=3)
    assert both["lines"] == ["Sela is the daughter of Old Tobin", "Sela admires Captain Rhee", "Mira trusts Old Tobin (since turn 3; before: distrusts)"]
    assert graph.retrieve(known, []) == {"focus": [], "facts": [], "lines": []}


# ---- the runtimes, through the kernel's function runner -----------------------------------------------

class FakeGateway:
    def __init__(self, answer):
        self.answer, self.calls = answer, []

    async def generate_object(self, prompt=None, *, schema, system=None, name="result", **_):
        self.calls.append({"prompt": prompt, "system": system, "schema": schema, "name": name})
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def ctx(runtime: str, *, message: str = "", inputs=None, data=None, settings=None, turn: int = 1, locale: str = "en", answer=None,
        actions=()) -> FunctionContext:
    committed = dict(data or {})

    async def load(namespace):
        return {k: v for k, v in committed.items() if namespace is None or k[0] == namespace}

    context = FunctionContext(
        runtime_id=f"npc-graph/{runtime}", plugin_id="npc-graph", inputs=MappingProxyType(inputs or {}), player_message=message,
        player_actions=tuple(actions), logical_turn=turn, execution=MappingProxyType({"origin": "player", "locale": locale}),
        recursion_depth=0, random=SeededRandom("test"), plugin_data=PluginDataView("npc-graph", load), signal=CancellationSignal(),
        user_settings=MappingProxyType(settings or {}))
    context.world = SimpleNamespace(characters=CAST, seats=SEATS)
    context.gateway = FakeGateway(answer)
    return context


async def run(runtime: str, context: FunctionContext):
    [compiled] = [r.compiled for r in load_package(PLUGIN, source="builtin").runtimes if r.runtime_id == f"npc-graph/{runtime}"]
    return await run_function(context, PluginFile("npc-graph", PLUGIN, compiled.function_part.handler), compiled.function_part.timeout_ms)


def data_of(versions) -> dict:
    return {("facts", v["id"]): v for v in versions}


async def test_extractor_asks_with_its_prompt_and_commits_versions() -> None:
    known = data_of([version("mira", "Mira", "trust", "tobin", "Old Tobin", "distrusts", 1)])
    context = ctx("extractor", message="I tell Mira that Tobin saved her brother.", inputs={"story": {"value": STORY}}, data=known, turn=3,
                  answer={"facts": [fact("Mira", "trust", "Tobin", "trusts"), fact("Sela", "kin", "Old Tobin", "is the daughter of")]})
    done = await run("extractor", context)
    assert done.status == "success", done.reason
    [call] = context.gateway.calls
    assert call["name"] == "npc-graph-facts" and call["schema"]["title"] == "npc-graph.facts@1"
    assert call["prompt"] == "I tell Mira that Tobin saved her brother."
    body = (PLUGIN / "runtimes" / "extractor" / "RUNTIME.md").read_text().split("---", 2)[2].strip()
    assert call["system"].startswith(body)
    inputs = json.loads(call["system"].split("<runtime-inputs>")[1].split("</runtime-inputs>")[0])
    assert inputs["story"] == "The inn is warm.\nOld Tobin: \u201cMira never trusted me, you know.\u201d"
    assert inputs["open"] == ["Mira distrusts Old Tobin [trust]"]
    assert {"name": "Old Tobin", "aliases": ["Tobin", "老托宾"]} in inputs["characters"]
    writes = [(w["type"], w["payload"]["namespace"], w["payload"]["key"]) for w in done.writes]
    assert writes[:3] == [("plugin.data.update", "facts", "mira.trust.tobin@1"), ("plugin.data", "facts", "mira.trust.tobin@3"),
                          ("plugin.data", "facts", "sela.kin.tobin@3")]
    assert done.writes[0]["payload"]["operations"] == [{"op": "set", "path": "/validTo", "value": 3}]
    assert ("plugin.data", "scene", "current") in writes and ("plugin.data", "people", "tobin") in writes
    scene = next(w["payload"]["value"] for w in done.writes if w["payload"]["namespace"] == "scene")
    assert scene == {"present": ["tobin", "mira"], "turn": 3}
    value = done.canonical_value
    assert [(f["fact"], f["state"], f["since"]) for f in value["facts"]] == [("mira.trust.tobin", "trusts", 3), ("sela.kin.tobin", "is the daughter of", 3)]
    assert [c["was"] for c in value["changed"]] == ["distrusts", None]


async def test_extractor_reads_its_zh_prompt_in_a_zh_session() -> None:
    context = ctx("extractor", message="我看着米拉。", inputs={"story": {"value": STORY}}, locale="zh", answer={"facts": []})
    done = await run("extractor", context)
    assert done.status == "success", done.reason
    body = (PLUGIN / "runtimes" / "extractor" / "RUNTIME.zh.md").read_text().split("---", 2)[2].strip()
    assert context.gateway.calls[0]["system"].startswith(body)
    assert [w["payload"]["namespace"] for w in done.writes] == ["scene"], "no relationship changed"


async def test_a_malformed_answer_fails_the_extractor_and_writes_nothing() -> None:
    known = data_of([version("mira", "Mira", "trust", "tobin", "Old Tobin", "distrusts", 1)])
    context = ctx("extractor", inputs={"story": {"value": STORY}}, data=known, turn=2,
                  answer={"facts": [fact("Mira", "trust", "Tobin", "trusts"), fact("Mira", "likes", "Sela", "likes")]})
    done = await run("extractor", context)
    assert done.status == "failed" and "facts[1].relation must be one of" in done.reason and not done.writes
    failing = ctx("extractor", inputs={"story": {"value": STORY}}, answer=RuntimeError("gateway: the model call failed"))
    done = await run("extractor", failing)
    assert done.status == "failed" and "the model call failed" in done.reason and not done.writes


async def test_extractor_without_a_story_asks_nothing() -> None:
    context = ctx("extractor", inputs={"story": {"value": {"segments": []}}}, answer={"facts": []})
    done = await run("extractor", context)
    assert done.status == "success" and context.gateway.calls == []
    assert done.canonical_value == {"turn": 1, "facts": [], "changed": []}


async def test_retriever_focuses_on_who_the_action_names_acts_as_and_the_scene_shows() -> None:
    known = data_of([version("mira", "Mira", "trust", "tobin", "Old Tobin", "distrusts", 1, 3),
                     version("mira", "Mira", "trust", "tobin", "Old Tobin", "trusts", 3),
                     version("sela", "Sela", "kin", "tobin", "Old Tobin", "is the daughter of", 2),
                     version("tobin", "Old Tobin", "feeling", "traveller", "The traveller", "likes", 2)])
    known[("scene", "current")] = {"present": ["tobin"], "turn": 3}
    actions = [{"kind": "demo-world/ask", "text": "", "fields": {"topic": "Sela's lens"}}]
    done = await run("rag-retriever", ctx("rag-retriever", message="I ask 米拉 about it.", data=known, actions=actions, settings={"maxFacts": 3}))
    assert done.status == "success", done.reason
    value = done.canonical_value
    assert value["focus"] == [{"id": "mira", "name": "Mira", "why": "named"}, {"id": "sela", "name": "Sela", "why": "named"},
                              {"id": "traveller", "name": "The traveller", "why": "acting"}, {"id": "tobin", "name": "Old Tobin", "why": "present"}]
    assert value["lines"] == ["Mira trusts Old Tobin (since turn 3; before: distrusts)", "Sela is the daughter of Old Tobin",
                              "Old Tobin likes The traveller"]
    assert not done.writes, "retrieval writes nothing"


# ---- the scripted model --------------------------------------------------------------------------------

def test_scripted_extractor_answers_what_the_text_states() -> None:
    names = {"Mira": "Mira", "米拉": "Mira", "Old Tobin": "Old Tobin", "Tobin": "Old Tobin", "老托宾": "Old Tobin", "Sela": "Sela", "塞拉": "Sela"}
    assert facts_in("I watch. Mira distrusts Old Tobin, plainly.", names) == [
        {"subject": "Mira", "relation": "trust", "object": "Old Tobin", "state": "distrusts", "evidence": "Mira distrusts Old Tobin, plainly."}]
    assert [(f["subject"], f["relation"], f["object"], f["state"], f.get("ended")) for f in facts_in(
        "Sela, Tobin's daughter, waves. Mira no longer trusts Tobin. Mira and Sela are old friends. 老托宾的女儿是塞拉。", names)] == [
        ("Sela", "kin", "Old Tobin", "is the daughter of", None), ("Mira", "trust", "Old Tobin", "trusts", True),
        ("Mira", "bond", "Sela", "is a friend of", None), ("Old Tobin", "kin", "Sela", "的女儿是", None)]
    assert facts_in("I ask Mira about the lighthouse.", names) == []


def test_scripted_model_answers_the_extractors_request() -> None:
    schema = json.loads((PLUGIN / "schemas" / "facts.schema.json").read_text())
    inputs = {"story": "Old Tobin: \u201cSela is my daughter. Mira distrusts Old Tobin, they say.\u201d",
              "characters": [{"name": "Mira"}, {"name": "Old Tobin", "aliases": ["Tobin"]}, {"name": "Sela"}],
              "open": ["Mira distrusts Old Tobin [trust]"]}
    system = "You keep track...\n\n<runtime-inputs>\n" + json.dumps(inputs) + "\n</runtime-inputs>"
    messages = [Message(role="system", content=system), Message(role="user", content="Sela is Tobin's daughter, I see.")]
    reply = structured_reply("npc-graph-facts", schema, messages, "Sela is Tobin's daughter, I see.", "seed")
    assert reply == {"facts": [{"subject": "Sela", "relation": "kin", "object": "Old Tobin", "state": "is the daughter of",
                                "evidence": "Sela is Tobin's daughter, I see."}]}, "what already stands is no change"
    graph.check_answer(reply)


async def test_retriever_opens_a_worlds_known_relationships_once() -> None:
    seeds = {("seeds", "sela-tobin"): {"subject": "Sela", "relation": "kin", "object": "Tobin", "state": "is the daughter of"},
             ("seeds", "mira-tobin"): {"subject": "Mira", "relation": "trust", "object": "Old Tobin", "state": "distrusts",
                                       "evidence": "An old quarrel over a boat."},
             ("seeds", "mira-sela"): {"subject": "米拉", "relation": "bond", "object": "Sela", "state": "is a friend of"}}
    told = data_of([version("mira", "Mira", "bond", "sela", "Sela", "is a rival of", 0)])  # the story spoke first: it wins
    done = await run("rag-retriever", ctx("rag-retriever", message="I ask Sela about her father.", data={**seeds, **told}))
    assert done.status == "success", done.reason
    writes = [(w["type"], w["payload"]["namespace"], w["payload"]["key"]) for w in done.writes]
    assert writes[:2] == [("plugin.data", "facts", "mira.trust.tobin@0"), ("plugin.data", "facts", "sela.kin.tobin@0")]
    assert {key for kind, namespace, key in writes if namespace == "seeds" and kind == "plugin.data.delete"} == {"sela-tobin", "mira-tobin", "mira-sela"}
    opened = next(w["payload"]["value"] for w in done.writes if w["payload"]["key"] == "mira.trust.tobin@0")
    assert (opened["evidence"], opened["validFrom"], opened["validTo"]) == ("An old quarrel over a boat.", 0, None)
    assert ("plugin.data", "people", "tobin") in writes
    assert set(done.canonical_value["lines"][:2]) == {"Sela is the daughter of Old Tobin", "Mira is a rival of Sela"}, \
        "the same turn's retrieval reads them (Sela is named)"


def test_a_second_version_in_the_same_turn_keeps_the_first() -> None:
    known = records(version("mira", "Mira", "trust", "tobin", "Old Tobin", "distrusts", 4))
    writes, _changed = graph.plan_changes([fact("Mira", "trust", "Old Tobin", "trusts")], known, CAST, 4)
    assert [(kind, key) for kind, key, _value in writes] == [("close", "mira.trust.tobin@4"), ("set", "mira.trust.tobin@4.2")]
    assert [v["validTo"] for v in graph.applied(known, writes).values()] == [4, None]
