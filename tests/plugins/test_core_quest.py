"""core-quest in process: the quest log's rules, the log and vocabulary handlers through the kernel's function
runner (a fake model), the open-quests prompt segment, and the scripted model's quest answers."""

from __future__ import annotations

import dataclasses
import json
from types import MappingProxyType

import jsonschema
import pytest

from services.gateway.chat import Message
from services.gateway.providers.scripted.plugin_writers.core_quest import quest_changes
from services.gateway.providers.scripted.story_replies import structured_reply
from shared.settings import REPO_ROOT
from tests.plugins.test_builtin_plugins import ctx, hook_ctx, hooks_of, run

PLUGIN = REPO_ROOT / "plugins" / "core-quest"
CHANGES = json.loads((PLUGIN / "schemas/changes.schema.json").read_text())
QUEST = json.loads((PLUGIN / "schemas/quest.schema.json").read_text())
VOCABULARY = json.loads((PLUGIN / "schemas/vocabulary.schema.json").read_text())


def _lib():
    import importlib.util
    import sys
    spec = importlib.util.spec_from_file_location("core_quest_lib_quests", PLUGIN / "lib" / "quests.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


quests = _lib()
BOATS = {"id": "find-the-missing-boats", "title": "Find the missing boats", "status": "active", "giver": "Mira",
         "objectives": [{"text": "Search the harbor", "done": False}, {"text": "Find the missing boats", "done": False}],
         "note": "taken on", "started": 2, "updated": 2, "history": [{"turn": 2, "change": "started", "note": "taken on"}]}


class FakeGateway:
    def __init__(self, answer):
        self.answer, self.calls = answer, []

    async def generate_object(self, prompt=None, *, schema, messages=None, system=None, name="result", temperature=None):
        self.calls.append({"system": system, "messages": messages, "schema": schema, "name": name})
        return self.answer


def _ctx(answer, *, message="I promise Mira I will find the missing boats.", data=None, turn=3, locale="en", story="Mira nods."):
    context = ctx("core-quest", "core-quest/log", message=message, inputs={"narrative": {"value": story}}, data=data, turn=turn)
    return dataclasses.replace(context, gateway=FakeGateway(answer), execution=MappingProxyType({"origin": "player", "locale": locale}))


def test_a_new_quest_starts_with_its_objectives_and_turn() -> None:
    applied, written = quests.apply_changes({}, [{"quest": "Find the missing boats", "change": "started", "note": "Mira asked.",
                                                  "giver": "Mira", "objectives": ["Search the harbor", "Ask the fishermen"]}], 4)
    record = written["find-the-missing-boats"]
    jsonschema.validate(record, QUEST)
    assert record["status"] == "active" and record["started"] == record["updated"] == 4 and record["giver"] == "Mira"
    assert [o["text"] for o in record["objectives"]] == ["Search the harbor", "Ask the fishermen"]
    assert applied == [{"quest": "Find the missing boats", "id": "find-the-missing-boats", "change": "started", "note": "Mira asked.",
                        "giver": "Mira", "objectives": ["Search the harbor", "Ask the fishermen"]}]
    jsonschema.validate({"changes": applied}, CHANGES)


def test_advance_complete_and_fail_follow_the_log() -> None:
    applied, written = quests.apply_changes({"find-the-missing-boats": BOATS}, [
        {"quest": "find the MISSING boats", "change": "advanced", "note": "searched", "done": ["search the harbor"], "objectives": ["Row to Gull Point"]},
    ], 3)
    record = written["find-the-missing-boats"]
    assert applied[0]["id"] == "find-the-missing-boats" and applied[0]["quest"] == "Find the missing boats", "matched by title, any case"
    assert [(o["text"], o["done"]) for o in record["objectives"]] == [("Search the harbor", True), ("Find the missing boats", False),
                                                                      ("Row to Gull Point", False)]
    assert BOATS["objectives"][0]["done"] is False, "the committed record is not changed in place"
    _, done = quests.apply_changes(written, [{"quest": "Find the missing boats", "id": "find-the-missing-boats", "change": "completed", "note": "home"}], 5)
    assert done["find-the-missing-boats"]["status"] == "completed" and all(o["done"] for o in done["find-the-missing-boats"]["objectives"])
    assert [h["change"] for h in done["find-the-missing-boats"]["history"]] == ["started", "advanced", "completed"]
    again, nothing = quests.apply_changes(done, [{"quest": "Find the missing boats", "change": "advanced", "note": "x"},
                                                {"quest": "Find the missing boats", "change": "failed", "note": "x"}], 6)
    assert again == [] and nothing == {}, "a closed quest neither advances nor fails"
    reopened, written = quests.apply_changes(done, [{"quest": "Find the missing boats", "change": "started", "note": "more boats lost"}], 7)
    assert written["find-the-missing-boats"]["status"] == "active" and written["find-the-missing-boats"]["started"] == 7


def test_a_change_to_an_unknown_quest_registers_it_and_an_unknown_failure_is_dropped() -> None:
    applied, written = quests.apply_changes({}, [{"quest": "Light the lighthouse", "change": "completed", "note": "lit"},
                                                 {"quest": "Catch the thief", "change": "failed", "note": "gone"}], 2)
    assert [(c["id"], c["change"]) for c in applied] == [("light-the-lighthouse", "started"), ("light-the-lighthouse", "completed")]
    assert set(written) == {"light-the-lighthouse"} and written["light-the-lighthouse"]["status"] == "completed"
    started, nothing = quests.apply_changes({"find-the-missing-boats": BOATS}, [{"quest": "Find the missing boats", "change": "started", "note": "x"}], 3)
    assert started == [] and nothing == {}, "starting an open quest again changes nothing"


def test_chinese_titles_get_stable_distinct_keys() -> None:
    one, two = quests.quest_key("找到失踪的渔船"), quests.quest_key("帮助米拉")
    assert one.startswith("quest-") and one != two and one == quests.quest_key(" 找到失踪的渔船 ")


def test_the_summary_lists_open_quests_latest_first_in_the_sessions_language() -> None:
    other = {**BOATS, "id": "help-mira", "title": "Help Mira", "giver": "", "updated": 4, "objectives": [{"text": "Help Mira", "done": False}]}
    closed = {**BOATS, "id": "old", "title": "Old", "status": "completed"}
    text = quests.summary({"a": BOATS, "b": other, "c": closed}, "en", 5)
    assert text.splitlines() == [quests.HEADERS["en"], "- Help Mira: 0 of 1 done; next: Help Mira",
                                 "- Find the missing boats (for Mira): 0 of 2 done; next: Search the harbor"]
    assert quests.summary({"a": BOATS}, "zh", 5).splitlines()[1] == "- Find the missing boats（委托人：Mira）：已完成 0/2；下一步：Search the harbor"
    assert quests.summary({"c": closed}, "en", 5) is None and quests.summary({"a": BOATS}, "en", 0) is None


def test_the_open_quests_segment_is_a_read_only_projection_with_its_setting() -> None:
    [extension] = hooks_of("core-quest").extensions
    assert (extension.point, extension.id) == ("prompt.segment@1", "open-quests")
    data = {"data": {"quests": {"find-the-missing-boats": BOATS}}, "locale": "en"}
    segment = extension.provider(hook_ctx("PostContextAssembly", "core-quest"), data)
    assert segment["id"] == "open-quests" and segment["position"] == "post-history"
    assert segment["content"].endswith("- Find the missing boats (for Mira): 0 of 2 done; next: Search the harbor")
    assert extension.provider(hook_ctx("PostContextAssembly", "core-quest", settings={"summaryQuests": 0}), data) is None
    assert extension.provider(hook_ctx("PostContextAssembly", "core-quest"), {"data": {}}) is None


async def test_log_asks_the_model_with_its_prompt_and_writes_the_applied_changes() -> None:
    answer = {"changes": [{"quest": "Find the missing boats", "change": "started", "note": "The player promised Mira.", "giver": "Mira"}]}
    context = _ctx(answer)
    done = await run("core-quest", "log", context)
    assert done.status == "success", done.reason
    assert done.canonical_value["changes"][0]["id"] == "find-the-missing-boats"
    [write] = done.writes
    assert write["type"] == "plugin.data" and write["payload"]["namespace"] == "quests" and write["payload"]["key"] == "find-the-missing-boats"
    jsonschema.validate(write["payload"]["value"], QUEST)
    [call] = context.gateway.calls
    body = (PLUGIN / "runtimes/log/RUNTIME.md").read_text().split("---", 2)[2].strip()
    assert call["system"].startswith(body) and call["name"] == "core-quest-changes" and call["schema"] == CHANGES
    shown = json.loads(call["system"].split("<runtime-inputs>\n", 1)[1].split("\n</runtime-inputs>", 1)[0])
    assert shown == {"narrative": {"value": "Mira nods."}, "quests": {"value": []}}
    assert call["messages"] == [{"role": "user", "content": "I promise Mira I will find the missing boats."}]
    zh = _ctx({"changes": []}, locale="zh")
    await run("core-quest", "log", zh)
    assert zh.gateway.calls[0]["system"].startswith((PLUGIN / "runtimes/log/RUNTIME.zh.md").read_text().split("---", 2)[2].strip())


@pytest.mark.parametrize("answer", [
    {"changes": [{"quest": "Find the missing boats", "change": "won", "note": "x"}]},
    {"changes": [{"quest": "Find the missing boats", "change": "started"}]},
    {"quests": []},
    "not an object",
])
async def test_a_malformed_answer_fails_the_log_and_writes_nothing(answer) -> None:
    done = await run("core-quest", "log", _ctx(answer, data={("quests", "find-the-missing-boats"): BOATS}))
    assert done.status == "failed" and "core-quest.changes@1" in done.reason and done.writes == []


async def test_vocabulary_publishes_the_quest_titles_and_ids() -> None:
    done = await run("core-quest", "vocabulary", ctx("core-quest", "core-quest/vocabulary", data={("quests", "find-the-missing-boats"): BOATS}))
    assert done.canonical_value == {"source": "core-quest", "kind": "quest",
                                    "terms": [{"id": "find-the-missing-boats", "name": "Find the missing boats", "note": "active"}]}
    jsonschema.validate(done.canonical_value, VOCABULARY)
    assert done.writes == []


def test_scripted_quests_start_advance_complete_and_fail_from_the_players_words() -> None:
    started = quest_changes("I promise Mira I will find the missing boats.", "", [])["changes"]
    assert [(c["quest"], c["change"], c.get("giver")) for c in started] == [("Find the missing boats", "started", "Mira")]
    assert quest_changes("I agree to help Mira.", "", [])["changes"][0]["quest"] == "Help Mira"
    assert quest_changes("I ask Mira about the missing boats.", "", [])["changes"] == []
    asked = quest_changes("Yes, I will.", "Will you find my brother at Gull Point?", [])["changes"]
    assert asked[0]["quest"] == "Find my brother at Gull Point"
    open_quests = [{"id": "find-the-missing-boats", "title": "Find the missing boats", "status": "active"}]
    assert quest_changes("I search the harbor for the missing boats.", "", open_quests)["changes"][0]["change"] == "advanced"
    assert quest_changes("I find the missing boats and bring them home.", "", open_quests)["changes"][0]["change"] == "completed"
    assert quest_changes("I give up on the boats.", "", open_quests)["changes"][0]["change"] == "failed"
    assert quest_changes("I rest by the fire.", "", open_quests)["changes"] == []
    # Through the scripted provider: the response format's title picks the writer, the inputs come from the prompt.
    system = "x\n<runtime-inputs>\n" + json.dumps({"narrative": {"value": "..."}, "quests": {"value": open_quests}}) + "\n</runtime-inputs>"
    reply = structured_reply("core-quest-changes", CHANGES, [Message("system", system), Message("user", "I find the missing boats.")],
                             "I find the missing boats.", "s")
    jsonschema.validate(reply, CHANGES)
    assert reply["changes"][0]["change"] == "completed" and reply["changes"][0]["id"] == "find-the-missing-boats"
