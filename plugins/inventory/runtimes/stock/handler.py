"""Stock the inventory from the startingItems setting, once."""

from ...lib import items


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
