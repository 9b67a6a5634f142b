"""The SDK helpers the spec names, in the Python SDK's naming: model_facing_json / with_model_view, short_id /
short_id_batch, mentioned_character_ids, merge_character_aliases, dataset_key, translate / label_text,
instruction_locale_for and with_pending_proposals."""

from __future__ import annotations

import json
from types import MappingProxyType, SimpleNamespace

import pytest

from services.scheduler.agent.tool_calls import model_result_text
from shared.plugin_sdk.characters import mentioned_character_ids, merge_character_aliases
from shared.plugin_sdk.dataset_keys import dataset_key
from shared.plugin_sdk.locale_text import instruction_locale_for, label_text, translate
from shared.plugin_sdk.model_view import model_facing_json, with_model_view
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.plugin_sdk.short_ids import short_id, short_id_batch
from shared.plugin_sdk.values import with_pending_proposals

UUID = "0b0e8f3e-8d0c-4b1e-9a52-3c1f6f0f9a10"


def test_model_facing_json_drops_bookkeeping_as_the_kernel_does() -> None:
    assert json.loads(model_facing_json({"id": UUID, "name": "Mira", "updatedAt": "2026-01-02T03:04:05Z", "date": "1943"})) == {
        "name": "Mira", "date": "1943"}


def test_with_model_view_gives_the_model_the_summary_and_code_everything() -> None:
    data = with_model_view({"handle": "blob-7f3a", "rows": list(range(50))}, summary="Saved 50 rows as blob-7f3a.")
    assert data["rows"] == list(range(50)), "code reads the whole data"
    seen = json.loads(model_result_text(json.dumps({"ok": True, "data": data})))
    assert seen == {"ok": True, "data": {"summary": "Saved 50 rows as blob-7f3a."}}
    with pytest.raises(ValueError):
        with_model_view({"a": 1}, summary=" ")


def test_short_ids_are_semantic_and_repeat_with_the_same_random_source() -> None:
    taken = {"npc-lin-yao"}
    first = short_id("npc", "Lin Yao", taken, SeededRandom("seed"))
    assert first.startswith("npc-lin-yao-") and len(first) == len("npc-lin-yao-") + 4
    assert short_id("npc", "Lin Yao", taken, SeededRandom("seed")) == first, "the same seed, the same id"
    assert short_id("npc", "Mira the Bold!", taken, SeededRandom("seed")) == "npc-mira-the-bold"
    batch = short_id_batch("npc", ["Mira", "Mira", "林瑶"], set(), SeededRandom("s"))
    assert batch[0] == "npc-mira" and batch[1].startswith("npc-mira-") and batch[2] == "npc-林瑶" and len(set(batch)) == 3
    with pytest.raises(TypeError):
        short_id("npc", "Mira", set(), None)


def test_mentioned_characters_need_word_boundaries_and_the_longer_name_wins() -> None:
    characters = [{"id": "rin", "name": "Rin"}, {"id": "chair", "name": "会长"}, {"id": "vice", "name": "副会长"},
                  {"id": "tobin", "name": "Old Tobin", "aliases": ["Tobin"]}]
    assert mentioned_character_ids("In spring, the 副会长 spoke to tobin.", characters) == ["vice", "tobin"]
    assert mentioned_character_ids("Rin and the 会长 wait.", characters) == ["rin", "chair"]


def test_merge_character_aliases_keeps_each_spelling_once_and_not_the_name() -> None:
    assert merge_character_aliases(["Tobin", "old tobin"], ["TOBIN", "the keeper"], name="Old Tobin") == ["Tobin", "the keeper"]


def test_dataset_key_is_the_tools_rule() -> None:
    assert dataset_key("  Old_Tobin  the Keeper ") == "old-tobin-the-keeper"


def test_translate_label_text_and_the_instruction_locale() -> None:
    ctx = SimpleNamespace(messages=MappingProxyType({"Nothing to report.": "无事可报。"}), execution={"locale": "zh"})
    assert translate(ctx, "Nothing to report.") == "无事可报。" and translate(ctx, "Other.") == "Other."
    assert label_text(ctx, {"en": "Bell", "zh": "钟"}) == "钟" and label_text(SimpleNamespace(locale="fr"), {"en": "Bell"}) == "Bell"
    assert label_text(ctx, "Nothing to report.") == "无事可报。"
    assert [instruction_locale_for(tag, fixed="") for tag in ("zh", "zh-CN", "zh-Hant", "zh_TW", "en", "ja", "")] == [
        "zh", "zh", "en", "en", "en", "en", "en"]
    assert instruction_locale_for("en", fixed="zh") == "zh", "a fixed instruction locale decides for every session"


def test_with_pending_proposals_proposes_through_the_guards_ctx() -> None:
    proposed = []
    ctx = SimpleNamespace(propose=lambda type, payload: proposed.append((type, payload)))
    skip = {"skip": True, "events": []}
    assert with_pending_proposals(ctx, skip, [{"type": "plugin.data", "payload": {"namespace": "n", "key": "k", "value": 1}}]) is skip
    assert proposed == [("plugin.data", {"namespace": "n", "key": "k", "value": 1})]
