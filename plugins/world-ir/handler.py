"""world-ir: ask the model for this turn's facts, resolve their names to stable ids, record them.

One model call (the `plugin` slot) with the prompt of PLUGIN.md (PLUGIN.zh.md in a zh session); the
answer is checked against schemas/extraction.schema.json before anything is written, so a malformed
answer fails the run and commits nothing. The value returned is world-ir-provider@1.
"""

import json
from pathlib import Path

from shared.plugin_sdk import thaw

from .lib import facts, prompt

EXTRACTION = json.loads((Path(__file__).resolve().parent / "schemas" / "extraction.schema.json").read_text(encoding="utf-8"))
NAMESPACES = ("characters", "relations", "clues")
MAX_KNOWN = 60


async def handler(ctx):
    story = (ctx.inputs.get("narrative") or {}).get("value") or ""
    vocabularies = (ctx.inputs.get("vocabularies") or {}).get("value") or []
    known = {namespace: await ctx.plugin_data.list(namespace) for namespace in NAMESPACES}
    world_characters = [thaw(c) for c in (getattr(ctx.world, "characters", None) or [])]
    turn = int(ctx.logical_turn)
    if not str(story).strip():
        return {"turn": turn, "characters": [], "relations": [], "events": [], "clues": [], "terms": []}
    names = facts.Names(world_characters, known["characters"], vocabularies)
    shown_known = sorted(known["characters"].values(), key=lambda r: -r.get("lastSeen", 0))[:MAX_KNOWN]
    inputs = {
        "narrative": str(story)[:6000],
        "known": {"characters": facts.known_characters(world_characters, shown_known)},
        "vocabularies": facts.vocabulary_index(vocabularies),
    }
    locale = str((ctx.execution or {}).get("locale") or "en")
    answer = await ctx.gateway.generate_object(
        messages=[{"role": "user", "content": ctx.player_message or "(the player did nothing this turn)"}],
        system=prompt.system_prompt(locale, inputs), schema=EXTRACTION, name="world-ir-extraction")
    facts.check_extraction(answer, EXTRACTION)
    value, writes = facts.merge_turn(answer, turn, names, known)
    for namespace, records in writes.items():
        for key, record in records.items():
            await ctx.plugin_data.set(namespace, key, record)
    return value
