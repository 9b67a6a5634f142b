"""inventory's world-ir.vocabulary@1: the carried items' names and keys, as this turn left them."""

from ...lib import items


async def handler(ctx):
    return items.vocabulary(await ctx.plugin_data.list("items"))
