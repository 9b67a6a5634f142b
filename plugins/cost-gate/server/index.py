"""cost-gate: count a session's model tokens, trim to the story at a soft cap, stop at a hard cap.

The count is the session's hook state (ctx.state, kept by the store): every hooks replica adds to
the same count, and a restart of the hooks service loses none of it (README).
"""

import re
from collections import OrderedDict

DEFAULTS = {"softCapTokens": 200_000, "hardCapTokens": 400_000}
STORY_STAGE = "narrative"
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
USED = "usedTokens"
# The count TurnStart read, by turn, for the same turn's PreSchedule: one store read a turn, not two (both events of a
# turn reach this worker on the turn's one hook stream; where they do not, PreSchedule reads the count itself).
_READ_AT_START: OrderedDict[str, int] = OrderedDict()
_KEPT = 512  # turns between their TurnStart and PreSchedule at once, more than a hooks replica runs


def register(covel):
    covel.on("TurnStart", stop_at_hard_cap, timeout_ms=1000)
    covel.on("PreSchedule", story_only_at_soft_cap, timeout_ms=1000)
    # It only counts: the kernel gathers these with the turn's other watched events (one call, before TurnStop).
    covel.on("PostLLMResponse", count_usage, timeout_ms=1000, observe=True)
    covel.on("SessionEnd", forget_session, timeout_ms=1000)


def caps(ctx) -> tuple[int, int]:
    """(soft, hard) from the settings; a cap that is not a whole number >= 0 fails the hook with the
    reason (TurnStart and PreSchedule treat a failed handler as a stop, so nothing runs uncapped)."""
    settings = ctx.get_own_settings() or {}
    found = []
    for key in ("softCapTokens", "hardCapTokens"):
        value = settings.get(key, DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 0:
            raise ValueError(f"cost-gate: the setting {key} must be a whole number of tokens >= 0, not {value!r}")
        found.append(int(value))
    return found[0], found[1]


def approx_tokens(text: str) -> int:
    return len(_TOKEN.findall(text or ""))


def call_tokens(payload) -> int:
    """The provider's usage when the payload has it, else words and punctuation of prompt and reply."""
    response = payload.get("response") or {}
    usage = response.get("usage") or payload.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("totalTokens"), (int, float)):
        return int(usage["totalTokens"])
    prompt = sum(approx_tokens(str(message.get("content") or "")) for message in payload.get("messages") or [] if isinstance(message, dict))
    reply = approx_tokens(str(response.get("content") or ""))
    reply += sum(approx_tokens(str(call.get("arguments") or "")) for call in response.get("toolCalls") or [] if isinstance(call, dict))
    return prompt + reply


async def count_usage(ctx, payload):
    await ctx.state.add(USED, call_tokens(payload))


async def stop_at_hard_cap(ctx, payload):
    _, hard = caps(ctx)
    spent = await ctx.state.get(USED, 0)
    _READ_AT_START[ctx.turn_id] = spent
    while len(_READ_AT_START) > _KEPT:
        _READ_AT_START.popitem(last=False)
    if spent >= hard:
        return {"action": "abort", "reason": f"cost-gate: this session used {spent} tokens, past its hard cap of {hard}; "
                                             "raise hardCapTokens to go on"}
    return {"action": "continue"}


async def story_only_at_soft_cap(ctx, payload):
    soft, _ = caps(ctx)
    spent = _READ_AT_START.pop(ctx.turn_id, None)
    if spent is None:
        spent = await ctx.state.get(USED, 0)
    if spent < soft:
        return {"action": "continue"}
    story = [entry for entry in payload.get("triggered") or [] if is_story(entry)]
    return {"action": "continue", "replace": {"triggered": story}}


def is_story(entry) -> bool:
    """A story runtime: `visibility: story` (the kernel sends it); an entry without one, by its stage."""
    return entry.get("visibility") == "story" if "visibility" in entry else entry.get("stage") == STORY_STAGE


async def forget_session(ctx, payload):
    await ctx.state.delete(USED)
