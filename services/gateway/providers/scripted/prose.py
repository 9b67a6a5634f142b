"""How the scripted model turns what it reads into clean prose: the player's words in second person, speech told
as speech, a memory record as a sentence (no record markers), intentions not taken for deeds, and templates that do
not repeat from one turn to the next."""

from __future__ import annotations

import re
from collections.abc import Sequence

FIRST_PERSON = re.compile(r"^(i|i'll|i will|i want to|i try to|let me|let's)\s+", re.IGNORECASE)
_INNER = ((re.compile(r"\bI'm\b"), "you're"), (re.compile(r"\bI am\b"), "you are"), (re.compile(r"\bI'll\b"), "you'll"),
          (re.compile(r"\bI've\b"), "you've"), (re.compile(r"\bI\b"), "you"), (re.compile(r"\bmy\b", re.IGNORECASE), "your"),
          (re.compile(r"\bmine\b", re.IGNORECASE), "yours"), (re.compile(r"\bme\b", re.IGNORECASE), "you"),
          (re.compile(r"\bmyself\b", re.IGNORECASE), "yourself"))
_GREETING = re.compile(r"^(hello|hi|hey|evening|good (morning|evening|day|night)|greetings|thank you|thanks|excuse me|sorry|well|yes|no)\b",
                       re.IGNORECASE)
# Words that make a deed an intention: "I will find the boats" finds nothing yet.
_INTENT = re.compile(r"\b(will|'ll|shall|going to|want to|wants to|try to|plan to|promise|promises|hope to|mean to|if)\b", re.IGNORECASE)
# A memory record's parts that are bookkeeping, not prose: "also called …", its kind ("npc", "player", …).
_MARKER = re.compile(r"^(also called\b.*|[a-z_-]{2,12})$")


def second_person(text: str) -> str:
    """Every first-person word of `text` turned to the second person."""
    for pattern, replacement in _INNER:
        text = pattern.sub(replacement, text)
    return text


def is_speech(player_text: str) -> bool:
    """Whether the player's words are a line spoken, not a deed: quoted, a greeting, a question or an exclamation
    with no "I" doing something."""
    text = " ".join(player_text.split())
    if not text or FIRST_PERSON.match(text):
        return False
    if text[0] in "\"'“‘「":
        return True
    return bool(_GREETING.match(text)) or (text.endswith(("?", "!", "…", "...")) and not re.search(r"\bI\b", text))


def spoken(player_text: str) -> str:
    """The player's line as the story tells it."""
    line = " ".join(player_text.split()).strip("\"'“”‘’「」")
    return f"You say, \u201c{line}\u201d"


def is_intention(player_text: str, at: int) -> bool:
    """Whether the words before position `at` of the sentence that holds it make what follows an intention."""
    start = max(player_text.rfind(mark, 0, at) for mark in ".!?\n")
    return bool(_INTENT.search(player_text[start + 1:at]))


def recollection(remembered: str, *, english: bool) -> str:
    """A memory-search hit as a sentence of the story, or "" when nothing of it reads as one (a record of the
    player's own character, or only markers). "Mira. also called 米拉. npc. The harbor-master. Sharp." ->
    "You think of Mira, the harbor-master. Sharp."."""
    parts = [part.strip().rstrip(".") for part in re.split(r"\.\s+|\.$", remembered.strip()) if part.strip().rstrip(".")]
    kinds = [part for part in parts if _MARKER.match(part)]
    if "player" in kinds:
        return ""  # the player's own character: nothing to remember about oneself
    prose = [part for part in parts if not _MARKER.match(part) and (part.isascii() or not english)]
    if not prose:
        return ""
    if not kinds and len(prose) == 1:
        head = prose[0].partition(": ")[0]
        return f"You think of {_thing(prose[0])}." if head != prose[0] and len(head.split()) <= 5 else f"You remember: {prose[0]}."
    if len(prose) == 1:
        return ""
    subject, first, rest = _thing(prose[0]), prose[1], prose[2:]
    if first[:4] in ("The ", "An ") or first[:2] == "A ":
        return " ".join([f"You think of {subject}, {_article_lowered(first)}.", *(f"{part}." for part in rest)])
    return " ".join([f"You think of {subject}.", *(f"{part}." for part in [first, *rest])])


def _thing(text: str) -> str:
    """A record's subject as the story names it: "The Drowned Lantern: The harbor inn, …" (a codex line) ->
    "the Drowned Lantern: the harbor inn, …"; anything else with only its leading article lowered."""
    head, _, description = text.partition(": ")
    if description and len(head.split()) <= 5:
        return f"{_article_lowered(head)}: {_article_lowered(description)}"
    return _article_lowered(text)


def _article_lowered(text: str) -> str:
    return text[0].lower() + text[1:] if text[:4] in ("The ", "An ") or text[:2] == "A " else text


def rotating(options: Sequence[str], seed: int, turn: int) -> str:
    """One of `options`, a different one each turn of a session (the seed picks where the turns start)."""
    return options[(seed + turn) % len(options)]
