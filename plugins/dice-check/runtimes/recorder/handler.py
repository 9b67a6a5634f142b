"""Record the roller's checks (dataset `checks`) and count them (dataset `tally`, inc operations)."""

from ...lib import dice

ROLLER = "dice-check/roller"


async def handler(ctx):
    recorded, ignored = [], []
    for event in ctx.activation.get("events", []):
        if event.get("source") != ROLLER:
            # Only the roller rolls: a model's emit-event of a roll repeats the roller's receipt at
            # best (the PreToolUse hook refuses any other), so it is not counted twice.
            ignored.append(str(event.get("source")))
            continue
        payload = event.get("payload") or {}
        checks = payload.get("checks") or []
        problems = dice.mismatches(checks)
        if problems:
            raise ValueError(f"dice-check.rolled from {event.get('source')}: {'; '.join(problems)}")
        turn = int(payload.get("turn") or ctx.logical_turn)
        for index, check in enumerate(checks, start=1):
            record = {"id": f"t{turn}-{index}", "turn": turn, **check}
            await ctx.plugin_data.set("checks", record["id"], record)
            recorded.append(record["id"])
        successes = sum(1 for check in checks if dice.is_success(check["outcome"]))
        await add_to_tally(ctx, checks=len(checks), successes=successes, failures=len(checks) - successes)
    return {"recorded": recorded, **({"ignored": ignored} if ignored else {})}


async def add_to_tally(ctx, **counts):
    current = await ctx.plugin_data.get("tally", "all")
    if current is None:
        await ctx.plugin_data.set("tally", "all", {"id": "all", "checks": 0, "successes": 0, "failures": 0, "rolls": 0, **counts})
        return
    await ctx.plugin_data.update("tally", "all", [{"op": "inc", "path": f"/{name}", "by": by} for name, by in counts.items() if by])
