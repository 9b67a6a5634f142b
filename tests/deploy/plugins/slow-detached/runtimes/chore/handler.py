import asyncio
import re


async def handler(ctx):
    seconds = float(re.search(r"[\d.]+", ctx.inputs["digest"]["value"]["playerMessage"]).group())
    await asyncio.sleep(seconds)
    await ctx.plugin_data.update("runs", "count", [{"op": "inc", "path": ""}])
    return {"slept": seconds}
