"""session.opening@1: the first scene's brief, once the player's character is ready."""

from shared.plugin_sdk import thaw
from shared.plugin_sdk.characters import current_character_of
from shared.plugin_sdk.values import HandlerResult

PLAYER_INIT = "char-creator/player-init"
BRIEFS = {
    "en": ("Open the story. {who} has just arrived; set the first scene from the world's opening, show the place and "
           "one person in it, and end on a moment where {name} can act. Do not act for {name}."),
    "zh": ("开始故事。{who}刚刚到来；按世界的开场设定第一幕，写出这个地方和其中的一个人，并停在{name}可以行动的时刻。"
           "不要替{name}行动。"),
}


async def _character_pending(ctx) -> bool:
    """The character form is still open: this turn did not make the character, and char-creator is not done."""
    made = (ctx.inputs.get("character") or {}).get("value")
    if made is not None:
        return not made.get("created")
    progress = (await ctx.store.get_session())["setupRuntimes"].get(PLAYER_INIT)
    return progress is not None and progress.get("state") == "pending"


def _protagonist(ctx):
    made = ((ctx.inputs.get("character") or {}).get("value") or {}).get("characterId")
    found = (next((c for c in ctx.world.characters if c["id"] == made), None) if made
             else current_character_of(ctx.world.seats, ctx.world.characters))
    if found is None:
        # A character char-creator made without a preset is on no seat yet.
        found = next((c for c in ctx.world.characters if c.get("type") == "player"), None)
    found = thaw(found)
    return {key: found[key] for key in ("id", "name", "description", "attributes") if key in found} if found else None


async def handler(ctx):
    if await _character_pending(ctx):
        return HandlerResult({"brief": "", "protagonist": None, "waiting": True}, completion="pending")
    protagonist = _protagonist(ctx)
    locale = ctx.execution.get("locale", "en")
    name = (protagonist or {}).get("name") or ("the player's character" if locale != "zh" else "玩家角色")
    who = f"{name} ({protagonist['description']})" if protagonist and protagonist.get("description") else name
    return {"brief": BRIEFS.get(locale, BRIEFS["en"]).format(who=who, name=name), "protagonist": protagonist}
