"""world.dimensions@1: the committed values as the turn began (the kernel input, published as this plugin's output)."""


async def handler(ctx):
    return dict((ctx.inputs.get("dimensions") or {}).get("value") or {})
