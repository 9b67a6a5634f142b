"""The rules of a check, shared by the runtimes and the PreToolUse hook (no I/O here)."""

from __future__ import annotations

import re
from typing import Any

DEFAULT_DC = 12
CHECK_DIE = 20
MAX_CHECKS = 4
OUTCOMES = ("critical-success", "success", "failure", "critical-failure")

# Words that make an action risky, and the skill that answers them (English and Chinese; Chinese words
# are two characters where one would hide in common words: 打听 is asking, 游学者 a scholar).
SKILL_WORDS: dict[str, tuple[str, ...]] = {
    "athletics": ("climb", "jump", "leap", "swim", "scale", "vault", "force the", "break down", "爬", "跳过", "跳上", "跳下", "游泳", "游过", "撞开"),
    "stealth": ("sneak", "hide", "creep", "slip past", "tiptoe", "潜行", "躲", "溜"),
    "persuasion": ("persuade", "convince", "bargain", "haggle", "lie to", "bluff", "charm", "说服", "讨价", "撒谎", "劝"),
    "sleight": ("pick the lock", "pick a lock", "pickpocket", "steal", "lift the", "撬", "偷"),
    "combat": ("attack", "fight", "strike", "duel", "shoot", "punch", "攻击", "打斗", "打架", "殴打", "搏斗", "砍"),
    "endurance": ("resist", "endure", "hold my breath", "push through", "忍住", "忍受", "坚持"),
}
_SENTENCES = re.compile(r"[^.!?。！？]+[.!?。！？]?")
_EXPRESSION = re.compile(r"^\s*(\d{0,2})[dD](\d{1,3})\s*(?:([+-])\s*(\d{1,3}))?\s*$")


def outcome_of(roll: int, modifier: int, dc: int) -> str:
    """A natural 20 always succeeds, a natural 1 always fails; otherwise the total meets the DC or not."""
    if roll == CHECK_DIE:
        return "critical-success"
    if roll == 1:
        return "critical-failure"
    return "success" if roll + modifier >= dc else "failure"


def is_success(outcome: str) -> bool:
    return outcome in ("critical-success", "success")


def risky_actions(text: str) -> list[tuple[str, str]]:
    """(sentence, skill) for each sentence of the player's text that attempts something risky."""
    found = []
    for sentence in _SENTENCES.findall(text or ""):
        lowered = sentence.strip().lower()
        if not lowered:
            continue
        for skill, words in SKILL_WORDS.items():
            if any(word in lowered for word in words):
                found.append((sentence.strip()[:200], skill))
                break
        if len(found) == MAX_CHECKS:
            break
    return found


def mismatches(checks: Any) -> list[str]:
    """Why a receipt's checks do not follow their own dice ([] when every outcome matches)."""
    if not isinstance(checks, list):
        return ["checks is not a list"]
    problems = []
    for index, check in enumerate(checks):
        if not isinstance(check, dict):
            problems.append(f"checks[{index}] is not an object")
            continue
        roll, modifier, dc = check.get("roll"), check.get("modifier", 0), check.get("dc")
        if not all(isinstance(value, int) and not isinstance(value, bool) for value in (roll, modifier, dc)):
            problems.append(f"checks[{index}]: roll, modifier and dc must be integers")
            continue
        if not 1 <= roll <= CHECK_DIE:
            problems.append(f"checks[{index}]: a d{CHECK_DIE} cannot roll {roll}")
            continue
        if check.get("total") != roll + modifier:
            problems.append(f"checks[{index}]: total {check.get('total')} is not roll {roll} + modifier {modifier}")
        expected = outcome_of(roll, modifier, dc)
        if check.get("outcome") != expected:
            problems.append(f"checks[{index}]: a roll of {roll}{modifier:+d} against DC {dc} is a {expected}, not {check.get('outcome')}")
    return problems


class RollError(ValueError):
    pass


def parse_expression(expression: str) -> tuple[int, int, int]:
    """"2d6+1" -> (2, 6, 1); at most 20 dice of 2 to 100 sides."""
    match = _EXPRESSION.match(expression or "")
    if not match:
        raise RollError(f"{expression!r} is not a dice expression such as d20, 2d6 or 3d8+2")
    count = int(match.group(1) or 1)
    sides = int(match.group(2))
    modifier = int(match.group(4) or 0) * (-1 if match.group(3) == "-" else 1)
    if not 1 <= count <= 20 or not 2 <= sides <= 100:
        raise RollError(f"{expression!r}: roll 1 to 20 dice of 2 to 100 sides")
    return count, sides, modifier
