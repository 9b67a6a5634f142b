"""Which runtimes a turn schedules: stage, trigger type, every N, startTurn."""

from __future__ import annotations

from typing import Any

STAGES = ("setup", "pre-turn", "narrative", "post-turn", "audit")


def scheduled_this_turn(manifest: dict[str, Any], stage: str, logical_turn: int) -> bool:
    schedule = manifest.get("schedule") or {}
    if schedule.get("subagentOnly") or stage not in STAGES:
        return False
    trigger = schedule.get("trigger") or {}
    if (trigger.get("type") or "auto") != "auto":
        return False
    every = int(schedule.get("every") or 1)
    if every > 1 and logical_turn % every != 0:
        return False
    start = trigger.get("startTurn")
    if isinstance(start, int) and logical_turn < start:
        return False
    return True
