"""The scripted model's answers for codex (codex.entries@1).

It reads what a real model would: the player's action (the user message) and the codex runtime's
<runtime-inputs> (the story, the entries the codex already has, the world's characters with their
descriptions), and lists what the text brings up that the codex does not have yet:

- people: the world's characters the text names (by name or alias), described as the world describes them;
- places: the places of a small gazetteer of story places (the lighthouse, the harbour, Gull Point, the
  Drowned Lantern, the cellar, ...), described by the sentence that names them;
- items: "the rusty key", "a letter", "the lens": an object word of a small list, with its adjective;
- rumours: what the player asks someone about ("I ask Mira about the missing boats"), when it is no place,
  person or item.

A known entry (by name or alias, any case, with or without "the") is left out: the scripted story tells
nothing new about it, so the answer is {"entries": []} once everything in the text is known.
"""

from __future__ import annotations

import re
from typing import Any

from services.gateway.providers.scripted.plugin_writers import WriterCall, writes

# (pattern, the entry's name, aliases): the places a scripted story or a player's action in a town at sea names.
PLACES: tuple[tuple[str, str, list[str]], ...] = (
    (r"gull point", "Gull Point", []),
    (r"(?:drowned lantern|the inn\b)", "The Drowned Lantern", ["the inn"]),
    (r"light-?house", "The lighthouse", []),
    (r"harbou?r", "The harbour", ["the harbor"]),
    (r"\bquay\b", "The quay", []),
    (r"\bcellar\b", "The cellar", []),
    (r"\bthe teeth\b", "The Teeth", []),
    (r"\bsaltmere\b", "Saltmere", []),
    (r"\blibrary\b", "The old library", []),
    (r"\bchapel\b", "The ruined chapel", []),
    (r"\bmarket square\b", "The market square", []),
    (r"灯塔", "灯塔", []),
    (r"港口|码头", "港口", []),
    (r"酒馆", "溺灯酒馆", []),
)
ITEM_WORDS = ("key", "lens", "letter", "ring", "knife", "compass", "journal", "logbook", "locket", "chart", "coin purse")
ITEM = re.compile(r"\b(?:the|a|an|his|her|my|your)\s+((?:[a-z]+\s)?(?:" + "|".join(ITEM_WORDS) + r"))\b", re.IGNORECASE)
ASK = re.compile(r"\bask(?:s|ed)?\s+(?P<who>[A-Z][\w' ]{1,30}?)\s+(?:about|what (?:she|he|they) knows about)\s+(?P<topic>[^.!?,;]{3,60}?)(?=\s+and\s|[.!?,;]|$)",
                 re.IGNORECASE)
_ADJECTIVES_NOT = {"the", "a", "an", "old", "his", "her", "my", "your"}
MAX_ENTRIES = 8


def _norm(name: str) -> str:
    text = " ".join(re.sub(r"[^\w\s]", " ", name.casefold()).split())
    return re.sub(r"^(the|a|an)\s+", "", text)


def _sentence_with(text: str, needle: re.Pattern[str]) -> str:
    for sentence in re.split(r"(?<=[.!?。！？\n])\s*", text):
        if needle.search(sentence):
            return " ".join(sentence.split())[:300]
    return ""


def _third_person(sentence: str) -> str:
    """"I pick up the key." -> "The player picks up the key." (a codex describes, it does not quote the player)."""
    match = re.match(r"^I\s+(\w+)(.*)$", sentence)
    if not match:
        return sentence
    verb = match.group(1)
    verb = verb + "es" if verb.endswith(("s", "sh", "ch", "x")) else verb[:-1] + "ies" if verb.endswith("y") and verb[-2:-1] not in "aeiou" else verb + "s"
    return f"The player {verb}{match.group(2)}".replace(" my ", " their ")


def _mentions(text: str, name: str) -> bool:
    if re.fullmatch(r"[\w' .-]+", name, re.ASCII):
        return re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", text, re.IGNORECASE) is not None
    return name in text


def entries_in(player_text: str, story: str, characters: list[dict[str, Any]], known_names: set[str]) -> list[dict[str, Any]]:
    text = f"{player_text}\n{story}"
    entries: list[dict[str, Any]] = []
    taken = set(known_names)

    def add(entry: dict[str, Any]) -> None:
        names = {_norm(entry["name"]), *(_norm(a) for a in entry.get("aliases") or [])}
        if names & taken or len(entries) >= MAX_ENTRIES:
            return
        taken.update(names)
        entries.append(entry)

    for character in characters:
        names = [character.get("name"), *(character.get("aliases") or [])]
        if any(name and _mentions(text, str(name)) for name in names):
            description = str(character.get("description") or "Someone the story names.")
            add({"name": str(character["name"]), "category": "person", "description": description[:300]})
    for pattern, name, aliases in PLACES:
        needle = re.compile(pattern, re.IGNORECASE)
        if needle.search(text):
            sentence = _sentence_with(story, needle) or _third_person(_sentence_with(player_text, needle))
            add({"name": name, "category": "place", **({"aliases": aliases} if aliases else {}),
                 "description": sentence or f"{name}, where the story went."})
    for match in ITEM.finditer(text):
        words = match.group(1).split()
        if words[0].lower() in _ADJECTIVES_NOT:
            words = words[1:]
        name = " ".join(words).lower()
        needle = re.compile(re.escape(match.group(0)), re.IGNORECASE)
        sentence = _sentence_with(story, needle) or _third_person(_sentence_with(player_text, needle))
        add({"name": name[0].upper() + name[1:], "category": "item", "description": sentence or f"A {name}."})
    for match in ASK.finditer(player_text):
        topic = " ".join(match["topic"].split()).rstrip()
        if any(re.search(pattern, topic, re.IGNORECASE) for pattern, _n, _a in PLACES) or ITEM.search(topic):
            continue
        who = match["who"].strip()
        add({"name": topic[0].upper() + topic[1:], "category": "rumour",
             "description": f"Talk of {topic} in town; the player asked {who} about it."[:300]})
    return entries


@writes("codex.entries@1")
def codex_entries(reply: WriterCall) -> dict[str, Any]:
    given = reply.inputs.get("story")
    story = given if isinstance(given, str) else ""
    characters = [c for c in reply.inputs.get("characters") or [] if isinstance(c, dict) and c.get("name")]
    known = {_norm(name) for entry in reply.inputs.get("known") or [] if isinstance(entry, dict)
             for name in [entry.get("name", ""), *(entry.get("aliases") or [])] if name}
    return {"entries": entries_in(reply.player_text, story, characters, known)}
