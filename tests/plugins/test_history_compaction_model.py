"""history-compaction's model path in process: the model request it asks for (en, zh), the summary it
makes from the model's structured answer, and the mechanical summary when no slot is set."""

from __future__ import annotations

import pytest

from services.gateway.providers.scripted.plugin_writers import WriterCall, writer_for
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from shared.plugin_sdk.tools import ToolContext
from shared.settings import REPO_ROOT

PLUGIN = "history-compaction"


def provider():
    entry = PluginEntry(PLUGIN, REPO_ROOT / "plugins" / PLUGIN, "server/index.py", (), "builtin",
                        declared_extensions=("history.compact@2/summaries",))
    result = load_entries([entry], generation=1)
    assert not result.errors, result.errors
    return result.loaded[0].registrar.extensions[0].provider


COMPACT = provider()
MESSAGES = [{"seq": 1, "role": "player", "text": "I open the door."}, {"seq": 2, "role": "story", "text": "It creaks. Dust falls."}]


def ctx(settings: dict, locale: str = "en") -> ToolContext:
    return ToolContext(session_id="s", turn_id="t", locale=locale, runtime_id="", logical_turn=1, _own_settings=settings)


def test_without_a_slot_the_answer_is_mechanical_and_asks_for_no_model() -> None:
    assert COMPACT(ctx({"modelSlot": ""}), {"messages": MESSAGES, "targetChars": 400, "locale": "en"}) == {
        "summary": "The player: I open the door. → It creaks."}


@pytest.mark.parametrize(("locale", "words"), [("en", ("Summary so far:", "Player: I open the door.", "Story: It creaks. Dust falls.", "in English")),
                                               ("zh-CN", ("已有的摘要：", "玩家: I open the door.", "故事: It creaks. Dust falls.", "简体中文"))])
def test_with_a_slot_it_asks_for_one_model_call_in_the_sessions_language(locale, words) -> None:
    answer = COMPACT(ctx({"modelSlot": " fast ", "modelTimeoutMs": 5000}),
                     {"messages": MESSAGES, "previousSummary": "Earlier.", "targetChars": 300, "locale": locale})
    assert answer["summary"].startswith("Earlier.\n")
    model = answer["model"]
    assert model["slot"] == "fast" and model["timeoutMs"] == 5000 and model["schema"]["title"] == "history-compaction.summary@1"
    previous, player, story, language = words
    assert model["prompt"].splitlines()[:2] == [previous, "Earlier."] and player in model["prompt"] and story in model["prompt"]
    assert language in model["system"] and "300" in model["system"]


def test_the_model_answer_becomes_the_summary_within_the_target() -> None:
    request = {"messages": MESSAGES, "targetChars": 80, "locale": "en",
               "modelAnswer": {"summary": "The player  opened the door.", "facts": ["The door creaks.", "x" * 60]}}
    assert COMPACT(ctx({"modelSlot": "fast"}), request) == {"summary": "The player opened the door.\nRemember:\n- The door creaks."}
    zh = COMPACT(ctx({}), {**request, "locale": "zh", "modelAnswer": {"summary": "玩家推开了门。", "facts": []}})
    assert zh == {"summary": "玩家推开了门。"}
    for bad in ({"facts": []}, {"summary": " ", "facts": []}, {"summary": "ok", "facts": "door"}, "text"):
        with pytest.raises(ValueError):
            COMPACT(ctx({}), {**request, "modelAnswer": bad})


def test_the_scripted_model_summarises_the_player_lines_it_is_given() -> None:
    writer = writer_for("history-compaction-summary-1", {"title": "history-compaction.summary@1"})
    answer = writer(WriterCall("Turns to fold into it:\nPlayer: I rest.\nStory: Night falls.\nPlayer: I wake.", "", {}, ""))
    assert answer == {"summary": "In the earlier turns the player did this, in order: I rest. Then: I wake.",
                      "facts": ["2 earlier turns are folded into this summary."]}
