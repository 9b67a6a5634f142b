"""No model call when there is nothing to plan: no event fired this turn, or the planner setting is off.
The skipped result is the contract's minimal output, the empty plan."""


def guard(ctx):
    cue = (ctx.inputs.get("cue") or {}).get("value") or {}
    if not ctx.user_settings.get("planner", True) or not cue.get("events"):
        return {"skip": True, "events": []}
    return None
