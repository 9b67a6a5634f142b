"""memory's blocks in process: definitions (defaults, a world's), the prompt segment for readers and
editors, and memory-block-edit's rules (append, replace, read-only, the limit). No services start here."""

from __future__ import annotations

import pytest

from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from shared.plugin_sdk import ToolError
from shared.plugin_sdk.tools import ToolContext
from shared.settings import REPO_ROOT

PLUGIN = "memory"


def registrar():
    entry = PluginEntry(PLUGIN, REPO_ROOT / "plugins" / PLUGIN, "server/index.py", (), "builtin",
                        declared_services=("memory.block-definitions@1", "memory.block-edit@1"),
                        declared_extensions=("prompt.segment@1/blocks",))
    result = load_entries([entry], generation=1)
    assert not result.errors, result.errors
    return result.loaded[0].registrar


REGISTRAR = registrar()
SERVICES = {service.contract: service for service in REGISTRAR.services}
SEGMENT = REGISTRAR.extensions[0].provider
EDIT = SERVICES["memory.block-edit@1"]
WORLD = {"oath": {"label": "oath", "description": "The vow the player swore.", "limit": 80, "readOnly": True,
                  "value": "Find the keeper of the light."},
         "scene": {"label": "scene", "value": "The Drowned Lantern inn.", "limit": 40}}


def ctx(data: dict | None = None, locale: str = "en") -> ToolContext:
    return ToolContext(session_id="s", turn_id="t", locale=locale, runtime_id="keeper", logical_turn=1,
                       _plugin_data={"blocks": data if data is not None else WORLD})


def test_the_services_are_declared_as_the_manifest_says() -> None:
    assert (EDIT.model_facing, EDIT.access) == (True, "write")
    definitions = SERVICES["memory.block-definitions@1"].implementation(ctx(), {})["blocks"]
    assert [(b["label"], b["limit"], b["readOnly"]) for b in definitions] == [("player", 600, False), ("scene", 600, False)]
    zh = SERVICES["memory.block-definitions@1"].implementation(ctx(locale="zh-CN"), {})["blocks"]
    assert zh[1]["description"].startswith("故事此刻")


def test_a_reader_sees_the_blocks_with_a_value_an_editor_every_block_and_how_to_edit() -> None:
    reader = SEGMENT(ctx(), {"locale": "en", "visibility": "story", "data": {"blocks": WORLD}, "services": []})
    assert reader["position"] == "system" and reader["id"] == "blocks"
    text = reader["content"]
    assert '<scene chars="24/40">' in text and '<oath chars="29/80" read-only="true">' in text and "<player" not in text
    assert text.index("<scene") < text.index("<oath"), "the defaults first, then the world's by label"
    assert "memory-block-edit" not in text
    editor = SEGMENT(ctx(), {"locale": "en", "visibility": "system", "data": {"blocks": WORLD}, "services": ["memory.block-edit@1"]})
    assert '<player chars="0/600">' in editor["content"] and "(empty)" in editor["content"] and "memory-block-edit" in editor["content"]
    assert SEGMENT(ctx(), {"locale": "en", "visibility": "story", "data": {}, "services": []}) is None, "no value anywhere: no segment"
    zh = SEGMENT(ctx(), {"locale": "zh", "visibility": "system", "data": {}, "services": ["memory.block-edit@1"]})
    assert zh["content"].startswith("记忆块：") and "（空）" in zh["content"]


def test_append_and_replace_within_the_limit_commit_the_whole_block() -> None:
    context = ctx()
    assert EDIT.implementation(context, {"label": "scene", "append": "Rain."}) == {
        "label": "scene", "chars": 30, "limit": 40, "value": "The Drowned Lantern inn.\nRain."}
    [proposal] = context.proposals
    assert proposal["payload"]["key"] == "scene" and proposal["payload"]["value"]["limit"] == 40
    context = ctx()
    assert EDIT.implementation(context, {"label": "scene", "replace": "Drowned Lantern", "with": "Salt Gull"})["value"] == "The Salt Gull inn."
    assert EDIT.implementation(ctx({}), {"label": "player", "append": "Wren, a sailor."})["value"] == "Wren, a sailor."


@pytest.mark.parametrize(("args", "code", "message"), [
    ({"label": "scene", "append": "x" * 20}, "over-limit", "the memory block 'scene' would hold 45 characters; its limit is 40"),
    ({"label": "oath", "append": "Also this."}, "read-only", "the memory block 'oath' is read-only"),
    ({"label": "mood", "append": "Grim."}, "unknown-block", "there is no memory block 'mood'"),
    ({"label": "scene", "replace": "tavern", "with": "inn"}, "not-found", "does not contain 'tavern'"),
    ({"label": "scene"}, "invalid-input", "write {\"label\""),
    ({"append": "x"}, "invalid-input", "give the block's label"),
])
def test_a_refused_edit_is_a_clear_tool_error_and_writes_nothing(args, code, message) -> None:
    context = ctx()
    with pytest.raises(ToolError) as error:
        EDIT.implementation(context, args)
    assert error.value.code == code and message in error.value.message and context.proposals == []
