"""What `covel play` shows of a turn: its one-line summary, the builtin plugins' lines (dice, inventory, time,
affinity, the story world's quests and codex), what runtimes showed the player, and the spinner while it runs."""

from __future__ import annotations

import asyncio
from typing import Any, TextIO

from covel.scheduler.v1 import resources_pb2 as api
from services.scheduler.public_api import enum_text
from shared.structs import from_struct

STATUS_MARK = {api.RUNTIME_STATUS_SUCCESS: "✓", api.RUNTIME_STATUS_FAILED: "✗", api.RUNTIME_STATUS_SKIPPED: "–"}
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def turn_summary(turn: api.Turn, elapsed_s: float) -> str:
    """One line: the turn's status and time, then each runtime with its status mark and time."""
    parts = [
        f"{STATUS_MARK.get(r.status, '?')} {r.runtime_id} {r.duration_ms / 1000:.1f}s" + (f" ({r.reason})" if r.reason else "")
        for r in turn.runtime_results
    ]
    status = enum_text(api.TurnStatus.DESCRIPTOR, turn.status) or "unknown"
    return f"[turn {turn.logical_turn} {status} in {elapsed_s:.2f}s: {', '.join(parts) or 'no runtimes'}]"


def roll_line(roll: dict[str, Any]) -> str:
    """`2d6+1: [3, 1] + 1 = 5` (no modifier: `d20: [14] = 14`)."""
    modifier = int(roll.get("modifier") or 0)
    shown = f" {'+' if modifier > 0 else '-'} {abs(modifier)}" if modifier else ""
    return f"{roll['expression']}: [{', '.join(map(str, roll['dice']))}]{shown} = {roll['total']}"


def plugin_lines(turn: api.Turn) -> tuple[list[str], list[str]]:
    """What the builtin plugins did this turn, and the guide's suggestions."""
    outputs = {r.runtime_id: from_struct(r.output) for r in turn.runtime_results if r.status == api.RUNTIME_STATUS_SUCCESS}
    lines = [
        f"🎲 {check['skill']}: rolled {check['roll']}{check['modifier']:+d} vs DC {check['dc']} → {check['outcome']}"
        for check in (outputs.get("dice-check/roller") or {}).get("checks") or []
    ]
    roll = outputs.get("dice-check/roll")
    if roll:
        lines.append(f"🎲 {roll_line(roll)}")
    for change in (outputs.get("inventory/apply") or {}).get("applied") or []:
        name = change.get("name") or change["item"]
        lines.append(f"🎒 {name} {change['delta']:+d} (now {change['quantity']})" if change["delta"] else f"🎒 {name} in hand")
    lines.extend(
        f"♥ {change.get('name', change['character'])} {change['delta']:+d} (now {change['score']})"
        for change in (outputs.get("affinity/apply") or {}).get("applied") or []
    )
    advance = outputs.get("world-time/advance")
    if advance:
        after = advance["after"]
        lines.append(f"🕰 day {after['day']}, {after['time']} ({after['period']}): +{advance['elapsedMinutes']} min, {advance['reason']}")
    lines.extend(story_world_lines(outputs))
    suggestions = [str(s) for s in (outputs.get("guide") or {}).get("suggestions") or []]
    for result in turn.runtime_results:
        lines.extend(shown_lines(result))
    return lines, suggestions


QUEST_MARKS = {"started": "new quest", "advanced": "quest", "completed": "quest done", "failed": "quest failed"}


def story_world_lines(outputs: dict[str, Any]) -> list[str]:
    """What the quest log, the codex and the relationship graph took from this turn's story."""
    lines = [f"📜 {QUEST_MARKS.get(change.get('change'), 'quest')}: {change['quest']}" + (f" ({change['note']})" if change.get("note") else "")
             for change in (outputs.get("core-quest/log") or {}).get("changes") or [] if change.get("quest")]
    added = [str(name) for name in (outputs.get("codex") or {}).get("added") or []]
    if added:
        lines.append(f"📖 new in the codex: {', '.join(added)}")
    for fact in (outputs.get("npc-graph/extractor") or {}).get("changed") or []:
        state = fact.get("state") or "no longer " + str(fact.get("was") or "so")
        was = f" (was: {fact['was']})" if fact.get("was") and fact.get("state") else ""
        lines.append(f"🕸 {fact.get('subject')} {state} {fact.get('object')}{was}")
    return lines


NOTIFICATION_MARKS = {api.NOTIFICATION_LEVEL_SUCCESS: "✓", api.NOTIFICATION_LEVEL_WARNING: "!", api.NOTIFICATION_LEVEL_ERROR: "✗"}


def part_text(part: dict[str, Any]) -> str:
    """A UI part as one short text: its text, `label: value` of a key-value part, or its label."""
    if part.get("text"):
        return str(part["text"])
    if part.get("label") and part.get("value") not in (None, ""):
        return f"{part['label']}: {part['value']}"
    return str(part.get("label") or "")


def shown_lines(result: api.RuntimeResult) -> list[str]:
    """A runtime's notifications, UI blocks (as short summaries) and interactions, one line each."""
    lines = [f"{NOTIFICATION_MARKS.get(n.level, 'ℹ')} {n.title + ': ' if n.title else ''}{n.text}" for n in result.notifications]
    for block in result.ui:
        texts = [part_text(from_struct(part)) for part in block.parts]
        summary = "; ".join(text for text in texts if text)[:120]
        lines.append(f"▤ {block.title or block.id or block.plugin_id}{': ' + summary if summary else ''}")
    for asked in result.interactions:
        spec = from_struct(asked.spec)
        if asked.kind == api.INTERACTION_KIND_CHOICE:
            options = ", ".join(str(o.get("label")) for o in spec.get("options") or [])
            lines.append(f"? {asked.prompt or asked.title} ({options}) · /answer <option>")
        elif asked.kind == api.INTERACTION_KIND_FORM:
            fields = list(spec.get("fieldOrder") or (spec.get("schema") or {}).get("properties") or {})
            lines.append(f"? {asked.title or asked.prompt or 'a form'}: {', '.join(fields)} · /answer {' '.join(f + '=…' for f in fields)}")
        else:
            lines.append(f"? {asked.prompt} · /answer yes | no")
    return lines


class Progress:
    """A spinner with the running runtimes while nothing is streamed (terminals only)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.enabled = bool(getattr(out, "isatty", lambda: False)())
        self.running: list[str] = []
        self._task: asyncio.Task | None = None
        self._shown = False

    def start(self) -> None:
        if self.enabled:
            self._task = asyncio.create_task(self._spin())

    async def _spin(self) -> None:
        for tick in range(10**9):
            label = ", ".join(self.running[-3:]) or "starting"
            self.out.write(f"\r\033[K{SPINNER[tick % len(SPINNER)]} {label}…")
            self.out.flush()
            self._shown = True
            await asyncio.sleep(0.1)

    def pause(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._shown:
            self.out.write("\r\033[K")
            self._shown = False
