"""The scripted model's fact extraction (world-ir, world-ir.extraction@1), from the turn's words.

- characters: the known characters (runtime-inputs.known: the world's cast, then those world-ir
  recorded) whose name or alias the player's words or the story name, and "you";
- relations: "you" towards each of them, by the player's verb (asked, thanked, helped, promised to help,
  threatened, gave something to; else "met");
- events: one, "You <the player's action>.", with those participants and the vocabulary terms
  (runtime-inputs.vocabularies: other plugins' items and quests) the words name, by the vocabulary's names;
- clues: the story's first sentence that hints at something (saw, heard, missing, strange, secret, ...).
"""

from __future__ import annotations

import re
from typing import Any

from services.gateway.providers.scripted.plugin_writers import WriterCall, writes

_VERBS = (("promise", "promised to help"), ("agree to help", "promised to help"), ("thank", "thanked"), ("help", "helped"),
          ("threaten", "threatened"), ("insult", "insulted"), ("give", "gave something to"), ("ask", "asked"),
          ("tell", "talked with"), ("follow", "followed"))
_HINTS = re.compile(r"\b(?:saw|seen|heard|missing|strange|secret|hidden|rumou?r|whisper|last night|never came back|lens|light)\b", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"^(?:i|i'll|i will|let me)\s+", re.IGNORECASE)


def _value(inputs: dict[str, Any], name: str) -> Any:
    slot = inputs.get(name)
    return slot.get("value") if isinstance(slot, dict) else None


def _named(text: str, name: str) -> bool:
    if not name:
        return False
    if name.isascii():
        return re.search(rf"(?<![A-Za-z]){re.escape(name)}(?![A-Za-z])", text, re.IGNORECASE) is not None
    return name in text


def _action(player_text: str) -> str:
    text = _FIRST_PERSON.sub("", " ".join(player_text.split())).rstrip(" .!?")
    text = re.sub(r"\bmy\b", "your", text, flags=re.IGNORECASE)
    text = re.sub(r"\bI\b", "you", text)
    return text[:200]


_VERB_WORDS = frozenset({"find", "help", "bring", "fetch", "rescue", "save", "light", "repair", "mend", "deliver", "the", "and", "with"})


def _names_term(words: str, term: dict[str, Any], kind: str) -> bool:
    """A term the words name: by its name or an alias; a quest also by every longer word of its title ("the missing boats")."""
    names = [term.get("name", ""), *(term.get("aliases") or [])]
    if any(_named(words, name) or _named(words, name.rstrip("s")) for name in names if len(name) >= 3):
        return True
    if kind == "quest":
        content = [w for w in re.findall(r"[a-z]+", term.get("name", "").lower()) if len(w) >= 4 and w not in _VERB_WORDS]
        return bool(content) and all(_named(words, w) or _named(words, w.rstrip("s")) for w in content)
    return False


def extraction(player_text: str, story: str, known: list[dict[str, Any]], vocabularies: list[dict[str, Any]]) -> dict[str, Any]:
    words = f"{player_text}\n{story}"
    characters: list[dict[str, Any]] = []
    for character in known:
        if character.get("player"):
            continue
        names = [character.get("name", ""), *(character.get("aliases") or [])]
        # A "the"-less first name matches too: "The traveller" / "Old Tobin" are also "Tobin" through the aliases.
        if any(_named(words, name) for name in names if name):
            characters.append({"name": character["name"]})
    lowered = player_text.lower()
    verb = next((kind for word, kind in _VERBS if word in lowered), "met")
    relations = [{"from": "you", "to": c["name"], "kind": verb, "note": _action(player_text)[:200]}
                 for c in characters if _named(player_text, c["name"]) or verb == "met"][:6]
    terms: list[str] = []
    for vocabulary in vocabularies:
        for term in vocabulary.get("terms") or []:
            if _names_term(words, term, str(vocabulary.get("kind", ""))) and term["name"] not in terms:
                terms.append(term["name"])
    action = _action(player_text)
    events = [{"summary": f"You {action[0].lower() + action[1:]}." if action.isascii() else f"你：{action}",
               "participants": ["you", *[c["name"] for c in characters[:6]]], "terms": terms[:8]}] if action else []
    clues = []
    for sentence in re.split(r"(?<=[.!?\u201d])\s+", story or ""):
        if _HINTS.search(sentence) and len(sentence) > 12:
            about = [c["name"] for c in characters if _named(sentence, c["name"])][:3]
            clues.append({"text": sentence.strip()[:300], "about": about + [t for t in terms if _named(sentence, t)][:3]})
            break
    return {"characters": characters[:12], "relations": relations, "events": events, "clues": clues}


@writes("world-ir.extraction@1")
def world_ir_extraction(reply: WriterCall) -> dict[str, Any]:
    story = _value(reply.inputs, "narrative")
    known = (_value(reply.inputs, "known") or {}).get("characters") if isinstance(_value(reply.inputs, "known"), dict) else []
    vocabularies = _value(reply.inputs, "vocabularies") or []
    return extraction(reply.player_text, str(story or ""), list(known or []), [v for v in vocabularies if isinstance(v, dict)])
