"""Roll the turn's checks with ctx.random, publish them as action-check@1 and emit dice-check.rolled."""

from ...lib import dice


async def handler(ctx):
    dc = int(ctx.user_settings.get("dc", dice.DEFAULT_DC))
    checks = []
    for action, skill in dice.risky_actions(ctx.player_message):
        roll = ctx.random.int(1, dice.CHECK_DIE + 1)
        modifier = 0
        checks.append({"action": action, "skill": skill, "roll": roll, "modifier": modifier, "dc": dc,
                       "total": roll + modifier, "outcome": dice.outcome_of(roll, modifier, dc)})
    receipt = {"checks": checks}
    if checks:
        ctx.emit_event("dice-check.rolled", {**receipt, "turn": ctx.logical_turn})
    return receipt
