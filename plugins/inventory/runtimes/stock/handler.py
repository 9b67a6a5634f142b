"""Stock the inventory from the startingItems setting, once."""

import importlib.util
import sys
from pathlib import Path


def _lib(name):
    module_name = f"covel_plugin_inventory_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, Path(__file__).resolve().parents[2] / "lib" / f"{name}.py")
        sys.modules[module_name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[module_name]


items = _lib("items")


async def handler(ctx):
    if await ctx.plugin_data.list("items"):
        return {"stocked": []}
    stocked = []
    for name, quantity in items.parse_starting_items(str(ctx.user_settings.get("startingItems", ""))):
        key = items.item_key(name)
        current = await ctx.plugin_data.get("items", key)
        quantity += current["quantity"] if current else 0
        await ctx.plugin_data.set("items", key, {"id": key, "name": name, "quantity": quantity, "equipped": False})
        stocked.append(key)
    return {"stocked": stocked}
