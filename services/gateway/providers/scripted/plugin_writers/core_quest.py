"""The scripted model's quest log (core-quest/log, core-quest.changes@1), from the player's words.

- A quest starts when the player takes a task on: "I promise Mira I will find the missing boats",
  "I agree to help Mira", "I take on the job of mending the nets", "I offer to light the lighthouse";
  or when a line of the story asks for something ("Will you find my brother?") and the player says yes.
  Its title is the task as an imperative ("Find the missing boats"), its giver a name before it.
- An open quest (runtime-inputs.quests) advances when the player's words name it (a word of its
  title such as "boats"), completes when they also say it is done ("I find the missing boats and bring
  them home", "finally", "return"), and fails when the player gives it up ("I give up on the boats").
"""

from __future__ import annotations

import re
from typing import Any

from services.gateway.providers.scripted.plugin_writers import WriterCall, writes

_GOAL = r"(?P<goal>[a-z][A-Za-z' -]{2,60}?)"
_END = r"(?=[.,!?;]| and then | but |$)"
_STARTS = (
    re.compile(r"\b(?:promise|promises|swear|swears|vow|vows|agree|agrees|offer|offers|volunteer|volunteers|decide|decides)\b"
               r"(?:\s+(?P<giver>[A-Z][a-z]+(?: [A-Z][a-z]+)?))?\s+(?:that\s+)?(?:I will |I'll |to )" + _GOAL + _END),
    re.compile(r"\b(?:take|takes|accept|accepts)\s+(?:on\s+)?(?:the|a|her|his)\s+(?:task|job|quest|request)\s+(?:of\s+|to\s+)?" + _GOAL + _END,
               re.IGNORECASE),
    re.compile(r"\bI(?:'ll| will)\s+(?P<goal>(?:find|help|bring|fetch|rescue|save|light|repair|mend|deliver|search for|look for)\b[A-Za-z' -]{1,60}?)" + _END),
)
_ASKED = re.compile(r"\b(?:please|will you|would you|could you|can you)\s+(?P<goal>(?:find|help|bring|fetch|rescue|save|light|repair|mend|deliver)\b[^.?!\"\u201d]{2,60})",
                    re.IGNORECASE)
_YES = re.compile(r"\b(?:yes|agree|accept|i will|i'll|of course|gladly)\b", re.IGNORECASE)
_DONE = re.compile(r"\b(?:found|finally|at last|bring (?:them|it|her|him) (?:back|home)|brought|return(?:s|ed)? (?:with|the)|complete[sd]?|finish(?:es|ed)?|rescue[sd]?|deliver(?:s|ed)?)\b"
                   r"|\bfind (?:the |your |her |his )?(?:lost |missing )?", re.IGNORECASE)
_GIVE_UP = re.compile(r"\b(?:give up|gives up|abandon|abandons|refuse to|no longer)\b", re.IGNORECASE)
_STOP = frozenset({"find", "help", "bring", "fetch", "rescue", "save", "light", "repair", "mend", "deliver", "search", "look",
                   "the", "a", "an", "of", "for", "to", "and", "with", "from", "her", "his", "their", "your", "my", "lost",
                   "missing", "back", "home", "again", "what", "who", "out"})


def _title(goal: str, player: bool = True) -> str:
    goal = goal.strip(" .,'")
    if player:
        goal = re.sub(r"\b(?:my|me)\b", lambda m: {"my": "your", "me": "you"}[m.group(0)], goal)
    goal = re.sub(r"\s+", " ", goal)
    return (goal[0].upper() + goal[1:])[:80]


def _words(title: str) -> set[str]:
    return {w.rstrip("s") for w in re.findall(r"[a-z]+", title.lower()) if len(w) >= 3 and w not in _STOP}


def _mentions(text: str, title: str) -> bool:
    said = {w.rstrip("s") for w in re.findall(r"[a-z]+", text.lower())}
    return bool(_words(title) & said)


def quest_changes(player_text: str, story: str, quests: list[dict[str, Any]]) -> dict[str, Any]:
    text = " ".join(player_text.split())
    changes: list[dict[str, Any]] = []
    started = None
    for pattern in _STARTS:
        match = pattern.search(text)
        if match:
            started = (match.group("goal"), match.groupdict().get("giver") or "", True)
            break
    if started is None and _YES.search(text):
        asked = _ASKED.search(story or "")
        if asked:
            started = (asked.group("goal"), "", False)
    open_quests = [q for q in quests if isinstance(q, dict) and q.get("status") == "active"]
    if started is not None:
        goal, giver, by_player = started
        if not giver:
            giver = next(iter(re.findall(r"\b(?:ask|asks|tell|tells|promise|promises|help|helps)\s+([A-Z][a-z]+)", text)), "")
        title = _title(goal, by_player)
        same = next((q for q in quests if isinstance(q, dict) and q.get("title", "").lower() == title.lower()), None)
        if same is None or same.get("status") != "active":
            change = {"quest": title, "change": "started", "note": f"The player took it on: {text[:150]}",
                      "objectives": [title]}
            if giver and giver.lower() not in title.lower():
                change["giver"] = giver
            if same is not None:
                change["id"] = same["id"]
            changes.append(change)
        return {"changes": changes}
    for quest in open_quests:
        if not _mentions(text, quest.get("title", "")):
            continue
        base = {"quest": quest["title"], "id": quest["id"]}
        if _GIVE_UP.search(text):
            changes.append({**base, "change": "failed", "note": f"The player gave it up: {text[:150]}"})
        elif _DONE.search(text):
            changes.append({**base, "change": "completed", "note": f"Done: {text[:180]}"})
        else:
            changes.append({**base, "change": "advanced", "note": f"The player followed it up: {text[:150]}"})
        if len(changes) >= 6:
            break
    return {"changes": changes}


@writes("core-quest.changes@1")
def core_quest_changes(reply: WriterCall) -> dict[str, Any]:
    story = (reply.inputs.get("narrative") or {}).get("value") if isinstance(reply.inputs.get("narrative"), dict) else ""
    quests = (reply.inputs.get("quests") or {}).get("value") if isinstance(reply.inputs.get("quests"), dict) else []
    return quest_changes(reply.player_text, str(story or ""), list(quests or []))
