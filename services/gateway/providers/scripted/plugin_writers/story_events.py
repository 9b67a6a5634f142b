"""story-events' plan (story-event.plan@1): how this turn's fired events enter the scene.

Deterministic and on topic: one plan per event of runtime-inputs.cue (evaluate's story-event-cue@1), in
its order and with its id; the entrance follows from the player's words, the beats are the cue's sentences
(every fact of the cue, nothing more), the characters the capitalised names the cue holds (a Chinese cue:
the names of the world's cast it holds, when the prompt lists them)."""

from __future__ import annotations

import re
from typing import Any

from ..story_replies import world_cast
from . import WriterCall, writes

PLAN = "story-event.plan@1"
_SENTENCE = re.compile(r"[^.!?。！？]+[.!?。！？]?")
_NAME = re.compile(r"\b([A-Z][a-z]+(?:'s)?)\b")
_NOT_NAMES = {"The", "A", "An", "She", "He", "They", "It", "Its", "Her", "His", "Their", "Beneath", "Under", "Above", "When", "Then"}


def _cue_events(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    slot = inputs.get("cue")
    value = slot.get("value") if isinstance(slot, dict) else None
    events = value.get("events") if isinstance(value, dict) else None
    return [event for event in events or [] if isinstance(event, dict) and event.get("id") and event.get("cue")]


def beats_of(cue: str) -> list[str]:
    """The cue's sentences, at most four (the last holds the rest)."""
    sentences = [s.strip() for s in _SENTENCE.findall(" ".join(cue.split())) if s.strip()]
    if len(sentences) > 4:
        sentences = [*sentences[:3], " ".join(sentences[3:])]
    return [sentence[:240] for sentence in sentences] or [cue[:240]]


def characters_of(cue: str, system: str) -> list[str]:
    names: list[str] = []
    for name, _ in world_cast(system):
        if name and name in cue and name not in names:
            names.append(name)
    for word in _NAME.findall(cue):
        name = word.removesuffix("'s")
        if name not in _NOT_NAMES and name not in names:
            names.append(name)
    return names[:6]


def _chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def entrance_of(cue: str, player_text: str) -> str:
    said = " ".join(player_text.split()).rstrip(" .!?。！？")
    if _chinese(cue):
        return f"就在玩家{('说完“' + said[:60] + '”') if said else '行动'}之后，事件在眼前发生：{beats_of(cue)[0]}"[:400]
    opening = beats_of(cue)[0]
    return (f"Right after the player's \"{said[:80]}\", it breaks into the scene: {opening}" if said else
            f"It breaks into the scene: {opening}")[:400]


@writes(PLAN)
def story_event_plan(reply: WriterCall) -> dict[str, Any]:
    plans = []
    for event in _cue_events(reply.inputs)[:3]:
        cue = str(event["cue"])
        plan: dict[str, Any] = {"id": str(event["id"]), "entrance": entrance_of(cue, reply.player_text), "beats": beats_of(cue)}
        characters = characters_of(cue, reply.system)
        if characters:
            plan["characters"] = characters
        plans.append(plan)
    return {"events": plans}
