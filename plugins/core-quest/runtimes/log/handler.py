"""core-quest/log: ask the model which quests this turn started, advanced, completed or failed, and
write them to the `quests` dataset. One model call (the `plugin` slot) with the prompt of RUNTIME.md
(RUNTIME.zh.md in a zh session); an answer that does not fit core-quest.changes@1 fails the run
before anything is written. The value is core-quest.changes@1 as applied (the log's ids and titles)."""

import json
from pathlib import Path

from ...lib import prompt, quests

HERE = Path(__file__).resolve().parent
SCHEMA = json.loads((HERE.parent.parent / "schemas" / "changes.schema.json").read_text(encoding="utf-8"))


async def handler(ctx):
    story = str((ctx.inputs.get("narrative") or {}).get("value") or "")
    records = await ctx.plugin_data.list("quests")
    if not story.strip():
        return {"changes": []}
    locale = str((ctx.execution or {}).get("locale") or "en")
    inputs = {"narrative": story[:6000], "quests": quests.prompt_quests(records)}
    answer = await ctx.gateway.generate_object(
        messages=[{"role": "user", "content": ctx.player_message or "(the player did nothing this turn)"}],
        system=prompt.system_prompt(locale, inputs, HERE, "RUNTIME"), schema=SCHEMA, name="core-quest-changes")
    quests.check_answer(answer, SCHEMA)
    applied, written = quests.apply_changes(records, answer["changes"], int(ctx.logical_turn))
    for key, record in written.items():
        await ctx.plugin_data.set("quests", key, record)
    return {"changes": applied}
