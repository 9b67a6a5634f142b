"""dice-check's hooks: a check a model emits must be a check the roller rolled this turn.

The roller (a function runtime) rolls with ctx.random and publishes its receipt. PostRuntime of
dice-check/roller shows this module that receipt (its canonicalValue), which it keeps for the
session's current turn, in this process's memory. A model that calls emit-event (the kernel's
builtin tool) with topic dice-check.rolled is then refused, with the reason for the model, when:

- a check does not follow its own dice (a 3 against DC 12 told as a success), or
- a check is not one the roller rolled this turn (same skill, roll, modifier and DC; each rolled
  check answers one emitted check), including any check at all in a turn the roller rolled none.

The receipt is the session's hook state (ctx.state, kept by the store), one turn's worth: every hooks
replica reads the same one, and a restart of the hooks service keeps it. With no receipt of this
turn a model's emitted check is refused (fail closed); the roller's own event is not a tool call
and is never checked here.
"""

import json

from ..lib import dice

TOPIC = "dice-check.rolled"
ROLLER = "dice-check/roller"
SAME_DICE = ("skill", "roll", "modifier", "dc")

# The state key of the receipt: {"turnId", "checks": the checks the roller rolled in that turn}.
RECEIPT = "rolled"


def register(covel):
    # Declarative matches: the kernel sends these events only for the roller's result and emit-event calls.
    covel.on("PostRuntime", remember_rolls, match={"result.runtimeId": ROLLER}, timeout_ms=1000)
    covel.on("PreToolUse", refuse_invented_check, match={"toolCall.name": "emit-event"}, timeout_ms=1000)
    covel.on("SessionEnd", forget_session, timeout_ms=1000)


async def remember_rolls(ctx, payload):
    result = payload.get("result") or {}
    value = result.get("canonicalValue") if result.get("status") == "success" else None
    checks = value.get("checks") if isinstance(value, dict) else None
    await ctx.state.set(RECEIPT, {"turnId": ctx.turn_id, "checks": [dict(check) for check in checks or [] if isinstance(check, dict)]})
    return None


async def turn_rolls(ctx) -> list[dict] | None:
    """The checks the roller rolled in this turn; None when no receipt of this turn is kept."""
    receipt = await ctx.state.get(RECEIPT) or {}
    if not receipt.get("turnId") or receipt["turnId"] != ctx.turn_id:
        return None
    return list(receipt.get("checks") or [])


def unrolled(emitted: list, rolls: list[dict] | None) -> list[str]:
    """Why emitted checks are not dice the roller rolled this turn ([] when each one is)."""
    if rolls is None:
        return ["no dice were rolled by dice-check/roller in this turn"]
    left = list(rolls)
    problems = []
    for index, check in enumerate(emitted):
        match = next((roll for roll in left if all(roll.get(field) == check.get(field) for field in SAME_DICE)), None)
        if match is None:
            problems.append(f"checks[{index}]: dice-check/roller rolled no {check.get('skill')} check of {check.get('roll')}"
                            f"{check.get('modifier', 0):+d} against DC {check.get('dc')} this turn")
        else:
            left.remove(match)
    return problems


async def refuse_invented_check(ctx, payload):
    call = payload.get("toolCall") or {}
    if call.get("name") != "emit-event":
        return None
    try:
        arguments = json.loads(call.get("arguments") or "{}")
    except json.JSONDecodeError:
        return None  # the tool itself answers invalid-input
    if not isinstance(arguments, dict) or arguments.get("topic") != TOPIC:
        return None
    checks = (arguments.get("payload") or {}).get("checks") if isinstance(arguments.get("payload"), dict) else None
    problems = dice.mismatches(checks)
    if problems:
        return {"action": "abort", "reason": "the check does not match its dice: " + "; ".join(problems)}
    rolls = await turn_rolls(ctx)
    problems = unrolled(checks, rolls)
    if problems:
        rolls = rolls or []
        told = "; ".join(f"{r['skill']} {r['roll']}{r['modifier']:+d} vs DC {r['dc']} → {r['outcome']}" for r in rolls) or "none"
        return {"action": "abort", "reason": "only dice-check/roller rolls dice: " + "; ".join(problems) + f". This turn's rolls: {told}"}
    return {"action": "continue"}


async def forget_session(ctx, payload):
    await ctx.state.delete(RECEIPT)
