"""world-ir's pure part: the model's extraction checked, names resolved to stable ids, records merged.

No I/O here: the handler reads the plugin data and the inputs, calls the model, and writes what
`merge_turn` returns. Ids are stable across turns because they come from what is already known,
in this order: the world model's characters (id, name, alias), the characters world-ir already
recorded (name, alias), other plugins' vocabularies (world-ir.vocabulary@1 terms by id, name or
alias), and only then a slug of the name (a stable hash for names in other scripts).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

PLAYER_WORDS = frozenset({"you", "the player", "player", "yourself", "the player's character", "你", "玩家", "主角"})
_ARTICLES = re.compile(r"^(?:the|a|an|some|your|my|his|her|their)\s+", re.IGNORECASE)
MAX_ALIASES = 8
MAX_CHARACTERS = 40
MAX_TERMS = 80
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


class ExtractionError(ValueError):
    """The model's answer does not fit the extraction schema: the run fails and nothing commits."""


def fold(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def bare(text: str) -> str:
    """A name without a leading article, folded: "The rusty key" -> "rusty key"."""
    return _ARTICLES.sub("", fold(text)).strip()


def slug(name: str, prefix: str = "x") -> str:
    key = re.sub(r"[^a-z0-9]+", "-", str(name).strip().lower()).strip("-")[:64].strip("-")
    if key and str(name).strip().isascii():
        return key
    return f"{prefix}-" + hashlib.sha1(fold(name).encode("utf-8")).hexdigest()[:10]


def short_id(text: str, prefix: str) -> str:
    """A stable id for a free text (a clue, a long relation): the same words give the same id."""
    return f"{prefix}-" + hashlib.sha1(fold(text).encode("utf-8")).hexdigest()[:10]


def check_extraction(answer: Any, schema: dict) -> dict:
    """The model's answer, or ExtractionError naming the first problems."""
    import jsonschema  # here, not at import time

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(answer), key=lambda e: list(e.absolute_path))
    if errors:
        where = "; ".join(f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:3])
        raise ExtractionError(f"the model's extraction does not fit world-ir's schema: {where}")
    return answer


class Names:
    """Who and what a name means in this session: characters and vocabulary terms."""

    def __init__(self, world_characters=(), known_characters=None, vocabularies=()) -> None:
        self.characters: dict[str, dict[str, Any]] = {}   # folded name -> {id, name, world}
        self.player = {"id": "player", "name": "the player", "world": False}
        for character in world_characters or ():
            if not character.get("id"):
                continue
            world_id = str(character["id"]).lower()
            entry = {"id": world_id if _ID.match(world_id) else slug(world_id, "character"),
                     "name": str(character.get("name") or character["id"]), "world": True}
            if character.get("type") == "player":
                self.player = entry
            for name in (character.get("id"), character.get("name"), *(character.get("aliases") or [])):
                if name:
                    self.characters.setdefault(bare(name), entry)
        for record in (known_characters or {}).values():
            entry = {"id": record["id"], "name": record["name"], "world": bool(record.get("world"))}
            for name in (record["name"], *(record.get("aliases") or [])):
                self.characters.setdefault(bare(name), entry)
        self.terms: dict[str, dict[str, Any]] = {}       # folded name -> {source, kind, id, name}
        for vocabulary in vocabularies or ():
            if not isinstance(vocabulary, dict):
                continue
            for term in vocabulary.get("terms") or ():
                ref = {"source": vocabulary["source"], "kind": vocabulary["kind"], "id": term["id"], "name": term["name"]}
                for name in (term["name"], term["id"], *(term.get("aliases") or [])):
                    self.terms.setdefault(bare(name), ref)

    def character(self, name: str) -> dict[str, Any]:
        """{id, name, world, new} of a character name; `new` when nothing knew it yet (then it is known from now on)."""
        if fold(name) in PLAYER_WORDS:
            return {**self.player, "new": False}
        known = self.characters.get(bare(name))
        if known is not None:
            return {**known, "new": False}
        entry = {"id": slug(name, "character"), "name": " ".join(name.split())[:80], "world": False}
        self.characters[bare(name)] = entry
        return {**entry, "new": True}

    def term(self, name: str) -> dict[str, Any] | None:
        """The vocabulary term a name means (by name, id or alias, also with a plural 's'), or None."""
        key = bare(name)
        found = self.terms.get(key) or (self.terms.get(key[:-1]) if key.endswith("s") else None)
        return dict(found) if found else None

    def ref(self, name: str) -> dict[str, Any]:
        """What a name in an event or clue is about: a vocabulary term, a character, or a plain mention."""
        term = self.term(name)
        if term is not None:
            return term
        if fold(name) in PLAYER_WORDS or bare(name) in self.characters:
            character = self.character(name)
            return {"source": "world-ir", "kind": "character", "id": character["id"], "name": character["name"]}
        return {"source": "world-ir", "kind": "mention", "id": slug(name, "mention"), "name": " ".join(name.split())[:120]}


def _seen(record: dict[str, Any] | None, turn: int) -> dict[str, int]:
    if record is None:
        return {"firstSeen": turn, "lastSeen": turn, "turns": 1}
    again = record.get("lastSeen") != turn
    return {"firstSeen": record.get("firstSeen", turn), "lastSeen": turn, "turns": record.get("turns", 1) + (1 if again else 0)}


def merge_turn(answer: dict[str, Any], turn: int, names: Names, known: dict[str, dict[str, dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, dict[str, dict[str, Any]]]]:
    """(world-ir-provider@1 value of this turn, {namespace: {key: record}} to write).

    `known` holds the records already committed (or written earlier this turn), by namespace:
    characters, relations, clues (events are new every turn: `t<turn>-<n>`)."""
    writes: dict[str, dict[str, dict[str, Any]]] = {"characters": {}, "relations": {}, "events": {}, "clues": {}}
    characters = known.get("characters", {})

    def touch_character(name: str, description: str = "") -> dict[str, Any]:
        who = names.character(name)
        current = writes["characters"].get(who["id"]) or characters.get(who["id"])
        record = {"id": who["id"], "name": current["name"] if current else who["name"],
                  "aliases": list((current or {}).get("aliases") or []), "world": who["world"],
                  "description": (description or (current or {}).get("description") or "")[:200],
                  **_seen(characters.get(who["id"]), turn)}
        spoken = " ".join(name.split())[:80]
        if fold(spoken) != fold(record["name"]) and fold(spoken) not in PLAYER_WORDS and \
                fold(spoken) not in map(fold, record["aliases"]) and len(record["aliases"]) < MAX_ALIASES:
            record["aliases"].append(spoken)
        writes["characters"][who["id"]] = record
        return record

    for character in answer["characters"]:
        touch_character(character["name"], character.get("description", ""))

    for relation in answer["relations"]:
        source, target = touch_character(relation["from"]), touch_character(relation["to"])
        if source["id"] == target["id"]:
            continue
        kind = " ".join(relation["kind"].split())[:40]
        key = slug(f"{source['id']} {kind} {target['id']}", "relation")
        if len(key) > 64 or not key[0].isalnum():
            key = short_id(f"{source['id']}|{kind}|{target['id']}", "relation")
        current = known.get("relations", {}).get(key)
        writes["relations"][key] = {"id": key, "from": source["id"], "to": target["id"], "kind": kind,
                                    "note": (relation.get("note") or (current or {}).get("note") or "")[:200],
                                    **_seen(current, turn)}

    for number, event in enumerate(answer["events"], start=1):
        participants = []
        for name in event["participants"]:
            who = touch_character(name)["id"]
            if who not in participants:
                participants.append(who)
        terms = _refs(event["terms"], names)
        key = f"t{turn}-{number}"
        writes["events"][key] = {"id": key, "turn": turn, "summary": " ".join(event["summary"].split())[:300],
                                 "participants": participants, "terms": terms}

    for clue in answer["clues"]:
        text = " ".join(clue["text"].split())[:300]
        key = short_id(text, "clue")
        current = known.get("clues", {}).get(key)
        writes["clues"][key] = {"id": key, "text": text, "about": _refs(clue["about"], names), **_seen(current, turn)}

    mentioned: list[dict[str, Any]] = []
    for record in [*writes["events"].values(), *writes["clues"].values()]:
        for ref in record.get("terms") or record.get("about") or []:
            if ref["source"] != "world-ir" and ref not in mentioned:
                mentioned.append(ref)
    facts = {"turn": turn, **{namespace: list(records.values()) for namespace, records in writes.items()}, "terms": mentioned[:MAX_TERMS]}
    facts["characters"] = facts["characters"][:MAX_CHARACTERS]
    return facts, writes


def known_characters(world_characters, recorded) -> list[dict[str, Any]]:
    """What the prompt shows as already known: the world's cast, then the characters world-ir recorded."""
    shown: list[dict[str, Any]] = []
    for character in world_characters or ():
        if character.get("id"):
            entry = {"id": str(character["id"]), "name": str(character.get("name") or character["id"])}
            if character.get("type") == "player":
                entry["player"] = True
            shown.append(entry)
    ids = {entry["id"] for entry in shown}
    for record in recorded or ():
        if record["id"] not in ids:
            shown.append({"id": record["id"], "name": record["name"], **({"aliases": record["aliases"]} if record.get("aliases") else {})})
    return shown


def _refs(names_given, names: Names) -> list[dict[str, Any]]:
    refs: list[dict[str, Any]] = []
    for name in names_given:
        ref = names.ref(name)
        if ref not in refs:
            refs.append(ref)
    return refs


def vocabulary_index(vocabularies) -> list[dict[str, Any]]:
    """What the prompt shows of the vocabularies: [{source, kind, terms: [{id, name, aliases?}]}]."""
    shown = []
    for vocabulary in vocabularies or ():
        if isinstance(vocabulary, dict) and vocabulary.get("terms"):
            terms = [{key: term[key] for key in ("id", "name", "aliases") if key in term} for term in vocabulary["terms"]]
            shown.append({"source": vocabulary["source"], "kind": vocabulary["kind"], "terms": terms})
    return shown
