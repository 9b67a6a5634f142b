"""world-time-evolution@1: move the clock on by what the turn took."""

from ...lib import clock


async def handler(ctx):
    now = int(ctx.inputs["now"]["value"])
    step = int(ctx.user_settings.get("minutesPerTurn", clock.DEFAULT_STEP))
    if not 1 <= step <= 720:
        raise ValueError(f"minutesPerTurn: {step} is outside 1..720")
    minutes, reason = clock.elapsed(now, ctx.player_message, step)
    # The moment too, for the "Story time" panel (ui/right.json), which draws what it finds in the record.
    await ctx.plugin_data.set("clock", "now", {"id": "now", "minutes": now + minutes, **clock.moment(now + minutes)})
    return {"before": clock.moment(now), "after": clock.moment(now + minutes), "elapsedMinutes": minutes, "reason": reason}
