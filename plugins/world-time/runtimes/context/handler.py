"""world-time-context@1: the clock as the turn begins."""

from ...lib import clock


async def handler(ctx):
    record = await ctx.plugin_data.get("clock", "now")
    minutes = record["minutes"] if record else clock.parse_start(str(ctx.user_settings.get("start", clock.DEFAULT_START)))
    return {**clock.moment(minutes), "minutes": minutes}
