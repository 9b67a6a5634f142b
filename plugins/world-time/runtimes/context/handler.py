"""world-time-context@1: the clock as the turn begins."""

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
    record = await ctx.plugin_data.get("clock", "now")
    minutes = record["minutes"] if record else clock.parse_start(str(ctx.user_settings.get("start", clock.DEFAULT_START)))
    return {**clock.moment(minutes), "minutes": minutes}
