"""Roll the turn's checks with ctx.random, publish them as action-check@1 and emit dice-check.rolled."""

import importlib.util
import sys
from pathlib import Path


def _lib(name):
    module_name = f"covel_plugin_dice_check_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, Path(__file__).resolve().parents[2] / "lib" / f"{name}.py")
        sys.modules[module_name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[module_name]


dice = _lib("dice")


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
