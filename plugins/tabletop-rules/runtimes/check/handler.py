"""Resolve the turn's attribute checks with the rules and ctx.random; publish them as tabletop-check@1."""

from ...lib import rules


def _rolled_by_dice_check(ctx) -> set[str]:
    value = (ctx.inputs.get("dice") or {}).get("value")
    checks = value.get("checks") if isinstance(value, dict) else None
    return {str(check.get("action")) for check in checks or [] if isinstance(check, dict)}


async def handler(ctx):
    settings = ctx.user_settings or {}
    attributes, (low, high), dice = rules.attributes_of(settings), rules.bounds_of(settings), rules.dice_of(settings)
    sheet = await ctx.plugin_data.get("sheet", "player")
    scores = dict((sheet or {}).get("scores") or {})
    rolled_elsewhere = _rolled_by_dice_check(ctx)
    # An answer to a form (the point-buy's, in the turn that ends the setup) is not something the character attempts.
    answering = bool(ctx.player_actions) and all(action.get("interaction") for action in ctx.player_actions)
    checks, deferred = [], []
    for action, attribute, difficulty in rules.risky_actions("" if answering else ctx.player_message, attributes):
        if action in rolled_elsewhere:
            deferred.append(action)  # dice-check rolled this action already: one action, one die, one verdict
            continue
        score = int(scores.get(attribute, rules.average(low, high)))
        modifier = rules.modifier_of(score, low, high)
        target = rules.TARGETS[dice][difficulty]
        rolls = rules.roll(dice, ctx.random.int)
        checks.append({"action": action, "attribute": attribute, "score": score, "modifier": modifier, "difficulty": difficulty,
                       "target": target, "dice": dice, "rolls": rolls, "total": sum(rolls) + modifier,
                       "outcome": rules.outcome_of(dice, rolls, modifier, target)})
    turn = int(ctx.logical_turn)
    for index, check in enumerate(checks, start=1):
        await ctx.plugin_data.set("checks", f"t{turn}-{index}", {"id": f"t{turn}-{index}", "turn": turn, **check})
    # What the story's prompt segment shows: this turn's checks only (an empty list clears the last turn's).
    await ctx.plugin_data.set("turn", "latest", {"turn": turn, "checks": checks})
    receipt = {"checks": checks}
    if deferred:
        receipt["deferred"] = deferred
    return receipt
