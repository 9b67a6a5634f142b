"""history-compaction: the history.compact@2 provider.

Given the session's history (turns of a player message and the story that answered it) and
the prompt budget, it keeps the newest `keepTurns` turns as they are and folds the older ones,
`turnsPerSummary` at a time, into summary segments. It does not call a model: a summary keeps
what the player did and the first sentence of each answer, so it is quick, repeatable and never
invents anything. The kernel calls it between PreCompaction and PostCompaction.
"""

import re

DEFAULTS = {"budgetTokens": 6000, "keepTurns": 4, "turnsPerSummary": 4}
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_SENTENCE = re.compile(r"^(.+?[.!?。！？])(\s|$)", re.DOTALL)
MAX_SENTENCE = 200


def register(covel):
    covel.provide_extension("history.compact@2", "summaries", compact)


def tokens(text: str) -> int:
    return len(_TOKEN.findall(text or ""))


def first_sentence(text: str) -> str:
    text = " ".join((text or "").split())
    match = _SENTENCE.match(text)
    sentence = match.group(1) if match else text
    return sentence if len(sentence) <= MAX_SENTENCE else sentence[: MAX_SENTENCE - 1] + "…"


def settings_of(ctx) -> dict:
    given = dict(ctx.get_own_settings() or {}) if hasattr(ctx, "get_own_settings") else {}
    return {key: int(given.get(key, default)) for key, default in DEFAULTS.items()}


def compact(ctx, request: dict) -> dict:
    """request: {turns: [{turnId, logicalTurn, playerMessage, narrative}], summaries?: [...]}.

    Answers {compacted: bool, summaries: [{id, fromTurn, toTurn, text}], keepFromTurnId}: the
    summaries replace every turn before keepFromTurnId in the prompt.
    """
    settings = settings_of(ctx)
    turns = [turn for turn in request.get("turns") or [] if isinstance(turn, dict)]
    size = sum(tokens(t.get("playerMessage", "")) + tokens(t.get("narrative", "")) for t in turns)
    older = turns[: max(0, len(turns) - settings["keepTurns"])]
    if size <= settings["budgetTokens"] or not older:
        return {"compacted": False, "summaries": list(request.get("summaries") or []), "keepFromTurnId": turns[0]["turnId"] if turns else ""}
    summaries = list(request.get("summaries") or [])
    step = settings["turnsPerSummary"]
    for start in range(0, len(older), step):
        chunk = older[start : start + step]
        lines = []
        for turn in chunk:
            action = first_sentence(turn.get("playerMessage", ""))
            answer = first_sentence(turn.get("narrative", ""))
            lines.append(" ".join(part for part in (f"The player: {action}" if action else "", answer) if part))
        first, last = chunk[0].get("logicalTurn", 0), chunk[-1].get("logicalTurn", 0)
        summaries.append({"id": f"turns-{first}-{last}", "fromTurn": first, "toTurn": last, "text": " ".join(lines)})
    return {"compacted": True, "summaries": summaries, "keepFromTurnId": turns[len(older)]["turnId"]}
