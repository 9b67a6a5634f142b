"""story-event-cue@1: which declared events fire this turn, decided on the turn's facts; each fire is recorded."""

from ...lib import events as lib
from ...lib.conditions import Facts, thaw

DEFAULT_PER_TURN = 1


def player_words(ctx) -> str:
    """The player's words this turn: the message, and every action's text and field values."""
    parts = [ctx.player_message or ""]
    for action in ctx.player_actions or ():
        parts.append(str(action.get("text") or ""))
        parts.extend(str(value) for value in (action.get("fields") or {}).values() if isinstance(value, (str, int, float)))
    return " ".join(part for part in parts if part).casefold()


def clock(ctx) -> dict | None:
    """world-time-context@1 with the hour as a number, or None when the session has no story clock."""
    bound = ctx.inputs.get("time")
    value = thaw(bound.get("value")) if bound else None
    if not isinstance(value, dict):
        return None
    hour = str(value.get("time") or "").split(":")[0]
    return {**value, "hour": int(hour)} if hour.isdigit() else value


async def handler(ctx):
    turn = ctx.logical_turn
    catalogue = await ctx.plugin_data.list("_hidden.catalog")
    history = await ctx.plugin_data.list("fired")
    flags = await ctx.plugin_data.list("_hidden.flags")
    dimensions = {key: thaw(entry.get("value")) for key, entry in (ctx.world.dimensions or {}).items()} if ctx.world is not None else {}
    facts = Facts(
        turn=turn, dimensions=dimensions, time=clock(ctx), flags=frozenset(flags),
        fired={key: int(record.get("lastTurn", 0)) for key, record in history.items()},
        said=player_words(ctx), kinds=frozenset(str(action.get("kind") or "") for action in ctx.player_actions or ()),
    )
    limit = int(ctx.user_settings.get("maxPerTurn", DEFAULT_PER_TURN))
    unknowns: list[str] = []
    fired = lib.firing(catalogue, history, facts, limit, unknowns)
    for event in fired:
        await ctx.plugin_data.set("fired", event["id"], lib.fired_record(event, history.get(event["id"]), turn))
        for flag in event.get("sets") or []:
            await ctx.plugin_data.set("_hidden.flags", flag, {"by": event["id"], "turn": turn})
        for flag in event.get("clears") or []:
            if flag in flags:
                await ctx.plugin_data.delete("_hidden.flags", flag)
    noted = await ctx.plugin_data.get("_hidden.intake", "undecided")
    if sorted(unknowns) != (noted or []):
        # Why some conditions could not be decided (no event text): kept for whoever debugs the world.
        await ctx.plugin_data.set("_hidden.intake", "undecided", sorted(unknowns))
    return {"turn": turn, "events": [lib.cue_of(event) for event in fired]}
