"""The lorebook's activation rules, evaluated once per turn (docs/worlds.md, "Lorebook"): which entries come up,
why, and where they go. Deterministic for a seed: the only draws (probability, inclusion groups) come from the
generator the caller passes, in entry-key order.

The steps, in order:
1. timed effects, counted in turns: `delay` (not before turn N), `every`, `once`, `sticky` (an entry up stays up
   N more turns, with no match and no draw), `cooldown` (after it was up, not for N turns);
2. keys over the scanned window (the last `scanDepth` messages, the player's input the newest): a key matches
   (shared/lorebook_keys.py), then `secondaryKeys` by `selectiveLogic`, then `excludeKeys` keep it out;
   `constant` entries need no key; `delayUntilRecursion` ones wait for step 3;
3. recursion: the content of entries that came up (not `preventRecursion`) is scanned for other entries' keys
   (not `excludeRecursion`), round after round, at most `maxRecursion` rounds;
4. `probability`, drawn for each entry that matched in 2 or 3 (in key order);
5. inclusion groups: one entry per group (a `groupOverride` one with the highest order, else a draw by weight);
6. the token budget (characters / 4): constant entries first, then by `order`, highest first; the rest overflow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.lorebook_keys import key_position
from shared.lorebook_rules import ACTIVATION_DEFAULTS, SETTINGS_DEFAULTS

DEFAULT_RULES = ACTIVATION_DEFAULTS
TRACE_SKIPPED = 100
DEFAULT_SETTINGS = SETTINGS_DEFAULTS


@dataclass(frozen=True)
class Entry:
    owner: str
    id: str
    content: str
    title: str = ""
    keys: tuple[str, ...] = ()
    constant: bool = False
    disabled: bool = False
    rules: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.owner}/{self.id}"

    def rule(self, name: str) -> Any:
        value = self.rules.get(name)
        return DEFAULT_RULES[name] if value is None else value

    @property
    def tokens(self) -> int:
        return math.ceil(len(f"{self.title}: {self.content}" if self.title else self.content) / 4)


@dataclass
class Activation:
    """What came up this turn, in prompt order (order ascending), and the trace's record of it."""

    entries: list[Entry]
    why: dict[str, str]
    skipped: dict[str, str]
    budget_used: int
    budget: int
    # entry key -> {"up": last turn up, "stickyUntil", "cooldownUntil", "count"} after this turn
    timers: dict[str, dict[str, int]]

    def trace(self, turn: int) -> dict[str, Any]:
        """The turn trace's record: every entry that came up (a budget holds them), the first TRACE_SKIPPED left out."""
        skipped = sorted(self.skipped.items())
        record = {"turn": turn, "budget": self.budget, "budgetUsed": self.budget_used,
                  "entries": [{"owner": e.owner, "id": e.id, "why": self.why[e.key], "tokens": e.tokens,
                               "position": e.rule("position")} for e in self.entries],
                  "skipped": [{"entry": key, "why": why} for key, why in skipped[:TRACE_SKIPPED]]}
        if len(skipped) > TRACE_SKIPPED:
            record["skippedMore"] = len(skipped) - TRACE_SKIPPED
        return record


def activate(entries: list[Entry], settings: dict[str, Any], window: list[str], turn: int, timers: dict[str, dict[str, int]],
             draw: Callable[[], float]) -> Activation:
    """The entries that come up at `turn` (1 = the first player turn) over `window` (oldest first, the player's input
    last), given the `timers` the previous turn left; `draw()` gives a number in [0, 1)."""
    config = {**DEFAULT_SETTINGS, **{k: v for k, v in settings.items() if v is not None}}
    live = sorted((entry for entry in entries if not entry.disabled), key=lambda entry: entry.key)
    why: dict[str, str] = {}
    skipped: dict[str, str] = {}
    waiting: list[Entry] = []
    for entry in live:
        state = timers.get(entry.key, {})
        held = _timed(entry, state, turn)
        if held == "sticky":
            why[entry.key] = "sticky"
        elif held:
            skipped[entry.key] = held
        else:
            waiting.append(entry)
    matched = _scan(waiting, window, config)
    why.update(matched)
    if config["recursive"]:
        why.update(_recurse([e for e in waiting if e.key not in why], [e for e in live if e.key in why], config))
    for entry in live:  # probability: drawn for what matched this turn, in key order
        if entry.key in why and why[entry.key] != "sticky" and entry.rule("probability") < 100 \
                and draw() * 100 >= entry.rule("probability"):
            skipped[entry.key] = "probability"
            del why[entry.key]
    up = [entry for entry in live if entry.key in why]
    up = _groups(up, why, skipped, draw)
    admitted, used = _budget(up, config["tokenBudget"], skipped)
    admitted.sort(key=lambda entry: (entry.rule("order"), entry.key))
    return Activation(admitted, {e.key: why[e.key] for e in admitted}, skipped, used, config["tokenBudget"],
                      _next_timers(timers, admitted, why, turn))


def _timed(entry: Entry, state: dict[str, int], turn: int) -> str:
    if turn <= entry.rule("delay"):
        return "delay"
    if entry.rule("once") and state.get("count", 0) > 0:
        return "once"
    if state.get("stickyUntil", 0) >= turn:
        return "sticky"
    if state.get("cooldownUntil", 0) >= turn:
        return "cooldown"
    if entry.rule("every") and turn % entry.rule("every") != 0:
        return "every"
    return ""


def _scan(candidates: list[Entry], window: list[str], config: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for entry in candidates:
        if entry.rule("delayUntilRecursion"):
            continue
        if entry.constant:
            found[entry.key] = "constant"
            continue
        depth = entry.rule("scanDepth") if entry.rule("scanDepth") is not None else config["scanDepth"]
        text = "\n".join(window[-depth:]) if depth > 0 else ""
        key = matching_key(entry, text)
        if key:
            found[entry.key] = f"key:{key}"
    return found


def _recurse(candidates: list[Entry], up: list[Entry], config: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    fresh = up
    for depth in range(1, config["maxRecursion"] + 1):
        text = "\n".join(entry.content for entry in fresh if not entry.rule("preventRecursion"))
        if not text:
            break
        fresh = []
        for entry in candidates:
            if entry.key in found or entry.rule("excludeRecursion") or entry.constant:
                continue
            key = matching_key(entry, text)
            if key:
                found[entry.key] = f"recursion:{depth}:{key}"
                fresh.append(entry)
    return found


def matching_key(entry: Entry, text: str) -> str:
    """The first key of `entry` that matches `text` with its secondary and exclude filters passing ("" when none)."""
    if not text:
        return ""
    options = {"use_regex": entry.rule("useRegex"), "case_sensitive": entry.rule("caseSensitive"),
               "whole_words": entry.rule("wholeWords")}
    primary = next((key for key in entry.keys if key_position(key, text, **options) >= 0), "")
    if not primary:
        return ""
    if any(key_position(key, text, **options) >= 0 for key in entry.rule("excludeKeys")):
        return ""
    secondary = entry.rule("secondaryKeys")
    if secondary:
        hits = [key_position(key, text, **options) >= 0 for key in secondary]
        logic = entry.rule("selectiveLogic")
        passed = {"andAny": any(hits), "andAll": all(hits), "notAny": not any(hits), "notAll": not all(hits)}[logic]
        if not passed:
            return ""
    return primary


def _groups(up: list[Entry], why: dict[str, str], skipped: dict[str, str], draw: Callable[[], float]) -> list[Entry]:
    groups: dict[str, list[Entry]] = {}
    for entry in up:
        if entry.rule("group"):
            groups.setdefault(entry.rule("group"), []).append(entry)
    losers: set[str] = set()
    for members in groups.values():
        if len(members) < 2:
            continue
        winner = _group_winner(members, why, draw)
        losers.update(entry.key for entry in members if entry is not winner)
    for key in losers:
        skipped[key] = "group"
        del why[key]
    return [entry for entry in up if entry.key not in losers]


def _group_winner(members: list[Entry], why: dict[str, str], draw: Callable[[], float]) -> Entry:
    sticky = [entry for entry in members if why[entry.key] == "sticky"]
    if sticky:
        return sticky[0]
    override = [entry for entry in members if entry.rule("groupOverride")]
    if override:
        return max(override, key=lambda entry: (entry.rule("order"), entry.key))
    total = sum(entry.rule("groupWeight") for entry in members)
    point = draw() * total
    for entry in members:
        point -= entry.rule("groupWeight")
        if point < 0:
            return entry
    return members[-1]


def _budget(up: list[Entry], budget: int, skipped: dict[str, str]) -> tuple[list[Entry], int]:
    ranked = sorted(up, key=lambda entry: (not entry.constant, -entry.rule("order"), entry.key))
    admitted, used = [], 0
    for entry in ranked:
        if used + entry.tokens > budget:
            skipped[entry.key] = "budget"
            continue
        admitted.append(entry)
        used += entry.tokens
    return admitted, used


def _next_timers(timers: dict[str, dict[str, int]], admitted: list[Entry], why: dict[str, str], turn: int) -> dict[str, dict[str, int]]:
    result = {key: dict(state) for key, state in timers.items()}
    for entry in admitted:
        state = result.setdefault(entry.key, {})
        state["up"] = turn
        if why[entry.key] == "sticky":
            continue
        state["count"] = state.get("count", 0) + 1
        sticky, cooldown = entry.rule("sticky"), entry.rule("cooldown")
        if sticky:
            state["stickyUntil"] = turn + sticky
        if cooldown:
            state["cooldownUntil"] = turn + sticky + cooldown
    return result
