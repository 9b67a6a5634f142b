"""Publish who is present after the turn, with their media (character-presence@1), and keep it in `present`.

Who is present: the story's cues.present and its speakers (narrative-engine@2), and the actors on
scene-stage's stage (scene-cast@1) when that plugin runs; each name is resolved to a character of the
world (whole id, name or alias). A story whose cues list who is present replaces the last cast; one
without cues only adds its speakers. The player's characters are never listed.
"""

from ...lib.profiles import find_character, media_of, story_names


def _value(ctx, name):
    slot = ctx.inputs.get(name) if ctx.inputs else None
    return slot.get("value") if isinstance(slot, dict) else None


async def handler(ctx):
    world = ctx.world
    characters = list(getattr(world, "characters", None) or [])
    record = getattr(world, "worldRecord", None) or {}
    record = record if hasattr(record, "get") else {}
    story = _value(ctx, "story")
    names, listed = story_names(story if isinstance(story, dict) else None)
    cast = _value(ctx, "cast")
    cast = cast if isinstance(cast, dict) else {}
    for actor in cast.get("present") or []:
        name = (actor.get("id") or actor.get("name")) if isinstance(actor, dict) else None
        if name and name not in names:
            names.append(name)
    before = await ctx.plugin_data.list("present")
    wanted: dict[str, dict] = {}
    unresolved: list[str] = []
    for name in names:
        character = find_character(name, characters)
        if character is None:
            if name not in unresolved:
                unresolved.append(name)
            continue
        if character.get("type") == "player":
            continue
        wanted.setdefault(str(character["id"]), dict(character))
    if not listed and not cast.get("present"):
        # Nothing said who is present: who was stays, the speakers join.
        for key in before:
            if key not in wanted:
                match = find_character(key, characters)
                if match is not None and match.get("type") != "player":
                    wanted[key] = dict(match)
    turn = int(ctx.logical_turn)
    present = []
    for key, character in wanted.items():
        profile = await ctx.plugin_data.get("profiles", key) or {}
        earlier = before.get(key) or {}
        entry = {"id": key, "name": str(character.get("name") or profile.get("name") or key)[:120],
                 "since": int(earlier.get("since", turn)), "profile": bool(profile), "media": media_of(profile)}
        if profile.get("role"):
            entry["role"] = str(profile["role"])[:80]
        present.append(entry)
        stored = {**entry, "lastSeen": turn}
        if "avatar" in entry["media"]:
            stored["avatar"] = entry["media"]["avatar"]["src"]
        if stored != earlier:
            await ctx.plugin_data.set("present", key, stored)
    # The names of the profiled characters, for the prompt segment (which sees plugin data, not the world).
    for key in await ctx.plugin_data.list("profiles"):
        character = find_character(key, characters)
        if character is not None:
            entry = {"name": str(character.get("name") or key)[:120], "aliases": [str(a)[:120] for a in character.get("aliases") or []][:16]}
            if await ctx.plugin_data.get("roster", key) != entry:
                await ctx.plugin_data.set("roster", key, entry)
    left = sorted(key for key in before if key not in wanted)
    for key in left:
        await ctx.plugin_data.delete("present", key)
    return {"worldId": record.get("id"), "characters": present, "entered": [p["id"] for p in present if p["id"] not in before],
            "left": left, "unresolved": unresolved}
