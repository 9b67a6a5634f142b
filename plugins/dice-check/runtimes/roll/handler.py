"""/roll NdM+K: roll free dice outside of a check."""

from ...lib import dice


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
