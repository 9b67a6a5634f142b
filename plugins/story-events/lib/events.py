"""story-events' events: a declared record normalised into the catalogue, and which events fire this turn.

Pure functions over plain values; the runtimes do the reading and writing (runtimes/intake, runtimes/evaluate).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .conditions import ConditionError, Facts, decide, normalise

ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
FIELDS = ("id", "title", "when", "cue", "once", "cooldownTurns", "priority", "sets", "clears")
MAX_CUE = 2000
MAX_TITLE = 120


class EventError(ValueError):
    """A declared event that cannot be used, with the field that is wrong (no plot text in the message)."""

    def __init__(self, event_id: str, where: str, message: str) -> None:
        super().__init__(f"event {event_id}: {where}: {message}")
        self.event_id, self.where, self.problem = event_id, where, message


def fingerprint(records: Mapping[str, Any], dimensions: Iterable[str]) -> str:
    """What the catalogue was built from: the declared records and the dimensions their conditions may name."""
    text = json.dumps({"events": records, "dimensions": sorted(dimensions)}, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalise_event(key: str, record: Any, *, dimensions: Sequence[str], events: Sequence[str]) -> dict[str, Any]:
    """The catalogue's form of one declared event (every default written), or EventError."""
    if not isinstance(record, Mapping):
        raise EventError(key, "record", "an event is an object")
    event_id = record.get("id", key)
    if not isinstance(event_id, str) or not ID.match(event_id) or event_id != key:
        raise EventError(key, "id", "the event's id is its key: letters, digits, '.', '_', '-' (at most 64)")
    extra = sorted(str(name) for name in record if name not in FIELDS)
    if extra:
        raise EventError(key, extra[0], f"not a field of an event (fields: {', '.join(FIELDS)})")
    cue = record.get("cue")
    if not isinstance(cue, str) or not cue.strip() or len(cue) > MAX_CUE:
        raise EventError(key, "cue", f"what happens, for the story: a text of 1 to {MAX_CUE} characters")
    title = record.get("title")
    if title is not None and (not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE):
        raise EventError(key, "title", f"a short public name of 1 to {MAX_TITLE} characters")
    once = record.get("once", True)
    if not isinstance(once, bool):
        raise EventError(key, "once", "true (fires once) or false (may fire again)")
    cooldown, priority = record.get("cooldownTurns", 0), record.get("priority", 0)
    for name, value in (("cooldownTurns", cooldown), ("priority", priority)):
        if isinstance(value, bool) or not isinstance(value, int) or (name == "cooldownTurns" and value < 0):
            raise EventError(key, name, "a whole number" + (" of 0 or more" if name == "cooldownTurns" else ""))
    flags = {}
    for name in ("sets", "clears"):
        value = record.get(name, [])
        if not isinstance(value, list) or not all(isinstance(flag, str) and flag.strip() for flag in value):
            raise EventError(key, name, "a list of flag names")
        flags[name] = sorted({flag.strip() for flag in value})
    if "when" not in record:
        raise EventError(key, "when", "the condition under which the event fires")
    try:
        when = normalise(record["when"], dimensions=dimensions, events=events)
    except ConditionError as error:
        raise EventError(key, error.where, str(error).split(": ", 1)[1]) from None
    event = {"id": event_id, "cue": cue.strip(), "when": when, "once": once, "cooldownTurns": cooldown, "priority": priority, **flags}
    if title is not None:
        event["title"] = title.strip()
    return event


def due(event: Mapping[str, Any], record: Mapping[str, Any] | None, turn: int) -> bool:
    """Whether the event may fire at `turn`, by its history (`fired` record): a once-event never again, a
    repeatable one after its cooldown and never twice in one turn."""
    if not record:
        return True
    if event.get("once", True):
        return False
    last = int(record.get("lastTurn", 0))
    return turn > last and turn - last > int(event.get("cooldownTurns", 0))


def firing(catalogue: Mapping[str, Mapping[str, Any]], history: Mapping[str, Mapping[str, Any]], facts: Facts,
           limit: int, unknowns: list[str] | None = None) -> list[dict[str, Any]]:
    """The events that fire: due, their condition true on the turn's facts, highest priority first (then by
    id), at most `limit`. Conditions are decided on the facts as the turn found them: an event fired now does
    not make another fire in the same turn."""
    ready = []
    for event_id, event in catalogue.items():
        if not due(event, history.get(event_id), facts.turn):
            continue
        if decide(event["when"], facts, unknowns) is True:
            ready.append(dict(event))
    ready.sort(key=lambda event: (-int(event.get("priority", 0)), event["id"]))
    return ready[:max(0, limit)]


def fired_record(event: Mapping[str, Any], previous: Mapping[str, Any] | None, turn: int) -> dict[str, Any]:
    """The public record of an event that fired: its id, title, when and how often; never its cue."""
    record = {"id": event["id"], "count": int((previous or {}).get("count", 0)) + 1,
              "firstTurn": int((previous or {}).get("firstTurn", turn)), "lastTurn": turn}
    if event.get("title"):
        record["title"] = event["title"]
    return record


def cue_of(event: Mapping[str, Any]) -> dict[str, Any]:
    """What the story reads of a fired event (story-event-cue@1's item)."""
    item = {"id": event["id"], "cue": event["cue"]}
    if event.get("title"):
        item["title"] = event["title"]
    return item
