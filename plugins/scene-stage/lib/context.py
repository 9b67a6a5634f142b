"""What scene-stage's handlers read from their ctx: bound inputs, the world's characters and scenes."""

from __future__ import annotations

from typing import Any


def value(ctx, name: str) -> Any:
    slot = ctx.inputs.get(name) if ctx.inputs else None
    return slot.get("value") if isinstance(slot, dict) else None


def characters(ctx) -> list[dict]:
    return [dict(c) for c in (getattr(ctx.world, "characters", None) or [])]


def world_id(ctx) -> str | None:
    record = getattr(ctx.world, "worldRecord", None) or {}
    return record.get("id") if hasattr(record, "get") else None


async def scenes(ctx) -> dict[str, dict]:
    return {key: scene for key, scene in (await ctx.plugin_data.list("scenes")).items() if isinstance(scene, dict)}


def locale(ctx) -> str:
    return str((getattr(ctx, "execution", None) or {}).get("locale") or "en")
