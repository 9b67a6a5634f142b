"""Records how this turn's story changed the player's character."""

import json

from shared.plugin_sdk import thaw

from ...lib import changes


async def handler(ctx):
    made = await ctx.plugin_data.get("protagonist", "created")
    schema = thaw(ctx.world.characterSchema) or {}
    character = next((thaw(c) for c in ctx.world.characters if c["id"] == made["characterId"]), None)
    digest = (ctx.inputs.get("digest") or {}).get("value") or {}
    if character is None or not digest.get("narrativeText"):
        return {"changed": []}
    shown = {key: character.get(key) for key in ("name", "attributes")}
    prompt = changes.PROMPTS.get(ctx.execution.get("locale", "en"), changes.PROMPTS["en"]).format(
        player=digest.get("playerMessage", ""), story=digest["narrativeText"][:4000], character=json.dumps(shown, ensure_ascii=False))
    answer = await ctx.gateway.generate_object(prompt, schema=changes.change_schema(schema), name="character-changes")
    held = changes.held_changes(schema, character, answer.get("changes") or [])
    if not held:
        return {"changed": []}
    updated = {key: value for key, value in character.items() if key not in ("id", "version")}
    updated["attributes"] = {**(character.get("attributes") or {}), **{change["attribute"]: change["value"] for change in held}}
    ctx.propose("character.upsert", {"characterId": character["id"], "expectedVersion": character["version"], "character": updated})
    await ctx.plugin_data.set("changes", f"turn-{ctx.logical_turn}", {"characterId": character["id"], "changes": held})
    return {"changed": [change["attribute"] for change in held]}
