"""chat-mode-narrator/plan: who may speak this turn (see RUNTIME.md). No model call: safe names from the stage or the
last story, ordered by a speaker policy when the session has one (called once)."""

import re

POLICY = "chat-mode.speaker-policy@1"
MAX_NAME = 80
DEFAULT_MAX_SPEAKERS = 3
UNSAFE = re.compile(r"[\x00-\x1f\x7f<>{}\[\]`]")


def _value(ctx, binding):
    slot = ctx.inputs.get(binding) if hasattr(ctx.inputs, "get") else None
    return slot.get("value") if isinstance(slot, dict) else None


def safe_name(name):
    """The name as the story may use it, or None."""
    if not isinstance(name, str):
        return None
    name = " ".join(name.split())
    if not name or len(name) > MAX_NAME or UNSAFE.search(name):
        return None
    return name


def candidates(cast, previous):
    """(source, [{name, characterId?}]): who is on stage, else who spoke in the last story."""
    found, seen = [], set()

    def add(name, character_id=None):
        safe = safe_name(name)
        if safe and safe not in seen:
            seen.add(safe)
            found.append({"name": safe, **({"characterId": character_id} if isinstance(character_id, str) and character_id else {})})

    for person in (cast or {}).get("present") or [] if isinstance(cast, dict) else []:
        if isinstance(person, dict):
            add(person.get("name"), person.get("id"))
    if found:
        return "cast", found
    for segment in (previous or {}).get("segments") or [] if isinstance(previous, dict) else []:
        if isinstance(segment, dict) and segment.get("kind") in ("dialogue", "action"):
            add(segment.get("speaker"))
    return ("story" if found else "none"), found


def _scene(cast, previous):
    scene = cast.get("scene") if isinstance(cast, dict) else None
    if isinstance(scene, dict) and safe_name(scene.get("name")):
        return safe_name(scene["name"])
    cues = previous.get("cues") if isinstance(previous, dict) else None
    return safe_name(cues.get("scene")) if isinstance(cues, dict) else None


def _outcome(ctx):
    for binding in ("check", "tabletop"):
        checks = (_value(ctx, binding) or {}).get("checks") if isinstance(_value(ctx, binding), dict) else None
        if checks and isinstance(checks[0], dict) and isinstance(checks[0].get("outcome"), str):
            return checks[0]["outcome"]
    return None


async def _by_policy(ctx, found, limit):
    """The policy's order (only names among the candidates), or None without a policy or when it fails."""
    answer = await ctx.services.call(POLICY, {"candidates": [c["name"] for c in found], "playerMessage": ctx.player_message,
                                              "maxSpeakers": limit})
    chosen = (answer.get("data") or {}).get("speakers") if isinstance(answer, dict) and answer.get("ok") else None
    if not isinstance(chosen, list):
        return None
    by_name = {c["name"]: c for c in found}
    return [by_name[name] for name in dict.fromkeys(n for n in chosen if isinstance(n, str)) if name in by_name]


async def handler(ctx):
    cast, previous = _value(ctx, "cast"), _value(ctx, "previous")
    limit = (ctx.user_settings or {}).get("maxSpeakers", DEFAULT_MAX_SPEAKERS)
    limit = int(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) else DEFAULT_MAX_SPEAKERS
    source, found = candidates(cast, previous)
    ordered = await _by_policy(ctx, found, limit) if found else None
    plan = {"source": "policy" if ordered is not None else source, "speakers": (ordered if ordered is not None else found)[:limit]}
    scene, outcome = _scene(cast, previous), _outcome(ctx)
    if scene:
        plan["scene"] = scene
    if outcome:
        plan["outcome"] = outcome
    return plan
