"""Bring a hidden secret into the story once the player asks about it (its keys in the player's words, or in
a demo-world/ask action's topic). Each secret is revealed once; what is revealed stays in `revealed`."""


def asked_about(ctx) -> str:
    """The player's words this turn, with the topics of their ask actions."""
    topics = [str((action.get("fields") or {}).get("topic") or "") for action in ctx.player_actions]
    return " ".join([ctx.player_message, *topics]).casefold()


async def handler(ctx):
    secrets = await ctx.plugin_data.list("_hidden.secrets")
    revealed = await ctx.plugin_data.list("revealed")
    words = asked_about(ctx)
    found = []
    for secret_id, secret in sorted(secrets.items()):
        if secret_id in revealed or not any(str(key).casefold() in words for key in secret.get("keys") or []):
            continue
        await ctx.plugin_data.set("revealed", secret_id, {"text": secret["reveal"], "turn": ctx.logical_turn})
        found.append(secret_id)
    return {"revealed": found}
