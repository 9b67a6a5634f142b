"""Ask the model which places, people, items and rumours this turn's story brought up, and merge them into
the codex: a known entry (same normalised name or alias) is enriched, never duplicated."""

import json
from pathlib import Path

from shared.plugin_sdk import thaw
from shared.plugin_sdk.characters import acting_character_of
from shared.plugin_sdk.package_files import prompt_body

from .lib import codex

HERE = Path(__file__).resolve().parent
ENTRIES_SCHEMA = json.loads((HERE / "schemas" / "entries.schema.json").read_text(encoding="utf-8"))


def prompt(locale: str) -> str:
    """The body of PLUGIN.md, or of PLUGIN.zh.md for a zh session."""
    return prompt_body(HERE, "PLUGIN", locale)


def player_id(ctx, characters) -> str | None:
    """The character the player plays this turn (the codex is about what they come across, not about them)."""
    player = acting_character_of(ctx.player_actions, characters, thaw(ctx.world.seats) or [])
    return str(player["id"]) if player is not None else None


def cast(characters, player: str | None) -> list[dict]:
    """The world's characters the story may name, without the one the player plays."""
    return [{"name": c["name"], **({"aliases": list(c["aliases"])} if c.get("aliases") else {}),
             **({"description": str(c["description"])[:300]} if c.get("description") else {})}
            for c in characters if c.get("name") and c.get("id") != player]


async def handler(ctx):
    story = (ctx.inputs.get("story") or {}).get("value") or {}
    prose = codex.story_text(story.get("segments"))
    if not prose:
        return {"added": [], "enriched": [], "seen": []}
    characters = [thaw(c) for c in ctx.world.characters]
    known = {dataset: await ctx.plugin_data.list(dataset) for dataset in codex.CATEGORIES.values()}
    player = player_id(ctx, characters)
    inputs = {"story": prose, "known": codex.known_for_prompt(known), "characters": cast(characters, player)}
    system = prompt(ctx.execution.get("locale", "en")) + "\n\n<runtime-inputs>\n" + json.dumps(inputs, ensure_ascii=False) + "\n</runtime-inputs>"
    answer = await ctx.gateway.generate_object(ctx.player_message.strip() or "(the story went on)", system=system,
                                               schema=ENTRIES_SCHEMA, name="codex-entries")
    changed, report = codex.plan(codex.check_answer(answer), known, characters, ctx.logical_turn, player_ids=[player] if player else [])
    for dataset, records in changed.items():
        for key, record in records.items():
            await ctx.plugin_data.set(dataset, key, record)
    return report
