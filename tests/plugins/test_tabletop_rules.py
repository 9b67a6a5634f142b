"""tabletop-rules in process: the point-buy and check rules, the check handler through the kernel's function runner,
the form validator and the story's prompt segment through the hooks service's entry loader."""

from __future__ import annotations

import importlib.util

import pytest

from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from tests.plugins.test_builtin_plugins import PLUGINS, ctx, hook_ctx, run

PLUGIN = "tabletop-rules"


def _rules():
    spec = importlib.util.spec_from_file_location("tabletop_rules_lib", PLUGINS / PLUGIN / "lib" / "rules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rules = _rules()


def _registrar():
    entry = PluginEntry(PLUGIN, PLUGINS / PLUGIN, "server/index.py", (), "builtin",
                        declared_extensions=("prompt.segment@1/checks",), declared_forms=("point-buy",))
    result = load_entries([entry], generation=1)
    assert not result.errors, result.errors
    return result.loaded[0].registrar


def test_point_buy_costs_and_problems() -> None:
    assert [rules.score_cost(score, 0) for score in range(6)] == [0, 1, 2, 3, 5, 7]
    attributes = rules.attributes_of({})
    assert attributes == ["might", "agility", "wits", "presence"]
    assert rules.sheet_problems({"might": 1, "agility": 4, "wits": 2}, attributes, 0, 5, 8) == {}
    assert rules.sheet_problems({"might": 5, "agility": 5}, attributes, 0, 5, 8) == {"": "the scores cost 14 points; the budget is 8"}
    assert rules.sheet_problems({"might": 6, "luck": 1}, attributes, 0, 5, 8) == {"might": "6 is outside 0 to 5", "": "unknown attributes: luck"}
    assert rules.sheet_problems({"wits": "3"}, attributes, 0, 5, 8) == {"wits": "'3' is not a whole number"}
    assert rules.attributes_of({"attributes": "Brawn, magic"}) == ["brawn", "magic"]
    with pytest.raises(rules.RulesError):
        rules.attributes_of({"attributes": "a, a"})
    with pytest.raises(rules.RulesError):
        rules.bounds_of({"minScore": 5, "maxScore": 5})
    form = rules.point_buy_form(attributes, 0, 5, 8, "zh")
    assert form["id"] == form["formId"] == "point-buy" and form["schema"]["properties"]["might"] == \
        {"type": "integer", "minimum": 0, "maximum": 5, "default": 0, "title": "力量"}
    assert form["prompt"].startswith("你有 8 点")


def test_checks_find_the_attribute_and_difficulty_and_follow_the_dice() -> None:
    found = rules.risky_actions("I carefully pick the lock. I smile. I persuade the guard easily. 我在暴风雨中爬上桅杆。", rules.attributes_of({}))
    assert found == [("I carefully pick the lock.", "agility", "hard"), ("I persuade the guard easily.", "presence", "easy"),
                     ("我在暴风雨中爬上桅杆。", "agility", "extreme")]
    assert rules.risky_actions("I cast magic at the door.", ["might", "magic"]) == [("I cast magic at the door.", "magic", "normal")]
    assert rules.outcome_of("d20", [20], -5, 30) == "critical-success" and rules.outcome_of("d20", [1], 9, 2) == "critical-failure"
    assert rules.outcome_of("d20", [10], 2, 12) == "success" and rules.outcome_of("d20", [10], 1, 12) == "failure"
    assert rules.outcome_of("2d6", [6, 6], -9, 12) == "critical-success" and rules.outcome_of("2d6", [3, 4], 1, 8) == "success"
    honest = {"dice": "d20", "rolls": [7], "modifier": 2, "target": 12, "total": 9, "outcome": "failure"}
    assert rules.mismatches([honest]) == []
    assert rules.mismatches([{**honest, "outcome": "success"}]) == ["checks[0]: d20 [7]+2 against 12 is a failure, not success"]


async def test_the_check_handler_rolls_by_the_sheet_and_leaves_dice_checks_rolls_to_it() -> None:
    sheet = {("sheet", "player"): {"id": "player", "scores": {"might": 0, "agility": 5, "wits": 2, "presence": 1}, "spent": 9, "budget": 9}}
    message = "I climb the wall. I search the desk."
    receipt = {"checks": [{"action": "I climb the wall.", "skill": "athletics", "roll": 9, "modifier": 0, "dc": 12, "total": 9, "outcome": "failure"}]}
    done = await run(PLUGIN, "check", ctx(PLUGIN, f"{PLUGIN}/check", message=message, data=sheet, turn=3, inputs={"dice": {"value": receipt}}))
    assert done.status == "success"
    [check] = done.canonical_value["checks"]
    assert done.canonical_value["deferred"] == ["I climb the wall."]
    assert (check["attribute"], check["score"], check["modifier"], check["target"]) == ("wits", 2, 0, 12)
    assert check["total"] == check["rolls"][0] and rules.mismatches([check]) == []
    assert [(w["payload"]["namespace"], w["payload"]["key"]) for w in done.writes] == [("checks", "t3-1"), ("turn", "latest")]

    alone = await run(PLUGIN, "check", ctx(PLUGIN, f"{PLUGIN}/check", message=message, data=sheet, settings={"dice": "2d6"}))
    assert [(c["attribute"], c["modifier"], c["dice"], len(c["rolls"])) for c in alone.canonical_value["checks"]] == \
        [("agility", 3, "2d6", 2), ("wits", 0, "2d6", 2)]
    calm = await run(PLUGIN, "check", ctx(PLUGIN, f"{PLUGIN}/check", message="I look around."))
    assert calm.canonical_value == {"checks": []}, "no sheet, nothing tested: nothing rolled"
    bad = await run(PLUGIN, "check", ctx(PLUGIN, f"{PLUGIN}/check", message=message, settings={"dice": "d7"}))
    assert bad.status == "failed" and "dice must be one of d20, 2d6" in bad.reason and bad.writes == []


def test_the_form_validator_and_the_story_segment() -> None:
    registrar = _registrar()
    [form] = registrar.forms
    context = hook_ctx("SubmitInteraction", PLUGIN, settings={"budget": 4})
    assert form.validator(context, {"might": 3, "wits": 1}) is None, "4 points of 4"
    assert form.validator(context, {"might": 4}) == {"": "the scores cost 5 points; the budget is 4"}
    assert form.validator(context, {"might": 2, "wits": 2}) is None
    [extension] = registrar.extensions
    check = {"action": "I climb the wall.", "attribute": "agility", "difficulty": "hard", "outcome": "failure"}
    segment = extension.provider(hook_ctx("PostContextAssembly", PLUGIN), {"data": {"turn": {"latest": {"turn": 2, "checks": [check]}}}})
    assert segment["content"].splitlines()[1] == "- I climb the wall. (Agility, hard): a failure" and segment["position"] == "system"
    zh = extension.provider(hook_ctx("PostContextAssembly", PLUGIN, locale="zh"), {"data": {"turn": {"latest": {"checks": [check]}}}})
    assert zh["content"].splitlines()[1] == "- I climb the wall. (敏捷, hard): 失败"
    assert extension.provider(hook_ctx("PostContextAssembly", PLUGIN), {"data": {"turn": {"latest": {"turn": 3, "checks": []}}}}) is None


def _creation(answer: dict | None = None, *, data: dict | None = None, inputs: dict | None = None, settings: dict | None = None, characters=None):
    from tests.plugins.test_setup_builtins import with_world, world
    context = with_world(ctx(PLUGIN, f"{PLUGIN}/creation", data=data, inputs=inputs, settings=settings),
                         world(**({"characters": characters} if characters is not None else {})))
    if answer is not None:
        context.player_actions = ({"kind": "say", "text": "", "interaction": {"id": "point-buy", "values": answer}},)
    return context


async def test_creation_waits_for_the_character_asks_once_and_writes_the_sheet_and_attributes() -> None:
    waiting = await run(PLUGIN, "creation", _creation(inputs={"character": {"value": {"created": False, "waiting": True}}}))
    assert waiting.status == "success" and waiting.completion == "pending" and not waiting.shown.get("interactions") and waiting.writes == []

    asked = await run(PLUGIN, "creation", _creation(inputs={"character": {"value": {"created": True, "characterId": "traveller"}}}))
    [form] = asked.shown["interactions"]
    assert asked.completion == "pending" and form["id"] == "point-buy" and list(form["schema"]["properties"]) == ["might", "agility", "wits", "presence"]
    again = await run(PLUGIN, "creation", _creation(data={("asked", "point-buy"): {"interactionId": "point-buy"}}))
    assert again.completion == "pending" and not again.shown.get("interactions"), "an open form is not asked twice"

    answered = await run(PLUGIN, "creation", _creation({"might": 2, "agility": 3, "wits": 1}))
    assert answered.completion == "done" and answered.output == {"created": True, "characterId": "traveller",
                                                                 "scores": {"might": 2, "agility": 3, "wits": 1, "presence": 0}, "spent": 6, "budget": 8}
    upsert = next(w for w in answered.writes if w["type"] == "character.upsert")["payload"]
    assert upsert["expectedVersion"] == 1 and upsert["character"]["attributes"] == \
        {"role": "a traveller", "courage": 3, "might": 2, "agility": 3, "wits": 1, "presence": 0}, "merged into the character's own"

    alone = await run(PLUGIN, "creation", _creation({"wits": 2}, characters={}))
    assert alone.completion == "done" and alone.output["characterId"] is None
    assert not any(w["type"] == "character.upsert" for w in alone.writes), "no character: the sheet only"


async def test_creation_refuses_an_answer_that_is_not_a_valid_sheet_and_writes_nothing() -> None:
    over = await run(PLUGIN, "creation", _creation({"might": 5, "agility": 5}))
    assert over.status == "failed" and "the scores cost 14 points; the budget is 8" in over.reason and over.writes == []
    bad = await run(PLUGIN, "creation", _creation({"might": 1}, settings={"attributes": "might, might"}))
    assert bad.status == "failed" and "1 to 8 distinct ids" in bad.reason and bad.writes == []


def test_the_panel_draws_the_sheet_and_the_checks() -> None:
    import json

    from shared import ui_panel_specs, ui_panels
    spec = json.loads((PLUGINS / PLUGIN / "ui" / "right.json").read_text(encoding="utf-8"))
    assert ui_panel_specs.check_spec(spec) == []
    state = {"data": {"sheet": {"player": {"id": "player", "scores": {"wits": 3}, "spent": 3, "budget": 8}},
                      "checks": {"t2-1": {"attribute": "agility", "difficulty": "hard", "total": 14, "target": 16, "outcome": "failure"}}}}
    assert ui_panels.render_text(spec, state) == ["Tabletop", "3 / 8 points spent", "agility (hard): 14 vs 16 · failure"]
    assert ui_panels.render_text(spec, {"data": {}}) == ["Tabletop", "No attributes yet.", "No check yet."]


async def test_a_form_answer_is_not_an_attempt() -> None:
    context = ctx(PLUGIN, f"{PLUGIN}/check", message="magic: 3", settings={"attributes": "might, magic"})
    context.player_actions = ({"kind": "say", "text": "", "interaction": {"id": "point-buy", "values": {"magic": 3}}},)
    done = await run(PLUGIN, "check", context)
    assert done.status == "success" and done.canonical_value == {"checks": []}
    tried = await run(PLUGIN, "check", ctx(PLUGIN, f"{PLUGIN}/check", message="I use magic on the lock.", settings={"attributes": "might, magic"}))
    assert [c["attribute"] for c in tried.canonical_value["checks"]] == ["magic"]
