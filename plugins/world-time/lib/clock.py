"""Story time as minutes since midnight of day 1, and how a turn's words move it (no I/O here)."""

import re

DAY = 24 * 60
DEFAULT_START = "Day 1, 08:00"
DEFAULT_STEP = 20
_START = re.compile(r"^\s*(?:day\s*(\d{1,4})\s*,?\s*)?([0-2]?\d):([0-5]\d)\s*$", re.IGNORECASE)
PERIODS = ((300, "night"), (420, "dawn"), (690, "morning"), (810, "noon"), (1050, "afternoon"), (1200, "dusk"), (1320, "evening"), (DAY, "night"))

# (words, what they do): "next" jumps to the next given hour however far; "at" jumps only when that
# hour is still ahead today (within AT_HORIZON minutes): "At dusk I climb…" said at 20:30 is this
# evening, not tomorrow's dusk; otherwise a number of minutes ("add").
AT_HORIZON = 12 * 60
RULES = (
    (("sleep", "go to bed", "until morning", "next morning", "睡觉", "去睡", "入睡", "睡一觉", "等到天亮", "第二天早上"),
     ("next", 7 * 60, "a night's sleep")),
    (("until dawn", "wait for dawn", "wait for the dawn", "等到黎明"), ("next", 6 * 60, "waiting for dawn")),
    (("at dawn", "at first light", "黎明时", "天亮时"), ("at", 6 * 60, "waiting for dawn")),
    (("until dusk", "wait for dusk", "until evening", "until nightfall", "等到黄昏", "等到傍晚", "等到天黑"),
     ("next", 18 * 60, "waiting for dusk")),
    (("at dusk", "at nightfall", "黄昏时", "傍晚时"), ("at", 18 * 60, "waiting for dusk")),
    (("until noon", "wait for noon", "等到中午"), ("next", 12 * 60, "waiting for noon")),
    (("at noon", "中午时"), ("at", 12 * 60, "waiting for noon")),
    (("rest", "wait", "休息", "等待", "等一会", "等候"), ("add", 60, "resting")),
    (("travel", "journey", "walk to", "ride to", "climb", "赶路", "走到", "爬"), ("add", 45, "travel")),
)


def parse_start(text: str) -> int:
    match = _START.match(text or DEFAULT_START)
    if not match or int(match.group(2)) > 23:
        raise ValueError(f"start: {text!r} is not a time such as \"Day 1, 08:00\"")
    day = int(match.group(1) or 1)
    if day < 1:
        raise ValueError(f"start: {text!r}: days count from 1")
    return (day - 1) * DAY + int(match.group(2)) * 60 + int(match.group(3))


def moment(minutes: int) -> dict:
    of_day = minutes % DAY
    period = next(name for limit, name in PERIODS if of_day < limit)
    return {"day": minutes // DAY + 1, "time": f"{of_day // 60:02d}:{of_day % 60:02d}", "period": period}


def _says(text: str, word: str) -> bool:
    """English words match whole words ("sleep" is not in "sleeping"); Chinese ones anywhere."""
    if word.isascii():
        return re.search(rf"\b{re.escape(word)}\b", text) is not None
    return word in text


def elapsed(now: int, text: str, step: int) -> tuple[int, str]:
    """Minutes this turn takes, and why: the first rule whose words the text has, else `step`."""
    lowered = (text or "").lower()
    for words, (kind, amount, reason) in RULES:
        if any(_says(lowered, word) for word in words):
            if kind == "add":
                return amount, reason
            wait = (amount - now % DAY) % DAY
            if kind == "at" and (wait == 0 or wait > AT_HORIZON):
                continue  # already that time (or just past it): the words say when, not how long
            return wait or DAY, reason
    return step, "the turn's events"
