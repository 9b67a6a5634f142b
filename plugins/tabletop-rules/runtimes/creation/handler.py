"""Point-buy creation: ask the form once the character exists, then write the sheet and the character's attributes."""

from shared.plugin_sdk import thaw
from shared.plugin_sdk.characters import current_character_of
from shared.plugin_sdk.values import HandlerResult

from ...lib import rules

WELCOME = {"en": "Attributes set: {scores}", "zh": "属性已分配：{scores}"}


def _answer(ctx):
    return next((action["interaction"]["values"] for action in ctx.player_actions
                 if (action.get("interaction") or {}).get("id") == rules.FORM_ID), None)


def _waiting_for_character(ctx) -> bool:
    """A character-creation@1 provider is still asking for the character: the sheet comes after it."""
    value = (ctx.inputs.get("character") or {}).get("value")
    return isinstance(value, dict) and bool(value.get("waiting")) and not value.get("created")


async def handler(ctx):
    settings = ctx.user_settings or {}
    attributes, (low, high), budget = rules.attributes_of(settings), rules.bounds_of(settings), int(settings.get("budget", rules.DEFAULT_BUDGET))
    locale = ctx.execution.get("locale", "en")
    values = _answer(ctx)
    if values is None:
        if _waiting_for_character(ctx) or await ctx.plugin_data.get("asked", "point-buy"):
            return HandlerResult({"created": False, "waiting": True}, completion="pending")
        await ctx.plugin_data.set("asked", "point-buy", {"interactionId": rules.FORM_ID})
        asked = rules.point_buy_form(attributes, low, high, budget, locale)
        return HandlerResult({"created": False, "waiting": True}, effects={"interactions": [asked]}, completion="pending")
    values = thaw(values)
    problems = rules.sheet_problems(values, attributes, low, high, budget)
    if problems:
        # The form validator refuses such an answer before the turn; an answer that got here anyway writes nothing.
        raise ValueError("tabletop-rules: the point-buy answer is not a valid sheet: "
                         + "; ".join(f"{field or 'answer'}: {why}" for field, why in problems.items()))
    scores = rules.scores_of(values, attributes, low)
    spent = rules.sheet_cost(scores, low)
    character = thaw(current_character_of(ctx.world.seats, ctx.world.characters))
    sheet = {"id": "player", "scores": scores, "spent": spent, "budget": budget}
    if character:
        sheet["characterId"] = character["id"]
        written = {key: value for key, value in character.items() if key not in ("id", "version")}
        written["attributes"] = {**(written.get("attributes") or {}), **scores}
        ctx.propose("character.upsert", {"characterId": character["id"], "expectedVersion": character["version"], "character": written})
    await ctx.plugin_data.set("sheet", "player", sheet)
    await ctx.plugin_data.delete("asked", "point-buy")
    shown = ", ".join(f"{rules.NAMES['zh' if locale.startswith('zh') else 'en'].get(a, a)} {s}" for a, s in scores.items())
    text = WELCOME["zh" if locale.startswith("zh") else "en"].format(scores=shown)
    return HandlerResult({"created": True, "characterId": sheet.get("characterId"), "scores": scores, "spent": spent, "budget": budget},
                         effects={"notifications": [{"level": "success", "text": text}]}, completion="done")
