"""Ask the model for this turn's relationship facts and commit them as versions: one open version per fact."""

import json
from pathlib import Path

from shared.plugin_sdk import thaw

from ...lib import graph, prompts

FACTS_SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "facts.schema.json").read_text(encoding="utf-8"))
MAX_OPEN_SHOWN = 60


def present_ids(cues, characters) -> list[str]:
    """The ids of the characters the story's cues say are in the scene."""
    present = []
    for name in (cues or {}).get("present") or [] if isinstance(cues, dict) else []:
        ref = graph.character_ref(str(name), characters) if str(name).strip() else None
        if ref is not None and ref[0] not in present:
            present.append(ref[0])
    return present[:20]


def cast(characters) -> list[dict]:
    return [{"name": c.get("name"), **({"aliases": list(c["aliases"])} if c.get("aliases") else {})} for c in characters if c.get("name")]


async def handler(ctx):
    story = (ctx.inputs.get("story") or {}).get("value") or {}
    characters = [thaw(c) for c in ctx.world.characters]
    records = await ctx.plugin_data.list("facts")
    prose = graph.story_text(story.get("segments"))
    changed = []
    if prose:
        shown = [graph.sentence(f["subject"], f["state"], f["object"]) + f" [{f['relation']}]" for f in graph.open_facts(records)]
        inputs = {"story": prose, "characters": cast(characters), "open": shown[-MAX_OPEN_SHOWN:]}
        system = prompts.prompt("extractor", ctx.execution.get("locale", "en")) + \
            "\n\n<runtime-inputs>\n" + json.dumps(inputs, ensure_ascii=False) + "\n</runtime-inputs>"
        answer = await ctx.gateway.generate_object(ctx.player_message.strip() or "(the story went on)", system=system,
                                                   schema=FACTS_SCHEMA, name="npc-graph-facts")
        facts = graph.check_answer(answer)
        writes, changed = graph.plan_changes(facts, records, characters, ctx.logical_turn)
        for kind, key, value in writes:
            if kind == "close":
                await ctx.plugin_data.update("facts", key, [{"op": "set", "path": "/validTo", "value": value}])
            else:
                await ctx.plugin_data.set("facts", key, value)
        records = graph.applied(records, writes)
    if changed:
        for kind, person, value in graph.people_writes(await ctx.plugin_data.list("people"), records):
            await (ctx.plugin_data.set("people", person, value) if kind == "set" else ctx.plugin_data.delete("people", person))
    present = present_ids(story.get("cues"), characters)
    if (await ctx.plugin_data.get("scene", "current") or {}).get("present") != present:
        await ctx.plugin_data.set("scene", "current", {"present": present, "turn": ctx.logical_turn})
    return {"turn": ctx.logical_turn, "facts": graph.open_facts(records), "changed": changed}
