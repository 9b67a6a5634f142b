"""The one write of the soundtrack: what plays now, with why and since when, and its announcement."""

from __future__ import annotations

from typing import Any

from shared.plugin_sdk.values import HandlerResult

from .music import announce, playable


def value(ctx, name: str) -> Any:
    slot = ctx.inputs.get(name) if ctx.inputs else None
    return slot.get("value") if isinstance(slot, dict) else None


async def tracks_of(ctx) -> dict[str, dict]:
    """The world's tracks (the `tracks` records imported from the world package)."""
    return {key: track for key, track in (await ctx.plugin_data.list("tracks")).items() if isinstance(track, dict)}


def world_id(ctx) -> str | None:
    record = getattr(ctx.world, "worldRecord", None) or {}
    return record.get("id") if hasattr(record, "get") else None


def locale_of(ctx) -> str:
    return str((getattr(ctx, "execution", None) or {}).get("locale") or "en")


async def play(ctx, track: dict, why: str, reason: str, current: dict | None, scene: str = "", mood: str = "",
               announced: bool = True) -> HandlerResult | dict:
    """Commit `track` as what plays and (`announced`) announce the change."""
    playing = {"track": playable(track), "worldId": world_id(ctx), "why": why, "reason": reason[:300],
               "since": int(ctx.logical_turn), "previous": ((current or {}).get("track") or {}).get("id")}
    if scene:
        playing["scene"] = scene[:200]
    if mood:
        playing["mood"] = mood[:80]
    await ctx.plugin_data.set("playing", "current", playing)
    decision = {"changed": True, "track": playing["track"]["id"], "why": why, "reason": playing["reason"],
                **({"scene": scene[:200]} if scene else {}), **({"mood": mood[:80]} if mood else {})}
    return HandlerResult(decision, effects=announce(playing, locale_of(ctx))) if announced else decision
