"""/roll NdM+K: roll free dice outside of a check."""

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
    expression = str(ctx.activation.get("expression") or "d20")
    count, sides, modifier = dice.parse_expression(expression)  # a bad expression fails the run with the reason
    rolled = [ctx.random.int(1, sides + 1) for _ in range(count)]
    current = await ctx.plugin_data.get("tally", "all")
    if current is None:
        await ctx.plugin_data.set("tally", "all", {"id": "all", "checks": 0, "successes": 0, "failures": 0, "rolls": 1})
    else:
        await ctx.plugin_data.update("tally", "all", [{"op": "inc", "path": "/rolls", "by": 1}])
    return {"expression": expression.strip(), "dice": rolled, "modifier": modifier, "total": sum(rolled) + modifier}
