"""Retrieve the relationships relevant to this turn (graph-rag@1): no model call, only the graph."""

from shared.plugin_sdk import thaw
from shared.plugin_sdk.characters import acting_character_of

from ...lib import graph


def action_words(ctx) -> str:
    """The player's words this turn with the text fields of their actions (an ask's topic, a target)."""
    words = [ctx.player_message or ""]
    for action in ctx.player_actions:
        words.append(str(action.get("text") or ""))
        words.extend(str(value) for value in (action.get("fields") or {}).values() if isinstance(value, str))
    return " ".join(words)


async def handler(ctx):
    characters = [thaw(c) for c in ctx.world.characters]
    records = await ctx.plugin_data.list("facts")
    seeds = await ctx.plugin_data.list("seeds")
    if seeds:
        # A world's known relationships open as versions of turn 0, once (inventory/stock's way).
        writes = graph.seeded(seeds, records, characters)
        for _kind, key, value in writes:
            await ctx.plugin_data.set("facts", key, value)
        for key in seeds:
            await ctx.plugin_data.delete("seeds", key)
        records = graph.applied(records, writes)
        for kind, person, value in graph.people_writes(await ctx.plugin_data.list("people"), records):
            await (ctx.plugin_data.set("people", person, value) if kind == "set" else ctx.plugin_data.delete("people", person))
    names = dict(graph.known_people(characters, records))
    focus: list[tuple[str, str, str]] = []

    def add(person: str, why: str) -> None:
        if person and all(person != known for known, _name, _why in focus):
            focus.append((person, (names.get(person) or [person])[0], why))

    for person in graph.mentioned(action_words(ctx), names.items()):
        add(person, "named")
    acting = acting_character_of(ctx.player_actions, characters, thaw(ctx.world.seats) or [])
    if acting is not None:
        ref = graph.character_ref(str(acting["id"]), characters)
        add(ref[0] if ref else "", "acting")
    for person in (await ctx.plugin_data.get("scene", "current") or {}).get("present") or []:
        add(person, "present")
    settings = ctx.user_settings
    return graph.retrieve(records, focus, limit=int(settings.get("maxFacts", 12)), hops=int(settings.get("hops", 2)))
