"""world-time-evolution@1: move the clock on by what the turn took."""

import importlib.util
import sys
from pathlib import Path


def _lib(name):
    module_name = f"covel_plugin_world_time_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, Path(__file__).resolve().parents[2] / "lib" / f"{name}.py")
        sys.modules[module_name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[module_name]


clock = _lib("clock")


async def handler(ctx):
    now = int(ctx.inputs["now"]["value"])
    step = int(ctx.user_settings.get("minutesPerTurn", clock.DEFAULT_STEP))
    if not 1 <= step <= 720:
        raise ValueError(f"minutesPerTurn: {step} is outside 1..720")
    minutes, reason = clock.elapsed(now, ctx.player_message, step)
    await ctx.plugin_data.set("clock", "now", {"id": "now", "minutes": now + minutes})
    return {"before": clock.moment(now), "after": clock.moment(now + minutes), "elapsedMinutes": minutes, "reason": reason}
