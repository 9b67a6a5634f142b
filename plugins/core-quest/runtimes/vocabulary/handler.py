"""core-quest's world-ir.vocabulary@1: the quest log's titles and ids, as this turn left them."""

from ...lib import quests


async def handler(ctx):
    return quests.vocabulary(await ctx.plugin_data.list("quests"))
