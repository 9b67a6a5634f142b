"""character-creation@1: ask the character form, then make the character from the answer."""

from shared.plugin_sdk import thaw
from shared.plugin_sdk.characters import current_character_of
from shared.plugin_sdk.values import HandlerResult

from ...lib import form

NEW_CHARACTER_ID = "protagonist"
WELCOME = {"en": "Your character: {name}", "zh": "你的角色：{name}"}


def _answer(ctx):
    return next((action["interaction"]["values"] for action in ctx.player_actions
                 if (action.get("interaction") or {}).get("id") == form.FORM_ID), None)


def _preset(ctx):
    """The main seat's current character (a world's preset player character), if any."""
    return thaw(current_character_of(ctx.world.seats, ctx.world.characters))


async def handler(ctx):
    schema = thaw(ctx.world.characterSchema)
    if not schema or not schema.get("attributes"):
        raise RuntimeError("the world has no characterSchema yet, so no character form can be made "
                           "(world-init/schema-gen makes one; or give the world package a characterSchema)")
    preset = _preset(ctx)
    values = _answer(ctx)
    if values is None:
        if await ctx.plugin_data.get("protagonist", "asked"):
            return HandlerResult({"created": False, "waiting": True}, completion="pending")
        await ctx.plugin_data.set("protagonist", "asked", {"interactionId": form.FORM_ID})
        asked = form.character_form(schema, preset, ctx.execution.get("locale", "en"))
        return HandlerResult({"created": False, "waiting": True}, effects={"interactions": [asked]}, completion="pending")
    character = form.filled_character(preset, values, schema)
    character_id = preset["id"] if preset else NEW_CHARACTER_ID
    ctx.propose("character.upsert", {"characterId": character_id, "expectedVersion": preset["version"] if preset else 0,
                                     "character": character})
    await ctx.plugin_data.set("protagonist", "created", {"characterId": character_id})
    await ctx.plugin_data.delete("protagonist", "asked")
    return HandlerResult({"created": True, "characterId": character_id, "name": character["name"],
                          "attributes": character["attributes"]},
                         effects={"notifications": [{"level": "success", "text": WELCOME.get(
                             ctx.execution.get("locale", "en"), WELCOME["en"]).format(name=character["name"])}]}, completion="done")
