"""dice-check's PreToolUse hook: an emitted check must follow its own dice.

A model that calls emit-event with topic dice-check.rolled (the kernel's builtin tool) and
claims an outcome its roll does not give (a 3 against DC 12 as a success) is refused, and the
reason tells it what the dice say.
"""

import json

from ..lib import dice

TOPIC = "dice-check.rolled"


def register(covel):
    covel.on("PreToolUse", refuse_mismatched_check, timeout_ms=1000)


def refuse_mismatched_check(ctx, payload):
    call = payload.get("toolCall") or {}
    if call.get("name") != "emit-event":
        return None
    try:
        arguments = json.loads(call.get("arguments") or "{}")
    except json.JSONDecodeError:
        return None  # the tool itself answers invalid-input
    if not isinstance(arguments, dict) or arguments.get("topic") != TOPIC:
        return None
    problems = dice.mismatches((arguments.get("payload") or {}).get("checks"))
    if problems:
        return {"action": "abort", "reason": "the check does not match its dice: " + "; ".join(problems)}
    return {"action": "continue"}
