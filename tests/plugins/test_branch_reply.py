"""branch-reply in process: its entry through the hooks service's loader, the tool, the action and
the history transform on plain values, and the scripted model's variants. No services start here."""

from __future__ import annotations

import pytest

from services.gateway.chat import Message, Tool
from services.gateway.providers.scripted.story_replies import planned_tool_call
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from shared.plugin_sdk import ToolError
from shared.plugin_sdk.tools import ToolContext
from shared.settings import REPO_ROOT

PLUGIN = "branch-reply"


def registrar():
    entry = PluginEntry(PLUGIN, REPO_ROOT / "plugins" / PLUGIN, "server/index.py", (), "builtin",
                        declared_tools=("offer-variants",), declared_actions=("choose-variant",),
                        declared_extensions=("prompt.history-transform@1/chosen-variant",))
    result = load_entries([entry], generation=1)
    assert not result.errors, result.errors
    return result.loaded[0].registrar


REGISTRAR = registrar()
TOOL = next(t for t in REGISTRAR.tools if t.name == "offer-variants")
ACTION = next(r for r in REGISTRAR.rpcs if r.action == "choose-variant")
TRANSFORM = next(e for e in REGISTRAR.extensions if e.point == "prompt.history-transform@1")


def context(turn_number: int = 3, settings: dict | None = None, locale: str = "en") -> ToolContext:
    return ToolContext(session_id="s1", turn_id="t3", locale=locale, runtime_id=PLUGIN, logical_turn=turn_number,
                       turn_number=turn_number, _own_settings=settings or {})


def test_offer_variants_keeps_them_by_turn_and_shows_a_block_under_the_story() -> None:
    ctx = context()
    result = TOOL.handler(ctx, {"variants": [{"text": " It rains. "}, {"text": "It snows."}]})
    assert ctx.proposals == [{"type": "plugin.data", "payload": {"namespace": "variants", "key": "3",
                                                                "value": {"turnId": "t3", "texts": ["It rains.", "It snows."]}}}]
    assert result["turn"] == 3 and result["variants"] == [{"number": 2, "text": "It rains."}, {"number": 3, "text": "It snows."}]
    [block] = result["ui"]
    assert block["slot"] == "message" and block["parts"][0]["items"] == ["1 · the reply as told (shown above)", "2 · It rains.", "3 · It snows."]
    zh = TOOL.handler(context(locale="zh-CN"), {"variants": [{"text": "下雨了。"}]})
    assert zh["ui"][0]["title"] == "这段回复的其他版本"


@pytest.mark.parametrize(("args", "code"), [({}, "invalid-input"), ({"variants": [{"text": "  "}]}, "invalid-input"),
                                            ({"variants": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}, "too-many")])
def test_offer_variants_refuses_bad_input_with_a_tool_error(args, code) -> None:
    ctx = context()
    with pytest.raises(ToolError) as error:
        TOOL.handler(ctx, args)
    assert error.value.code == code and ctx.proposals == []


def test_choose_variant_records_the_pick_for_the_latest_turn_or_the_one_given() -> None:
    ctx = context(turn_number=4)
    assert ACTION.handler(ctx, {"args": {"number": "3"}, "context": {}}) == {"turn": 4, "variant": 3}
    assert ACTION.handler(ctx, {"variant": 1, "turn": 2}) == {"turn": 2, "variant": 1}
    assert [p["payload"] for p in ctx.proposals] == [{"namespace": "choices", "key": "4", "value": {"variant": 3}},
                                                     {"namespace": "choices", "key": "2", "value": {"variant": 1}}]
    for payload, code in (({"variant": 4}, "out-of-range"), ({"variant": "two"}, "invalid-input"), ({"variant": 2, "turn": 0}, "invalid-input")):
        with pytest.raises(ToolError) as error:
            ACTION.handler(context(), payload)
        assert error.value.code == code, payload
    assert ACTION.handler(context(settings={"count": 4}), {"variant": 5}) == {"turn": 3, "variant": 5}


def test_the_transform_puts_the_picked_version_in_place_of_the_reply() -> None:
    messages = [{"id": "p1", "role": "player", "text": "I knock.", "turnId": "t1"},
                {"id": "s1", "role": "story", "text": "Nobody answers.", "turnId": "t1"},
                {"id": "s1b", "role": "story", "text": "Still nobody.", "turnId": "t1"},
                {"id": "p2", "role": "player", "text": "I wait.", "turnId": "t2"},
                {"id": "s2", "role": "story", "text": "Rain.", "turnId": "t2"}]
    data = {"variants": {"1": {"turnId": "t1", "texts": ["The door opens.", "A dog barks."]},
                         "2": {"turnId": "t2", "texts": ["Snow."]}},
            "choices": {"1": {"variant": 3}, "2": {"variant": 1}}}
    answer = TRANSFORM.provider(None, {"messages": messages, "data": data})
    assert answer == {"messages": [{"id": "p1", "text": "I knock."}, {"id": "s1", "text": "A dog barks."},
                                   {"id": "p2", "text": "I wait."}, {"id": "s2", "text": "Rain."}]}
    # Nothing picked, or a pick past the versions kept: the history stays as it is.
    assert TRANSFORM.provider(None, {"messages": messages, "data": {"variants": data["variants"]}}) is None
    assert TRANSFORM.provider(None, {"messages": messages, "data": {**data, "choices": {"2": {"variant": 4}}}}) is None
    with pytest.raises(ValueError):
        TRANSFORM.provider(None, {"data": data})


def test_the_scripted_model_writes_two_versions_of_the_story_it_read() -> None:
    system = 'You are the runtime "branch-reply" ...\n<runtime-inputs>\n{"narrative": {"value": "The door creaks open.\\n\\nMira waves."}}\n</runtime-inputs>'
    tools = [Tool(name="offer-variants", description="", parameters={"type": "object"})]
    name, arguments = planned_tool_call([Message(role="system", content=system), Message(role="user", content="I knock.")],
                                        tools, "required", "I knock.")
    assert name == "offer-variants"
    texts = [v["text"] for v in arguments["variants"]]
    assert len(texts) == 2 and all(t.startswith("The door creaks open.") for t in texts) and texts[0] != texts[1]
