"""Done already: the sheet was made (a new plugin version does not ask again)."""


async def guard(ctx):
    sheet = await ctx.plugin_data.get("sheet", "player")
    if sheet:
        return {"skip": True, "created": True, "characterId": sheet.get("characterId"), "scores": dict(sheet["scores"])}
    return None
