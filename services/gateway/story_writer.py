"""The scripted model's story replies (narrative-engine@2): short, varied, and on topic.

Templates are picked with a seeded generator (a hash of the conversation), so the same
conversation always gets the same story, and the player's last message is echoed so a
walkthrough reads as a reply to what the player did.
"""

from __future__ import annotations

import random
import re
from typing import Any

NARRATIVE_ENGINE = "narrative-engine@2"
NARRATIVE_ENGINE_ID = "covel:contract:narrative-engine@2"

SCENES = (
    ("the lantern-lit harbor", "salt wind tugs at the ropes of the moored boats"),
    ("the old library", "dust turns slowly in the light from the high windows"),
    ("the forest road", "the pines lean close and the birds fall silent"),
    ("the market square", "stalls of copper pans and bright cloth crowd the cobbles"),
    ("the mountain inn", "a fire crackles and the common room smells of bread"),
    ("the ruined chapel", "ivy has claimed the broken arches and the air is cool"),
)
CHARACTERS = (
    ("Mira", "the harbor-master"),
    ("Old Tobin", "the innkeeper"),
    ("Sela", "a wandering scholar"),
    ("Captain Rhee", "a weathered sailor"),
    ("Brother Anselm", "a soft-spoken monk"),
    ("Kestrel", "a quick-eyed courier"),
)
MOODS = ("curious", "tense", "warm", "mysterious", "hopeful", "wistful")
OPENINGS = (
    "You decide to {action}.",
    "Without hesitating, you {action}.",
    "Taking a slow breath, you {action}.",
    "You {action}, and for a moment everything is still.",
)
CONSEQUENCES = (
    "In {scene}, {detail}. Your choice does not go unnoticed.",
    "Around you, {detail}. Something in {scene} seems to shift in answer.",
    "The moment settles over {scene}; {detail}.",
    "A hush falls across {scene} while {detail}.",
)
LINES = (
    "Well now. Not many would {action_short}. I hope you know what you are doing.",
    "If you mean to {action_short}, you had better hear what I saw last night.",
    "Careful. The last traveller who tried to {action_short} never came back the same.",
    "Ha! I was wondering when someone would {action_short}. Come, I will show you.",
)
ACTIONS = (
    "{name} glances toward the door, then back at you, weighing something unsaid.",
    "{name} sets down a cup and leans in, voice dropping low.",
    "{name} folds a worn map and slides it across to you.",
)
OPENING_SCENES = (
    "The story begins in {scene}, where {detail}.",
    "Dusk finds you in {scene}; {detail}.",
)
OPENING_LINES = (
    "You look like someone with a question. Ask it, then.",
    "Traveller! You arrived just in time. Something strange is happening here.",
)

_FIRST_PERSON = re.compile(r"^(i|i'll|i will|i want to|i try to|let me|let's)\s+", re.IGNORECASE)


def is_story_schema(name: str, schema: dict[str, Any] | None) -> bool:
    if name == NARRATIVE_ENGINE:
        return True
    if not schema:
        return False
    return schema.get("$id") == NARRATIVE_ENGINE_ID or schema.get("title") == NARRATIVE_ENGINE


def _action(player_text: str) -> str:
    """The player's message as a verb phrase in second person: "I open the door." -> "open the door"."""
    text = " ".join(player_text.split())
    text = _FIRST_PERSON.sub("", text).rstrip(" .!?。！？")
    text = re.sub(r"\b(my)\b", "your", text, flags=re.IGNORECASE)
    text = re.sub(r"\b(me)\b", "you", text, flags=re.IGNORECASE)
    if len(text) > 160:
        text = text[:157].rstrip() + "..."
    if text and text[0].isupper() and not text[:2].isupper():
        text = text[0].lower() + text[1:]
    return text


RECALLS = (
    "Not long ago you chose to {earlier}; the memory is still sharp.",
    "Ever since you decided to {earlier}, the place has felt different.",
    "You have not forgotten how you {earlier}.",
)


_INNER_I = re.compile(r"\bI\b")


def _second_person_sentence(player_text: str) -> str | None:
    """"At dusk I climb the path." -> "At dusk you climb the path."; None when the text starts with "I"."""
    text = " ".join(player_text.split()).rstrip(" .!?")
    if _FIRST_PERSON.match(text) or not _INNER_I.search(text):
        return None
    text = re.sub(r"\bI'm\b", "you're", text)
    text = re.sub(r"\bI am\b", "you are", text)
    text = _INNER_I.sub("you", text)
    text = re.sub(r"\bmy\b", "your", text, flags=re.IGNORECASE)
    text = re.sub(r"\bme\b", "you", text, flags=re.IGNORECASE)
    return text[0].upper() + text[1:] + "."


def write_story(player_text: str, seed: str, earlier_player_texts: tuple[str, ...] = ()) -> dict[str, Any]:
    """A narrative-engine@2 reply of 2-5 segments that answers `player_text`.

    The scene and its character stay the same for a whole session (chosen from the session's
    first player message), and a later turn recalls the previous action, so the story reads
    as one story and shows that the history reached the model.
    """
    rng = random.Random(seed)
    setting = random.Random(earlier_player_texts[0] if earlier_player_texts else player_text)
    scene, detail = setting.choice(SCENES)
    name, _role = setting.choice(CHARACTERS)
    action = _action(player_text)
    segments: list[dict[str, str]] = []
    sentence = _second_person_sentence(player_text)
    if action and action.isascii():
        opening = sentence or rng.choice(OPENINGS).format(action=action)
        segments.append({"kind": "narration", "text": opening})
        segments.append({"kind": "narration", "text": rng.choice(CONSEQUENCES).format(scene=scene, detail=detail)})
        short = action if len(action) <= 60 and sentence is None else "do that"
        segments.append({"kind": "dialogue", "speaker": name, "text": rng.choice(LINES).format(action_short=short)})
    elif action:
        segments.append({"kind": "narration", "text": f"You act: \u201c{action}\u201d"})
        segments.append({"kind": "narration", "text": rng.choice(CONSEQUENCES).format(scene=scene, detail=detail)})
        segments.append({"kind": "dialogue", "speaker": name, "text": "Interesting. Go on, then; I am watching."})
    else:
        segments.append({"kind": "narration", "text": rng.choice(OPENING_SCENES).format(scene=scene, detail=detail)})
        segments.append({"kind": "dialogue", "speaker": name, "text": rng.choice(OPENING_LINES)})
    earlier = _action(earlier_player_texts[-1]) if earlier_player_texts else ""
    if earlier and earlier.isascii():
        segments.insert(1, {"kind": "narration", "text": rng.choice(RECALLS).format(earlier=earlier)})
    if rng.random() < 0.5:
        segments.append({"kind": "action", "speaker": name, "text": rng.choice(ACTIONS).format(name=name)})
    # Capitalise the first letter of every segment.
    for segment in segments:
        segment["text"] = segment["text"][0].upper() + segment["text"][1:]
    return {
        "segments": segments[:5],
        "cues": {"scene": scene[0].upper() + scene[1:], "present": [name], "mood": rng.choice(MOODS)},
        "yield": "user",
    }
