"""tabletop-rules' rules: the point-buy sheet and the attribute check (pure functions, no I/O)."""

from __future__ import annotations

import re
from typing import Any

DEFAULT_ATTRIBUTES = ("might", "agility", "wits", "presence")
DEFAULT_BUDGET = 8
DEFAULT_MIN, DEFAULT_MAX = 0, 5
DICE = ("d20", "2d6")
MAX_CHECKS = 4
DIFFICULTIES = ("easy", "normal", "hard", "extreme")
# The target a roll plus modifier must reach, by dice and difficulty.
TARGETS = {"d20": {"easy": 8, "normal": 12, "hard": 16, "extreme": 20},
           "2d6": {"easy": 6, "normal": 8, "hard": 10, "extreme": 12}}
OUTCOMES = ("critical-success", "success", "failure", "critical-failure")
NAMES = {
    "en": {"might": "Might", "agility": "Agility", "wits": "Wits", "presence": "Presence"},
    "zh": {"might": "力量", "agility": "敏捷", "wits": "智识", "presence": "风度"},
}
# Words that make an action a check of an attribute (English and Chinese).
ATTRIBUTE_WORDS: dict[str, tuple[str, ...]] = {
    "might": ("lift", "force", "break", "push", "smash", "wrestle", "carry", "attack", "fight", "punch", "strike",
              "举起", "撞开", "砸", "推开", "搬动", "攻击", "打斗", "搏斗"),
    "agility": ("climb", "jump", "leap", "dodge", "sneak", "creep", "balance", "pick the lock", "pick a lock", "steal",
                "swim", "爬", "跳过", "跳上", "跳下", "躲开", "潜行", "溜", "撬", "偷"),
    "wits": ("search", "investigate", "decipher", "figure out", "recall", "study", "examine", "spot", "notice",
             "搜查", "调查", "破译", "推理", "回忆", "研究", "察觉"),
    "presence": ("persuade", "convince", "bargain", "haggle", "lie to", "bluff", "charm", "intimidate", "threaten",
                 "说服", "讨价", "撒谎", "劝", "威胁", "恐吓"),
}
DIFFICULTY_WORDS = {
    "easy": ("easily", "simply", "quickly", "轻松", "随手"),
    "hard": ("carefully", "difficult", "steep", "heavy", "locked", "guarded", "hard", "艰难", "陡峭", "沉重", "锁着", "戒备"),
    "extreme": ("impossible", "desperate", "in the storm", "blindfolded", "不可能", "拼死", "暴风雨中"),
}
_SENTENCES = re.compile(r"[^.!?。！？]+[.!?。！？]?")
_ID = re.compile(r"^[a-z][a-z0-9-]{0,31}$")


class RulesError(ValueError):
    pass


def attributes_of(settings: dict[str, Any]) -> list[str]:
    """The attribute ids of the `attributes` setting (comma-separated ids), in their order."""
    raw = settings.get("attributes")
    if raw in (None, ""):
        return list(DEFAULT_ATTRIBUTES)
    ids = [part.strip().lower() for part in str(raw).split(",") if part.strip()]
    bad = [attribute for attribute in ids if not _ID.match(attribute)]
    if bad or not 1 <= len(ids) <= 8 or len(set(ids)) != len(ids):
        raise RulesError(f"tabletop-rules: attributes must be 1 to 8 distinct ids (a-z, 0-9, -), comma-separated, not {raw!r}")
    return ids


def bounds_of(settings: dict[str, Any]) -> tuple[int, int]:
    low, high = int(settings.get("minScore", DEFAULT_MIN)), int(settings.get("maxScore", DEFAULT_MAX))
    if low >= high:
        raise RulesError(f"tabletop-rules: minScore {low} must be below maxScore {high}")
    return low, high


def dice_of(settings: dict[str, Any]) -> str:
    dice = settings.get("dice", "d20")
    if dice not in DICE:
        raise RulesError(f"tabletop-rules: dice must be one of {', '.join(DICE)}, not {dice!r}")
    return dice


def score_cost(score: int, low: int) -> int:
    """Points a score costs: 1 a step above the minimum up to 3 steps, 2 a step after that."""
    steps = score - low
    return steps + max(0, steps - 3)


def sheet_cost(scores: dict[str, int], low: int) -> int:
    return sum(score_cost(score, low) for score in scores.values())


def average(low: int, high: int) -> int:
    return (low + high) // 2


def modifier_of(score: int, low: int, high: int) -> int:
    """The check modifier of a score: its distance from the middle of the range."""
    return score - average(low, high)


def sheet_problems(values: dict[str, Any], attributes: list[str], low: int, high: int, budget: int) -> dict[str, str]:
    """{field: why} for an answer to the point-buy form ({} when it is a valid sheet); "" names the whole answer."""
    problems: dict[str, str] = {}
    for attribute in attributes:
        score = values.get(attribute, low)
        if not isinstance(score, int) or isinstance(score, bool):
            if isinstance(score, float) and score.is_integer():
                continue
            problems[attribute] = f"{score!r} is not a whole number"
        elif not low <= score <= high:
            problems[attribute] = f"{score} is outside {low} to {high}"
    unknown = sorted(set(values) - set(attributes))
    if unknown:
        problems[""] = f"unknown attributes: {', '.join(unknown)}"
    if not problems:
        spent = sheet_cost(scores_of(values, attributes, low), low)
        if spent > budget:
            problems[""] = f"the scores cost {spent} points; the budget is {budget}"
    return problems


def scores_of(values: dict[str, Any], attributes: list[str], low: int) -> dict[str, int]:
    return {attribute: int(values.get(attribute, low)) for attribute in attributes}


def point_buy_form(attributes: list[str], low: int, high: int, budget: int, locale: str) -> dict[str, Any]:
    """The form interaction (effects.interactions item) of the point-buy."""
    chinese = locale.startswith("zh")
    names = NAMES["zh" if chinese else "en"]
    properties = {attribute: {"type": "integer", "minimum": low, "maximum": high, "default": low,
                              "title": names.get(attribute, attribute.capitalize())} for attribute in attributes}
    if chinese:
        title = "分配属性点"
        prompt = f"你有 {budget} 点可以分配。每项属性从 {low} 到 {high}；前 3 级每级 1 点，之后每级 2 点。"
    else:
        title = "Your attributes"
        prompt = (f"You have {budget} points to spend. Each attribute goes from {low} to {high}; "
                  "each of the first 3 steps costs 1 point, each step after that 2.")
    return {"kind": "form", "id": FORM_ID, "formId": FORM_ID, "title": title, "prompt": prompt,
            "schema": {"type": "object", "additionalProperties": False, "properties": properties}}


FORM_ID = "point-buy"


def difficulty_of(sentence: str) -> str:
    lowered = sentence.lower()
    for difficulty in ("extreme", "hard", "easy"):
        if any(word in lowered for word in DIFFICULTY_WORDS[difficulty]):
            return difficulty
    return "normal"


def risky_actions(text: str, attributes: list[str]) -> list[tuple[str, str, str]]:
    """(sentence, attribute, difficulty) for each sentence of the player's text that tests an attribute.
    An attribute of the setting with no words of its own is tested when the sentence names it."""
    found = []
    for sentence in _SENTENCES.findall(text or ""):
        lowered = sentence.strip().lower()
        if not lowered:
            continue
        for attribute in attributes:
            words = ATTRIBUTE_WORDS.get(attribute, (attribute,))
            if any(word in lowered for word in words):
                found.append((sentence.strip()[:200], attribute, difficulty_of(lowered)))
                break
        if len(found) == MAX_CHECKS:
            break
    return found


def outcome_of(dice: str, rolls: list[int], modifier: int, target: int) -> str:
    """d20: a natural 20 is a critical success, a natural 1 a critical failure. 2d6: double six and double one."""
    if dice == "d20":
        if rolls[0] == 20:
            return "critical-success"
        if rolls[0] == 1:
            return "critical-failure"
    elif dice == "2d6":
        if rolls == [6, 6]:
            return "critical-success"
        if rolls == [1, 1]:
            return "critical-failure"
    return "success" if sum(rolls) + modifier >= target else "failure"


def roll(dice: str, random_int) -> list[int]:
    """The dice of one check, with ctx.random.int (min <= n < max)."""
    if dice == "d20":
        return [random_int(1, 21)]
    return [random_int(1, 7), random_int(1, 7)]


def mismatches(checks: Any) -> list[str]:
    """Why a tabletop-check@1 receipt's checks do not follow their own dice ([] when every one does)."""
    if not isinstance(checks, list):
        return ["checks is not a list"]
    problems = []
    for index, check in enumerate(checks):
        if not isinstance(check, dict):
            problems.append(f"checks[{index}] is not an object")
            continue
        dice, rolls, modifier, target = check.get("dice"), check.get("rolls"), check.get("modifier"), check.get("target")
        if dice not in DICE or not isinstance(rolls, list) or len(rolls) != (1 if dice == "d20" else 2):
            problems.append(f"checks[{index}]: {rolls!r} are not the dice of {dice!r}")
            continue
        if check.get("total") != sum(rolls) + modifier:
            problems.append(f"checks[{index}]: total {check.get('total')} is not {sum(rolls)} + {modifier}")
        expected = outcome_of(dice, rolls, modifier, target)
        if check.get("outcome") != expected:
            problems.append(f"checks[{index}]: {dice} {rolls}{modifier:+d} against {target} is a {expected}, not {check.get('outcome')}")
    return problems
