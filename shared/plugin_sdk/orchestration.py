"""An orchestrator of character actors with a fallback narration (spec: 角色委托与执行名额).

A story runtime that lets its characters speak for themselves asks the session's `character-actor@1` provider once
per planned speaker, in the plan's (the policy's) order, and combines the parts that came back, each with its
speaker's name added. Whatever a speaker does not deliver (no character id, a character the world lacks, no
provider, an invalid answer, the budget used up, a timeout) becomes a narration line instead, and a turn where
nobody spoke still gets a narration: the story never goes without the moment. A player's stop ends the
orchestration at once (nothing more is asked; no fallback is written for what was cancelled).

    from shared.plugin_sdk.orchestration import orchestrate_characters

    async def handler(ctx):
        told = await orchestrate_characters(ctx, plan["speakers"], brief="The traveller asks the way to the harbour.")
        return {"segments": told["segments"]}

`fallback_line(speaker, reason)` and `fallback_narration` replace the default texts (English or Simplified Chinese
by the session's locale); `reason` is the subagent's error code (`not-found`, `unavailable`, `internal`, `timeout`,
`invalid-input`, ...) or `no-character`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

ACTOR_CONTRACT = "character-actor@1"
FALLBACK_LINES = {
    "en": "{name} hesitates, and the moment passes without a word from them.",
    "zh": "{name}迟疑了一下，终究没有开口。",
}
FALLBACK_NARRATIONS = {
    "en": "For a moment nobody speaks; the scene holds its breath.",
    "zh": "一时间谁也没有说话，场面静了下来。",
}

FallbackLine = Callable[[Mapping[str, Any], str], str]


def _language(ctx: Any) -> str:
    execution = getattr(ctx, "execution", None) or {}
    return "zh" if str(execution.get("locale") or "").startswith("zh") else "en"


def _default_line(language: str) -> FallbackLine:
    return lambda speaker, _reason: FALLBACK_LINES[language].format(name=speaker.get("name") or "")


def _actor_segments(answer: Mapping[str, Any], name: str) -> list[dict[str, str]]:
    """The actor's parts with the speaker's name added (dialogue and action only, as the contract has them)."""
    output = answer.get("output")
    if not isinstance(output, Mapping):
        return []
    return [
        {"kind": str(part["kind"]), "speaker": name, "text": str(part["text"])}
        for part in output.get("segments") or []
        if isinstance(part, Mapping)
        and part.get("kind") in ("dialogue", "action")
        and isinstance(part.get("text"), str)
        and part["text"]
    ]


def _request(speaker: Mapping[str, Any], brief: str, instruction: str | None) -> dict[str, Any]:
    request: dict[str, Any] = {"target": {"contract": ACTOR_CONTRACT}, "characterId": speaker["characterId"], "brief": brief}
    if instruction:
        request["instruction"] = instruction
    return request


async def orchestrate_characters(
    ctx: Any,
    speakers: Sequence[Mapping[str, Any]],
    *,
    brief: str,
    instruction: str | None = None,
    fallback_line: FallbackLine | None = None,
    fallback_narration: str | None = None,
) -> dict[str, Any]:
    """Each speaker ({name, characterId?}) in order: the actor's parts, or a fallback narration line.
    Returns {segments (never empty unless cancelled), delegated: [names], fallbacks: [{speaker, reason}], cancelled}."""
    language = _language(ctx)
    line = fallback_line or _default_line(language)
    segments: list[dict[str, str]] = []
    delegated: list[str] = []
    fallbacks: list[dict[str, str]] = []
    for speaker in speakers:
        name = str(speaker.get("name") or "")
        if not speaker.get("characterId") or ctx.agents is None:
            reason = "no-character" if not speaker.get("characterId") else "unavailable"
        else:
            answer = await ctx.agents.run(_request(speaker, brief, instruction))
            parts = _actor_segments(answer, name) if answer.get("ok") else []
            if parts:
                segments += parts
                delegated.append(name)
                continue
            reason = str((answer.get("error") or {}).get("code") or "internal") if not answer.get("ok") else "empty"
            if reason == "cancelled":
                return {"segments": segments, "delegated": delegated, "fallbacks": fallbacks, "cancelled": True}
        fallbacks.append({"speaker": name, "reason": reason})
        segments.append({"kind": "narration", "text": line(speaker, reason)})
    if not segments:
        segments.append({"kind": "narration", "text": fallback_narration or FALLBACK_NARRATIONS[language]})
    return {"segments": segments, "delegated": delegated, "fallbacks": fallbacks, "cancelled": False}
